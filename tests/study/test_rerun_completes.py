"""Re-running a study whose games failed under injected faults replays them under new faults, so it can complete;
with a `seed` option the faults are fixed per request instead (reproducible fault for fault)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.study.run import run_study
from mafiabench.study.spec import Experiment, parse_experiment
from mafiabench.study.summary import RunSummary


def experiment(tmp_path: Path, options: dict[str, Any]) -> Experiment:
    return parse_experiment({
        "name": "rerun",
        "cells": [{"name": "flaky-mafioso", "agents": {"mafioso": "flaky/m", "default": "policy/random"},
                   "games": 30}],
        "rules": {"discussion_rounds": 1},
        "endpoints": {"flaky": {"kind": "fake", "options": {"p_server_error": 0.3, **options}}},
        "models": {"default": {"max_attempts": 1, "backoff_base_s": 0.0}},
        "warehouse": str(tmp_path / "w.duckdb"),
    })


def run(exp: Experiment, fault_seed: str, monkeypatch: pytest.MonkeyPatch) -> tuple[RunSummary, set[str]]:
    monkeypatch.setenv("MAFIABENCH_FAULT_SEED", fault_seed)  # one run = one process's fresh draw, pinned here
    summary = asyncio.run(run_study(exp, progress=False))
    con = duckdb.connect(exp.warehouse, read_only=True)
    try:
        failed = {g for (g,) in con.execute("select game_id from raw_games where status = 'failed'").fetchall()}
    finally:
        con.close()
    return summary, failed


def test_rerunning_replays_failed_games_under_new_faults_until_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = experiment(tmp_path, {})
    first, failed = run(exp, "run-1", monkeypatch)
    assert first.games_played == 30 and len(failed) >= 5  # 3 mafioso calls at 30% each: about 2 in 3 games fail
    history = [failed]
    for attempt in range(2, 12):
        summary, now = run(exp, f"run-{attempt}", monkeypatch)
        assert summary.games_played == len(history[-1])  # only the failed games are replayed
        assert now <= history[-1]  # a game that finished stays finished
        history.append(now)
        if not now:
            break
    assert not history[-1], f"still failing after {len(history)} runs: {[len(h) for h in history]}"
    assert len(history[1]) < len(history[0])  # new draws: the second run finished some of the failed games


def test_a_seed_fixes_the_faults_per_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = experiment(tmp_path, {"seed": 7})
    _, failed = run(exp, "run-1", monkeypatch)
    assert failed
    summary, again = run(exp, "run-2", monkeypatch)
    assert summary.games_played == len(failed) and again == failed  # the same requests fail the same way


@pytest.mark.slow
def test_the_demo_run_twice_completes_every_planned_game(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mafiabench.study.spec import load_experiment

    exp = load_experiment(Path(__file__).resolve().parents[2] / "experiments" / "demo.toml")
    exp = exp.model_copy(update={"warehouse": str(tmp_path / "w.duckdb")})
    first, failed = run(exp, "demo-run-1", monkeypatch)
    assert first.games_planned == first.games_played and failed  # the demo shows a few games failing for good
    second, still = run(exp, "demo-run-2", monkeypatch)
    assert second.games_played == len(failed) and not still
