"""A Ctrl-C during a run's rehearsal (`Study._rehearse`, transform.build.rehearsal) stops the run as any Ctrl-C
does: a real `mafiabench run` in its own process group gets SIGINT as a terminal sends it (the rehearsal's process
hears it too) once its rehearsal started, or once that rehearsal writes its copy of the warehouse. The run exits 130
within 3 s with the resume hint and no traceback, leaves no process and no scratch folder, keeps no record on the
machine from the cut rehearsal, and the next build publishes with dbt."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mafiabench.publish import build_warehouse
from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.warehouse.raw import connect
from support.processes import CLI, Spawn, cli_env, cmdline, ctrl_c, descendants, exists, wait_for

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

# Games of a model at 150 ms a call, 4 at a time: far longer than the Ctrl-C is sent into (a few seconds in).
EXPERIMENT = """
name = "ctrlc"
games_per_cell = 400
shard_size = 4
warehouse = "{warehouse}"

[[cells]]
name = "slow"
agents = {{ mafioso = "slowfake/m", default = "policy/random" }}

[endpoints.slowfake]
kind = "fake"
options = {{ latency_ms = 150 }}

[concurrency]
games = 4
processes = 1
"""


def _rehearsing(pid: int) -> list[int]:
    return [p for p in descendants(pid) if "mafiabench.transform.build.rehearsal" in cmdline(p)]


def _writing_its_copy(tmp: Path) -> bool:
    """The rehearsal's copy (the warehouse's name, `w`) has a write-ahead log: its build is writing (`make_copy`
    ends with a checkpoint)."""
    return any(tmp.glob("mafiabench-rehearsal-*/copy/w.duckdb.wal"))


def _records(cache: Path) -> set[str]:
    return {p.name for p in cache.rglob("*") if p.is_file() and p.name.startswith(("run-", "test-"))}


@pytest.mark.parametrize("when", ["started", "writing"])
def test_a_ctrl_c_during_the_rehearsal_stops_the_run_and_keeps_nothing(
    tmp_path: Path, spawn: Spawn, when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "1")  # a rehearsal is due only where the machine keeps records
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(cache))
    warehouse = tmp_path / "w.duckdb"
    first = parse_experiment({"name": "first", "cells": [{"name": "c", "agents": {"default": "policy/random"},
                                                            "games": 20}], "shard_size": 5,
                              "warehouse": str(warehouse)})
    asyncio.run(run_study(first, progress=False))
    _build(warehouse)  # whole: the next build would be its first increment, which a run rehearses
    before = _records(cache)
    assert before  # the whole build's own records
    exp = tmp_path / "ctrlc.toml"
    exp.write_text(EXPERIMENT.format(warehouse=warehouse))

    run = spawn([*CLI, "run", str(exp), "--no-prefect", "--no-progress"], cwd=ROOT,
                env=cli_env(TMPDIR=str(tmp), MAFIABENCH_REPLAY_CACHE="1", MAFIABENCH_CACHE_DIR=str(cache)))
    ready: Callable[[], bool] = (lambda: bool(_rehearsing(run.pid))) if when == "started" else \
        (lambda: _writing_its_copy(tmp))
    wait_for(lambda: ready() or run.poll() is not None, timeout=300)
    assert run.poll() is None, "the run ended before its rehearsal was under way"
    rehearsal = _rehearsing(run.pid)
    assert rehearsal
    children = descendants(run.pid)
    t0 = time.monotonic()
    ctrl_c(run)
    out, err = run.communicate(timeout=60)
    elapsed = time.monotonic() - t0

    assert run.returncode == 130, err[-3000:]
    assert elapsed < 3.0, f"took {elapsed:.1f} s to stop"
    assert re.fullmatch(r"interrupted: [\d,]+ of [\d,]+ planned games kept \(landed\), [\d,]+ to play; "
                        r"run the same command again to resume", err.strip()), err[-3000:]
    left = [pid for pid in children | descendants(run.pid) if exists(pid)]
    assert not left, f"processes left behind: {[(pid, cmdline(pid)) for pid in left]}"
    assert not list(tmp.glob("mafiabench-*")), "a scratch folder left behind"
    assert _records(cache) == before, "the cut rehearsal kept a record"
    assert "rehearsed" not in out
    assert _build(warehouse).replayed == []  # dbt, as without a rehearsal; and the games the run landed publish


def _build(path: Path) -> Any:
    con = connect(path)
    try:
        result = build_warehouse(con)
        assert result.published, result.summary()
        return result
    finally:
        con.close()
