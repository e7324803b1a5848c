"""A published whole build leaves its first increment's dbt rehearsed (transform.build.rehearsal.after_build): in a
process of its own that outlives the build, with stand-ins for the next games. A schedule's first increment then
replays dbt's statements, and publishes what dbt would, when games like the last one landed come with no run, and
when the next run of the last run's experiment lands them with no rehearsal of its own (its games took every core),
and when that run plays again the games landed failed, which the lander replaces. One runs at a time on a machine;
one killed leaves the next build dbt's run and nothing else."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
from pathlib import Path

import duckdb
import pytest

from mafiabench import publish
from mafiabench.publish import build_warehouse
from mafiabench.study.run import Study, run_study
from mafiabench.study.spec import Experiment, parse_experiment
from mafiabench.transform.build import increment, rehearsal
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, games, published
from support.records import cell_records, design, fresh_con
from support.replays import copy

pytestmark = pytest.mark.slow


@pytest.fixture
def machine_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine keeps dbt's records and rehearses after a build (the suite turns both off), in a test's folder."""
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "1")
    monkeypatch.setenv("MAFIABENCH_REHEARSE_AFTER_BUILD", "1")
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MAFIABENCH_DBT_THREADS", raising=False)
    yield tmp_path / "cache"
    rehearsal.wait_detached(120)


def _cells(prefix: str, seed: int) -> list:
    """Games of the shape `games` lands last: a capability cell of model X (what a scheduled study adds)."""
    return cell_records(prefix, n=4, mafia_wins=seed % 3, models="X", design=design("homogeneous|X", None, "X", "X"),
                        rotate_seats=True)


def _landed() -> Path:
    """A warehouse file of games of every shape, the last a cell of model X; not built."""
    con = fresh_con()
    load_records(con, [*games("a", 8, 0), *_cells("c1", 1)])
    path = Path(con.execute("select path from duckdb_databases() where database_name = current_database()")
                .fetchall()[0][0])
    con.close()
    return path


def _last() -> dict:
    from mafiabench.transform.build import dbt_runner, replay

    return json.loads((dbt_runner.cache_dir(replay.CACHE) / "rehearsal-last.json").read_text())


def test_a_whole_build_rehearses_its_first_increment(tmp_path: Path, machine_records: Path) -> None:
    path = _landed()
    whole = publish.build(path)
    assert whole.published and whole.replayed == []
    (child,) = rehearsal._detached
    rehearsal.wait_detached(120)  # a schedule's next build comes later
    assert _last() == {"as landed": {"recorded": ["run", "test"], "replayed": [], "seconds": _last()["as landed"]
                                     ["seconds"]}}  # no run landed games: no run's shape
    assert not list(Path(tempfile.gettempdir()).glob(f"mafiabench-rehearsal-{child.pid}-*"))  # removed by the child
    con = duckdb.connect(str(path))
    load_records(con, _cells("c2", 2))
    by_dbt = copy(con, tmp_path)
    con.close()
    os.environ["MAFIABENCH_REPLAY_CACHE"] = "0"  # restored by the fixture's monkeypatch
    try:
        ran = build_warehouse(by_dbt)
    finally:
        os.environ["MAFIABENCH_REPLAY_CACHE"] = "1"
    assert ran.published and ran.replayed == []
    first = publish.build(path)
    assert first.published and first.replayed == ["run", "test"]  # no run rehearsed it: the build did
    assert not rehearsal._detached  # an increment leaves none: the warehouse's own record serves the next
    con = duckdb.connect(str(path))
    assert_same(published(con), published(by_dbt))
    assert sorted((v.suite, v.expectation, v.success, v.unexpected_count) for v in first.validation) == \
        sorted((v.suite, v.expectation, v.success, v.unexpected_count) for v in ran.validation)
    con.close()


def test_off_it_starts_none(monkeypatch: pytest.MonkeyPatch, machine_records: Path) -> None:
    monkeypatch.setenv("MAFIABENCH_REHEARSE_AFTER_BUILD", "0")
    assert publish.build(_landed()).published
    assert not rehearsal._detached
    assert not (machine_records / "dbt-replays" / rehearsal.LOCK).exists()


