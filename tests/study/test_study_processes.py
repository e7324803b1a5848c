"""`concurrency.processes = 2`: games played in worker processes land exactly once, with the same records as the
same study played on one event loop."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import signal
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.study.design import expand
from mafiabench.study.run import Study, run_study
from mafiabench.study.spec import Experiment, parse_experiment
from mafiabench.study.workers import GC_GEN0_THRESHOLD, lean_gc, split_limit
from mafiabench.warehouse import landing

FAULTS = {"p_rate_limit": 0.1, "p_server_error": 0.1, "p_timeout": 0.03, "p_malformed": 0.06, "p_empty": 0.02}
# The two wall-clock readings in a record, when each call started and how long it took, differ between any two runs
# (processes = 1 twice included): their values are masked, their keys and everything else compared byte for byte.
WALL_CLOCK = re.compile(r'("started_at": )"[^"]*"|("latency_ms": )[0-9.e+-]+')


def experiment(tmp_path: Path, processes: int) -> Experiment:
    return parse_experiment(
        {
            "name": "processes",
            "games_per_cell": 6,
            "shard_size": 5,
            "design": {"targets": ["flaky/a"], "backgrounds": ["flaky/a", "flaky/b"]},
            "cells": [
                {"name": "policies", "agents": {"default": "policy/random"}},
                {"name": "scripted", "agents": {"mafioso": "scripted/naive", "default": "flaky/b"}},
            ],
            "endpoints": {"flaky": {"kind": "fake", "options": FAULTS}},
            "models": {"default": {"max_attempts": 3, "backoff_base_s": 0.0}},
            "concurrency": {"games": 8, "default_provider": 5, "processes": processes},
            "warehouse": str(tmp_path / f"p{processes}" / "w.duckdb"),
        }
    )


def raw_texts(exp: Experiment) -> dict[str, str]:
    lines = landing.raw_records(landing.raw_dir(Path(exp.warehouse), exp.name))
    return {gid: WALL_CLOCK.sub(r"\1\2<clock>", landing.read_record(line).to_json()) for gid, line in lines.items()}


def test_processes_land_every_game_once_with_the_same_records(tmp_path: Path) -> None:
    one, two = experiment(tmp_path, 1), experiment(tmp_path, 2)
    planned = {g.game_id for g in expand(one)}
    s1 = asyncio.run(run_study(one, progress=False))
    s2 = asyncio.run(run_study(two, progress=False))
    for s in (s1, s2):
        assert s.status == "completed-with-failures" and s.games_played == len(planned) and s.games_failed > 0
    assert (s2.games_done, s2.games_failed, s2.usage.to_dict()) == (s1.games_done, s1.games_failed, s1.usage.to_dict())
    con = duckdb.connect(two.warehouse, read_only=True)
    ids = [r[0] for r in con.execute("select game_id from raw_games").fetchall()]
    con.close()
    assert sorted(ids) == sorted(planned)  # once each
    a, b = raw_texts(one), raw_texts(two)
    assert set(a) == set(b) == planned
    assert sum(t.count("<clock>") for t in a.values()) == 2 * s1.usage.calls  # only those two per call masked
    diff = [gid for gid in planned if a[gid] != b[gid]]
    assert not diff, diff[:3]


def test_a_killed_worker_fails_its_shard_which_is_retried(tmp_path: Path) -> None:
    exp = parse_experiment(
        {
            "name": "lost-worker",
            "games_per_cell": 24,
            "shard_size": 4,
            "cells": [{"name": "slow", "agents": {"default": "slow/m"}}],
            "endpoints": {"slow": {"kind": "fake", "options": {"latency_ms": 20}}},
            "concurrency": {"games": 8, "processes": 2},
            "warehouse": str(tmp_path / "w.duckdb"),
        }
    )
    raw = landing.raw_dir(Path(exp.warehouse), exp.name)

    async def main() -> Any:
        with Study(exp, progress=False, shard_retry_delays=(0.0,)) as study:
            study.prepare()
            playing = asyncio.ensure_future(study.fan_out())
            while len(landing.raw_records(raw)) < 4:
                await asyncio.sleep(0.01)
            assert study.executor is not None and study.executor._workers is not None
            worker = study.executor._workers._workers[0]
            assert worker is not None
            os.kill(worker.process.pid, signal.SIGKILL)
            await playing
            return study.finish()

    s = asyncio.run(main())
    assert s.status == "completed" and not s.shard_errors and s.games_played == 24
    con = duckdb.connect(exp.warehouse, read_only=True)
    assert con.execute("select count(*), count(distinct game_id) from raw_games").fetchone() == (24, 24)
    con.close()


def test_provider_limits_are_split_evenly() -> None:
    assert [split_limit(64, 3, i) for i in range(3)] == [22, 21, 21]
    assert [split_limit(2, 4, i) for i in range(4)] == [1, 1, 1, 1]


def _auto(tmp_path: Path, games: int, agent: str) -> Study:
    return Study(parse_experiment({
        "name": "auto", "games_per_cell": 1, "warehouse": str(tmp_path / "w.duckdb"),
        "cells": [{"name": "c", "agents": {"default": agent}}],
        "endpoints": {"box": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "key_required": False},
                      "flaky": {"kind": "fake"}},
        "concurrency": {"games": games},  # processes = "auto", the default
    }))


def test_auto_processes_use_the_cores_only_for_many_http_games(tmp_path: Path) -> None:
    cores = min(os.cpu_count() or 1, 8)
    assert _auto(tmp_path, 256, "box/model").processes == cores  # HTTP, many in flight: one worker per core
    assert _auto(tmp_path, 64, "box/model").processes == 1  # one loop keeps up at 64 in flight
    assert _auto(tmp_path, 256, "flaky/model").processes == 1  # in-process fake provider: nothing to gain
    assert _auto(tmp_path, 256, "policy/random").processes == 1
    assert _auto(tmp_path, 256, "anthropic/claude-haiku-4-5").processes == cores  # a built-in HTTP endpoint


def test_processes_auto_or_a_number_anything_else_is_named(tmp_path: Path) -> None:
    from mafiabench.errors import UserError
    from mafiabench.study.spec import Concurrency

    assert Concurrency(processes=3, games=500).worker_processes(uses_http=True, cpus=2) == 3
    assert Concurrency(games=500).worker_processes(uses_http=True, cpus=32) == 8
    for bad in ("many", 0, 65, 2.5, True):
        try:
            parse_experiment({"name": "x", "cells": [{"name": "c", "agents": {"default": "policy/random"}}],
                              "concurrency": {"processes": bad}}, "exp.toml")
        except UserError as exc:
            assert "exp.toml" in str(exc) and "processes" in str(exc), exc
        else:
            raise AssertionError(f"processes = {bad!r} was accepted")


def test_lean_gc_while_playing_then_restored() -> None:
    """Games over HTTP run with what was alive frozen out of the collector and a larger young generation; the
    process's settings come back afterwards, even when the block fails."""
    before = gc.get_threshold()
    try:
        with lean_gc():
            assert gc.get_threshold() == (GC_GEN0_THRESHOLD, *before[1:])
            assert gc.get_freeze_count() > 1000  # the imported modules' objects
            raise RuntimeError("a game failed")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
