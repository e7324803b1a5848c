"""A run rehearses the next build's dbt once its first games landed (`Study._rehearse`, transform.build.rehearsal):
the first increment after a whole build then replays the rehearsed records instead of paying dbt. A rehearsal never
lengthens a run: one not done when the games are is stopped, and leaves no process and no folder behind."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from mafiabench.publish import build_warehouse
from mafiabench.study.lander import Lander
from mafiabench.study.run import Study, run_study
from mafiabench.study.spec import Experiment, parse_experiment
from mafiabench.warehouse.raw import connect


@pytest.fixture(autouse=True)
def machine_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "1")
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path / "cache"))


def _experiment(tmp_path: Path, games: int) -> Experiment:
    return parse_experiment({
        "name": "rehearse",
        "cells": [{"name": "c", "agents": {"default": "policy/random"}, "games": games}],
        "shard_size": 5,
        "warehouse": str(tmp_path / "w.duckdb"),
    })


def _build(path: Path) -> Any:
    con = connect(path)
    try:
        result = build_warehouse(con)
        assert result.published
        return result
    finally:
        con.close()


def _landings_after_the_first_wait_for(event: asyncio.Event, monkeypatch: pytest.MonkeyPatch,
                                       timeout: float = 300) -> None:
    """Every landing but the run's first waits for `event` (all of a run's shards may be in flight at once)."""
    real_land = Lander.land
    landings: list[Any] = []

    async def land(self: Lander, result: Any) -> Any:
        landings.append(result)
        if len(landings) > 1:
            await asyncio.wait_for(event.wait(), timeout)
        return await real_land(self, result)

    monkeypatch.setattr(Lander, "land", land)


def _rehearsal_ended(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event the run's rehearsal sets when it ends, done or not."""
    rehearsed = asyncio.Event()
    real_rehearse = Study._rehearse

    async def rehearse(self: Study) -> None:
        try:
            await real_rehearse(self)
        finally:
            rehearsed.set()

    monkeypatch.setattr(Study, "_rehearse", rehearse)
    return rehearsed


def _rehearsals() -> list[str]:
    """This process's rehearsal folders still there (`mafiabench.scratch`)."""
    return [p for p in os.listdir(tempfile.gettempdir()) if p.startswith(f"mafiabench-rehearsal-{os.getpid()}-")]


@pytest.mark.slow
def test_a_run_rehearses_so_the_first_increment_replays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = asyncio.run(run_study(_experiment(tmp_path, 20), progress=False))
    assert not any("rehearsed" in line for line in first.after)  # a new warehouse: nothing to add to
    assert _build(tmp_path / "w.duckdb").replayed == []  # whole
    # The landings after the first wait for the rehearsal: the games outlast it, as a model's games do.
    rehearsed = _rehearsal_ended(monkeypatch)
    _landings_after_the_first_wait_for(rehearsed, monkeypatch)
    second = asyncio.run(run_study(_experiment(tmp_path, 30), progress=False))
    assert [line for line in second.after if line.startswith("rehearsed the next build's dbt run and test")]
    assert _build(tmp_path / "w.duckdb").replayed == ["run", "test"]
    assert not _rehearsals()


@pytest.mark.slow
def test_a_run_that_only_replays_failed_games_rehearses_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its landings replace games and insert none: the rehearsal starts all the same, and records the increment that
    replaces them (the games' published rows copied), which the build after the run replays."""
    experiment = parse_experiment({
        "name": "rehearse",
        "cells": [{"name": "c", "agents": {"mafioso": "flaky/m", "default": "policy/random"}, "games": 20}],
        "rules": {"discussion_rounds": 1},
        "endpoints": {"flaky": {"kind": "fake", "options": {"p_server_error": 0.2}}},
        "models": {"default": {"max_attempts": 1, "backoff_base_s": 0.0}},
        "shard_size": 1, "warehouse": str(tmp_path / "w.duckdb"),
    })
    monkeypatch.setenv("MAFIABENCH_FAULT_SEED", "run-1")
    first = asyncio.run(run_study(experiment, progress=False))
    assert first.games_failed >= 2  # two landings at least: the second waits for the rehearsal
    _build(tmp_path / "w.duckdb")
    rehearsed = _rehearsal_ended(monkeypatch)
    _landings_after_the_first_wait_for(rehearsed, monkeypatch, timeout=60)
    monkeypatch.setenv("MAFIABENCH_FAULT_SEED", "run-2")
    second = asyncio.run(run_study(experiment, progress=False))
    assert second.games_played == first.games_failed
    assert [line for line in second.after if line.startswith("rehearsed the next build's dbt run and test")]
    assert _build(tmp_path / "w.duckdb").replayed == ["run", "test"]
    assert not _rehearsals()


def test_a_rehearsal_the_games_outrun_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(run_study(_experiment(tmp_path, 20), progress=False))
    _build(tmp_path / "w.duckdb")
    # The landings after the first wait until the rehearsal's process started, then the games end at once.
    started: list[int] = []
    running = asyncio.Event()
    real_exec = asyncio.create_subprocess_exec

    async def exec_(*args: Any, **kw: Any) -> Any:
        proc = await real_exec(*args, **kw)
        started.append(proc.pid)
        running.set()
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", exec_)
    _landings_after_the_first_wait_for(running, monkeypatch)
    second = asyncio.run(run_study(_experiment(tmp_path, 30), progress=False))
    assert not any("rehearsed" in line for line in second.after)
    assert len(started) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(started[0], 0)  # stopped and reaped
    assert not _rehearsals()
    assert _build(tmp_path / "w.duckdb").replayed == []  # dbt, as without a rehearsal