def test_one_at_a_time_and_a_killed_one_leaves_dbt(tmp_path: Path, machine_records: Path) -> None:
    first, second = _landed(), _landed()
    assert publish.build(first).published
    (child,) = rehearsal._detached
    os.kill(child.pid, signal.SIGSTOP)  # still rehearsing, whatever the machine's speed
    assert publish.build(second).published
    assert rehearsal._detached == [child]  # the lock held: no second rehearsal
    os.kill(child.pid, signal.SIGKILL)
    rehearsal.wait_detached(30)  # the lock goes with the process
    con = duckdb.connect(str(first))
    load_records(con, _cells("c2", 2))
    con.close()
    built = publish.build(first)
    assert built.published and built.replayed == []  # nothing was kept: dbt runs
    # Its folder, left by the kill, is gone with the next rehearsal's sweep.
    assert publish.build(_landed()).published
    assert not list(Path(tempfile.gettempdir()).glob(f"mafiabench-rehearsal-{child.pid}-*"))


@pytest.mark.parametrize("fault", ["no process", "export fails"])
def test_its_failure_never_fails_the_published_build(fault: str, monkeypatch: pytest.MonkeyPatch,
                                                     machine_records: Path) -> None:
    if fault == "no process":
        def refused(lock: int) -> None:
            raise OSError(11, "Resource temporarily unavailable")
        monkeypatch.setattr(rehearsal, "_spawn", refused)
    else:
        def broken(*args: object, **kwargs: object) -> bool:
            raise OSError(28, "No space left on device")
        monkeypatch.setattr(rehearsal, "export", broken)
    assert publish.build(_landed()).published
    children = list(rehearsal._detached)
    rehearsal.wait_detached(30)  # a child given nothing to do ends at once, and the lock with it
    assert all(c.returncode == 0 for c in children)
    # No folder left of this build's (named after its child; other tests' runs rehearse beside this one).
    assert not [p for c in children for p in Path(tempfile.gettempdir()).glob(f"mafiabench-rehearsal-{c.pid}-*")]
    assert not (machine_records / "dbt-replays" / "rehearsal-last.json").exists()


def _experiment(tmp_path: Path, games: int, reference: str) -> Experiment:
    return parse_experiment({
        "name": "scheduled", "variant": "mini-mafia", "reference": reference,
        "cells": [{"name": "c", "agents": {"default": "policy/random"}, "games": games}],
        "shard_size": 5, "warehouse": str(tmp_path / "w.duckdb"),
    })


