"""A run that failed is not "completed": the Anthropic backend honours `key_required = false` as the upfront check
does, and a run whose games failed ends with a status and an exit code that say so."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import duckdb

from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.testing import FakeModelServer

ROOT = Path(__file__).resolve().parents[2]


def test_anthropic_endpoint_without_key_is_played_when_no_key_is_required(tmp_path: Path) -> None:
    with FakeModelServer(latency_s=0.0) as srv:
        exp = parse_experiment(
            {
                "name": "nokey",
                "games_per_cell": 3,
                "cells": [{"name": "c", "agents": {"mafioso": "proxy/claude", "default": "policy/informed"}}],
                "endpoints": {
                    "proxy": {"kind": "anthropic", "base_url": srv.base_url_anthropic, "key_required": False}
                },
                "warehouse": str(tmp_path / "w.duckdb"),
            },
            "<test>",
        )
        s = asyncio.run(run_study(exp, progress=False))
        sent = [r for r in srv.requests if r["path"].endswith("/messages")]
    assert sent and s.games_failed == 0 and s.status == "completed" and s.exit_code == 0
    assert s.games_done == 3


EXPERIMENT = """
name = "{name}"
games_per_cell = 4
warehouse = "{warehouse}"
[[cells]]
name = "c"
agents = {{ mafioso = "flaky/m", default = "policy/random" }}
[endpoints.flaky]
kind = "fake"
options = {{ p_server_error = {p} }}
[models.default]
max_attempts = 1
backoff_base_s = 0.0
"""


def _run(tmp_path: Path, name: str, p: float) -> tuple[subprocess.CompletedProcess[str], str]:
    exp = tmp_path / f"{name}.toml"
    warehouse = tmp_path / f"{name}.duckdb"
    exp.write_text(EXPERIMENT.format(name=name, warehouse=warehouse, p=p))
    proc = subprocess.run(
        [sys.executable, "-m", "mafiabench.cli", "run", str(exp), "--no-prefect", "--no-progress"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        (status,) = con.execute("select status from raw_runs").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    return proc, str(status)


def test_every_game_failed_means_status_failed_and_exit_1(tmp_path: Path) -> None:
    proc, status = _run(tmp_path, "allfail", 1.0)
    assert (proc.returncode, status) == (1, "failed"), proc.stderr
    assert "status                    failed" in proc.stdout


def test_some_games_failed_means_exit_3_and_a_status_that_says_so(tmp_path: Path) -> None:
    proc, status = _run(tmp_path, "somefail", 0.2)
    assert (proc.returncode, status) == (3, "completed-with-failures"), proc.stderr
    ok, ok_status = _run(tmp_path, "nofail", 0.0)
    assert (ok.returncode, ok_status) == (0, "completed")
