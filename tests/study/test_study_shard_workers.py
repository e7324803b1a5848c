"""Policy studies at scale: whole shards played, written and flattened in worker processes land every game once,
with the same records and rows as the same study played in the run's own process."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.study.design import expand
from mafiabench.study.run import Study, run_study
from mafiabench.study.shard_workers import AUTO_SHARD_WORKERS_MIN_GAMES
from mafiabench.study.spec import Experiment, parse_experiment
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import connect
from mafiabench.warehouse.sidecar import check_sidecar


def experiment(tmp_path: Path, processes: int | str, games: int = 60, name: str = "p") -> Experiment:
    return parse_experiment(
        {
            "name": "shards",
            "games_per_cell": games,
            "shard_size": 16,
            "cells": [
                {"name": "random", "agents": {"default": "policy/random"}},
                {"name": "informed", "agents": {"detective": "policy/informed", "default": "policy/random"}},
            ],
            "concurrency": {"games": 64, "processes": processes},
            "warehouse": str(tmp_path / name / "w.duckdb"),
        }
    )


def rows(exp: Experiment) -> dict[str, list[tuple[Any, ...]]]:
    con = duckdb.connect(exp.warehouse, read_only=True)
    try:
        return {
            "games": con.execute(
                "select * exclude (landed_at) from raw_games order by game_id"
            ).fetchall(),
            "players": con.execute("select * from raw_players order by game_id, seat").fetchall(),
            "events": con.execute("select * from raw_events order by game_id, seq").fetchall(),
            "files": con.execute("select sum(games), count(*) from raw_landed_files").fetchall(),
        }
    finally:
        con.close()


def test_shard_workers_land_every_game_once_with_the_same_records_and_rows(tmp_path: Path) -> None:
    one, two = experiment(tmp_path, 1, name="one"), experiment(tmp_path, 2, name="two")
    planned = {g.game_id for g in expand(one)}
    s1 = asyncio.run(run_study(one, progress=False))
    with Study(two, progress=False) as study:
        study.prepare()
        assert study.shard_processes == 2
        asyncio.run(study.fan_out())
        s2 = study.finish()
    assert s2.status == "completed" and s2.games_played == s2.games_done == len(planned) == 120
    assert (s2.usage.to_dict(), {c: u.to_dict() for c, u in s2.per_cell.items()}) == (
        s1.usage.to_dict(), {c: u.to_dict() for c, u in s1.per_cell.items()})
    # the records, as written to the shard files, byte for byte (policy games have no wall clock in them)
    a = landing.raw_records(landing.raw_dir(Path(one.warehouse), one.name))
    b = landing.raw_records(landing.raw_dir(Path(two.warehouse), two.name))
    assert set(a) == set(b) == planned and a == b
    for exp in (one, two):  # the shard writers (the run's process, the workers) put a matching sidecar by each file
        files = landing.shard_files(landing.raw_dir(Path(exp.warehouse), exp.name))
        assert files and [check_sidecar(f)[1] for f in files] == [""] * len(files)
    r1, r2 = rows(one), rows(two)
    assert r2["files"] == [(120, 8)]  # 8 shard files of up to 16 games, each marked landed
    assert len(r2["events"]) > 20 * len(planned)
    assert r1 == r2


def test_a_killed_shard_worker_fails_its_shard_which_is_retried(tmp_path: Path) -> None:
    exp = experiment(tmp_path, 2, games=400)

    async def main() -> Any:
        with Study(exp, progress=False, shard_retry_delays=(0.0,)) as study:
            study.prepare()
            playing = asyncio.ensure_future(study.fan_out())
            assert study.executor is not None
            while study.executor._shard_workers is None or not study.executor._shard_workers.started:
                await asyncio.sleep(0.01)
            pool = study.executor._shard_workers
            while study.summary.games_played < 32:
                await asyncio.sleep(0.005)
            for w in list(pool.started):
                os.kill(w.process.pid, signal.SIGKILL)
            await playing
            return study.finish(), len(pool.started)

    s, started = asyncio.run(main())
    assert s.status == "completed" and not s.shard_errors and s.games_played == 800
    assert started > 2  # the killed workers were replaced
    con = duckdb.connect(exp.warehouse, read_only=True)
    assert con.execute("select count(*), count(distinct game_id) from raw_games").fetchone() == (800, 800)
    con.close()


def test_auto_uses_shard_workers_only_for_large_policy_plans(tmp_path: Path) -> None:
    cores = min(os.cpu_count() or 1, 8)
    big = AUTO_SHARD_WORKERS_MIN_GAMES // 2
    for games, processes, expected in ((big, "auto", cores), (10, "auto", 1), (10, 3, 3), (big, 1, 1)):
        with Study(experiment(tmp_path, processes, games=games, name=f"{games}-{processes}"), progress=False) as s:
            s.prepare()
            assert s.shard_processes == expected, (games, processes)
    mixed = parse_experiment({
        "name": "mixed", "games_per_cell": big, "warehouse": str(tmp_path / "mixed" / "w.duckdb"),
        "cells": [{"name": "c", "agents": {"mafioso": "scripted/naive", "default": "policy/random"}}],
    })
    with Study(mixed, progress=False) as s:
        s.prepare()
        assert s.shard_processes == 1  # a model in a seat: games go one at a time, as before


def test_a_backlog_of_shard_files_lands_the_same_rows_once(tmp_path: Path) -> None:
    exp = experiment(tmp_path, 1, games=40)
    asyncio.run(run_study(exp, progress=False))
    before = rows(exp)
    raw = landing.raw_dir(Path(exp.warehouse), exp.name)
    files = landing.shard_files(raw)
    assert len(files) == 5
    fresh = tmp_path / "fresh" / "w.duckdb"
    con = connect(fresh)
    try:
        r = landing.land_pending(con, raw, exp.name)
        again = landing.land_pending(con, raw, exp.name)  # all marked landed: nothing
    finally:
        con.close()
    assert (r.inserted, r.skipped, again.inserted, again.skipped) == (80, 0, 0, 0)
    assert (r.files_from_sidecar, r.files_from_lines) == (5, 0)  # landed from the run's sidecars
    assert rows(exp.model_copy(update={"warehouse": str(fresh)})) == before


def test_shards_queued_to_two_workers_come_back_each_to_its_caller(tmp_path: Path) -> None:
    """Two shards wait in each worker's pipe at once (QUEUE_PER_WORKER): every reply reaches the caller of its own
    shard, and no third worker is started."""
    from mafiabench.record import Provenance
    from mafiabench.study.shard_workers import QUEUE_PER_WORKER, ShardWorkerConfig, ShardWorkerPool

    exp = experiment(tmp_path, 2, games=24)
    raw = tmp_path / "raw"
    games = list(expand(exp))
    shards = [games[i : i + 6] for i in range(0, len(games), 6)]
    assert QUEUE_PER_WORKER == 2 and len(shards) == 8
    pool = ShardWorkerPool(ShardWorkerConfig(exp, raw, Provenance(git_commit=None), ()), 2)

    async def main() -> list[Any]:
        return await asyncio.gather(*(pool.play(i, s) for i, s in enumerate(shards)))

    try:
        out = asyncio.run(main())
        assert len(pool.started) == 2
    finally:
        pool.close()
    for i, (shard, played) in enumerate(zip(shards, out, strict=True)):
        assert played.path.name.endswith(f"-{i:06d}{landing.SHARD_SUFFIX}")
        assert played.batch.ids == [g.game_id for g in shard]