def _replays_what_dbt_builds(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warehouse's next build replays dbt's run and test, and publishes what a build running dbt on a copy does."""
    con = duckdb.connect(str(path))
    by_dbt = copy(con, tmp_path)
    con.close()
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "0")
    ran = build_warehouse(by_dbt)
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "1")
    assert ran.published and ran.replayed == []
    first = publish.build(path)
    assert first.published and first.replayed == ["run", "test"]
    con = duckdb.connect(str(path))
    assert_same(published(con), published(by_dbt))
    assert sorted((v.suite, v.expectation, v.success, v.unexpected_count) for v in first.validation) == \
        sorted((v.suite, v.expectation, v.success, v.unexpected_count) for v in ran.validation)
    con.close()


def test_a_run_it_rehearsed_for_replays_with_no_rehearsal_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine_records: Path) -> None:
    """A scheduled run whose games leave its own rehearsal no CPU (here: none started) replays dbt's run and test,
    rehearsed after the whole build before it. Its experiment names a reference, so the run changes the three
    sources a run changes besides its games (its protocol card is landed again at its start). Without its `raw_runs`
    row or its card in the stand-in (`rehearsal._as_a_run`) the build runs dbt and this fails; `raw_landed_files`,
    which no model reads today, leaves the key as it is (checked: this passes without it). A study without a card
    changes the other two (35 s more of the suite to check it apart)."""
    reference = "mini-mafia-v4.1"
    path = tmp_path / "w.duckdb"
    asyncio.run(run_study(_experiment(tmp_path, 10, reference), progress=False))
    con = duckdb.connect(str(path))
    load_records(con, games("a", 4, 0))  # imported games, landed last: the run's shape is its own experiment's
    con.close()
    assert publish.build(path).published
    rehearsal.wait_detached(120)
    assert [shape for shape in _last()] == [rehearsal.NEXT_RUN, rehearsal.AS_LANDED]
    assert all(done["recorded"] == ["run", "test"] for done in _last().values())

    async def starved(self: Study) -> None:
        return None

    monkeypatch.setattr(Study, "_rehearse", starved)
    second = asyncio.run(run_study(_experiment(tmp_path, 20, reference), progress=False))
    assert not any("rehearsed" in line for line in second.after)
    con = duckdb.connect(str(path))
    changed = set(increment.fingerprints(con)) - increment.unchanged_sources(con, increment.fingerprints(con))
    assert changed == {"raw_runs", "raw_landed_files", "raw_protocol_cards"}
    con.close()
    _replays_what_dbt_builds(path, tmp_path, monkeypatch)


def test_a_run_that_replays_failed_games_replays_what_the_build_rehearsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine_records: Path) -> None:
    """Games landed failed (a fake endpoint's 500s, 10% of calls, past the one attempt allowed) are played again
    by the experiment's next run, and the lander replaces them (their calls moved to raw_replaced_calls): an
    increment that replaces published games, whose key (`increment_replaces`) the whole build rehearses first
    (`rehearsal.REPLAYING`) when the last run's experiment holds failed games. Without it dbt runs here."""
    monkeypatch.setenv("MAFIABENCH_FAULT_SEED", "run-1")

    def flaky(games: int) -> Experiment:
        return parse_experiment({
            "name": "scheduled", "variant": "mini-mafia",
            "cells": [{"name": "c", "agents": {"mafioso": "flaky/m", "default": "policy/random"}, "games": games}],
            "rules": {"discussion_rounds": 1},
            "endpoints": {"flaky": {"kind": "fake", "options": {"p_server_error": 0.1}}},
            "models": {"default": {"max_attempts": 1, "backoff_base_s": 0.0}},
            "shard_size": 5, "warehouse": str(tmp_path / "w.duckdb"),
        })

    path = tmp_path / "w.duckdb"
    asyncio.run(run_study(flaky(20), progress=False))
    con = duckdb.connect(str(path))
    failed = {g for (g,) in con.execute("select game_id from raw_games where status = 'failed'").fetchall()}
    assert failed and con.execute("select count(*) from raw_model_calls where game_id in (select unnest(?))",
                                  [sorted(failed)]).fetchall()[0][0]
    con.close()
    assert publish.build(path).published
    rehearsal.wait_detached(120)
    assert [shape for shape in _last()] == [rehearsal.REPLAYING, rehearsal.NEXT_RUN, rehearsal.AS_LANDED]
    assert all(done["recorded"] == ["run", "test"] for done in _last().values())
    con = duckdb.connect(str(path))  # the copy that shape was rehearsed on, made again for a look
    assert rehearsal.export(con, tmp_path / "look", stand_in=True)
    con.close()
    con = duckdb.connect(str(rehearsal.make_copy(tmp_path / "look", rehearsal.REPLAYING)))
    rehearsed = set(increment.fingerprints(con)) - increment.unchanged_sources(con, increment.fingerprints(con))
    con.close()

    async def starved(self: Study) -> None:
        return None

    monkeypatch.setattr(Study, "_rehearse", starved)
    monkeypatch.setenv("MAFIABENCH_FAULT_SEED", "run-2")
    second = asyncio.run(run_study(flaky(20), progress=False))
    assert second.games_played == len(failed)  # only the failed games, each replaced
    con = duckdb.connect(str(path))
    changed = set(increment.fingerprints(con)) - increment.unchanged_sources(con, increment.fingerprints(con))
    # The sources the run changed besides its games, as the copy changed them (the failed attempts' calls moved).
    assert changed == rehearsed == {"raw_runs", "raw_landed_files", "raw_replaced_calls"}
    con.close()
    _replays_what_dbt_builds(path, tmp_path, monkeypatch)
