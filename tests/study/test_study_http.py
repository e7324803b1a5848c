"""A study through the real openai SDK over HTTP to the local fake server injecting 429s, 500s, timeouts and
malformed answers: every planned game lands exactly once, retries and failures are counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb

from mafiabench.study.design import expand
from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.testing import FakeModelServer


def test_http_faults_every_planned_game_lands_once(tmp_path: Path) -> None:
    with FakeModelServer(latency_s=0.0, hang_s=1.0, seed=3) as srv:
        srv.set_rates(**{"429": 0.1, "500": 0.1, "timeout": 0.02, "malformed": 0.05, "empty": 0.02})
        exp = parse_experiment(
            {
                "name": "http-faults",
                "games_per_cell": 15,
                "shard_size": 5,
                "cells": [{"name": "http", "agents": {"mafioso": "local/m", "default": "policy/informed"}},
                          {"name": "all-http", "agents": {"default": "local/m"}}],
                "endpoints": {"local": {"kind": "openai", "base_url": srv.base_url_openai, "key_required": False}},
                "models": {"default": {"max_attempts": 2, "backoff_base_s": 0.001, "timeout_s": 0.3}},
                "concurrency": {"games": 8},
                "warehouse": str(tmp_path / "w.duckdb"),
            },
            "<test>",
        )
        planned = {g.game_id for g in expand(exp)}
        summary = asyncio.run(run_study(exp, progress=False))
        statuses = {r["status"] for r in srv.requests}

    assert {429, 500, 200} <= statuses
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    ids = [r[0] for r in con.execute("select game_id from raw_games").fetchall()]
    assert sorted(ids) == sorted(planned) and len(ids) == 30  # once each
    (failed,) = con.execute("select count(*) from raw_games where status = 'failed'").fetchone()  # type: ignore[misc]
    assert summary.games_failed == failed and summary.games_done == 30 - failed
    (retried,) = con.execute("select count(*) from raw_model_calls where attempts > 1").fetchone()  # type: ignore[misc]
    assert retried > 0
    (flagged,) = con.execute(  # type: ignore[misc]
        "select count(*) from raw_events where format_failure and random_fallback"
    ).fetchone()
    assert flagged > 0
    con.close()
