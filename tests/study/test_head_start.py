"""A study played in worker processes starts its first games as soon as its workers are ready, before the flow that
takes it over runs (`mafiabench run` imports Prefect meanwhile: issue 37 item 5). The games started ahead keep the
games-in-flight limit, land once each with the same records as a study started without them, and a study closed
before its flow ran abandons them without a hang or a worker left behind."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.study.run import Study, plan_early, run_study
from mafiabench.study.spec import Experiment, parse_experiment
from mafiabench.warehouse import landing

GAMES = 12
IN_FLIGHT = 4


def experiment(tmp_path: Path, name: str) -> Experiment:
    return parse_experiment({
        "name": "ahead",
        "games_per_cell": GAMES,
        "shard_size": 3,
        "cells": [{"name": "c", "agents": {"mafioso": "slow/a", "default": "policy/informed"}}],
        "endpoints": {"slow": {"kind": "fake", "options": {"latency_ms": 30}}},
        "concurrency": {"games": IN_FLIGHT, "processes": 2},
        "warehouse": str(tmp_path / name / "w.duckdb"),
    })


def records(exp: Experiment) -> dict[str, Any]:
    lines = landing.raw_records(landing.raw_dir(Path(exp.warehouse), exp.name))
    return {gid: landing.read_record(line) for gid, line in lines.items()}


def _clock(calls: list[dict[str, Any]]) -> tuple[float, float]:
    """A game's first call's start and last call's end (epoch seconds)."""
    starts = [datetime.fromisoformat(c["started_at"]).timestamp() for c in calls]
    ends = [s + c["latency_ms"] / 1000.0 for s, c in zip(starts, calls, strict=True)]
    return min(starts), max(ends)


def test_the_first_games_play_before_the_flow_and_keep_the_limit(tmp_path: Path) -> None:
    exp = experiment(tmp_path, "ahead")
    study = Study(exp, orchestrator="prefect", progress=False)
    assert plan_early(study)
    assert study.executor is not None and study.executor._workers is not None
    study.executor._workers.start()  # the workers ready (what the flow's first step waits for)
    time.sleep(1.0)  # the command imports Prefect meanwhile
    flow_started = time.time()

    async def flow() -> Any:  # what the study flow does with the study it is handed
        with study:
            await study.fan_out()
            return study.finish()

    summary = asyncio.run(flow())
    assert summary.status == "completed" and summary.games_played == GAMES and not summary.shard_errors
    con = duckdb.connect(exp.warehouse, read_only=True)
    assert con.execute("select count(*), count(distinct game_id) from raw_games").fetchone() == (GAMES, GAMES)
    con.close()

    spans = [_clock(r.calls) for r in records(exp).values()]
    first = min(start for start, _ in spans)
    assert first < flow_started - 0.5, "no game started before the flow took the study over"
    assert 0 < summary.games_concurrency <= IN_FLIGHT  # timed from the first game, not from the flow
    # Never more than `concurrency.games` games playing at once, those started ahead included.
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    playing = peak = 0
    for _, step in events:
        playing += step
        peak = max(peak, playing)
    assert peak <= IN_FLIGHT, peak

    # The same records as a study whose games all start in its shards (the wall-clock readings aside).
    plain = experiment(tmp_path, "plain")
    assert asyncio.run(run_study(plain, progress=False)).games_played == GAMES
    ahead, same = records(exp), records(plain)
    assert set(ahead) == set(same) and len(ahead) == GAMES
    for gid, rec in ahead.items():
        for a, b in zip(rec.calls, same[gid].calls, strict=True):
            a["started_at"], a["latency_ms"] = b["started_at"], b["latency_ms"]
        assert rec.to_json() == same[gid].to_json(), gid


def test_a_study_closed_before_its_flow_ran_abandons_its_games(tmp_path: Path) -> None:
    """The command closes a study whose flow never ran (Prefect failed to start, a Ctrl-C): the games started ahead
    are dropped at once, no worker is left or spawned again, and the next run plays every game."""
    exp = experiment(tmp_path, "closed")
    study = Study(exp, orchestrator="prefect", progress=False)
    assert plan_early(study)
    t0 = time.perf_counter()
    study.__exit__(None, None, None)
    assert time.perf_counter() - t0 < 5.0
    time.sleep(0.5)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("mafiabench-worker")]
    assert records(exp) == {}
    assert asyncio.run(run_study(exp, progress=False)).games_played == GAMES
