"""A run does the vacuum the next build's publish would (`warehouse.builds.compact`, `Lander.compact`), while its
games play: the build after it publishes without paying the merge. Only when due, never refusing a run: a vacuum
DuckDB refuses (another write transaction open) is left to the publish, as before."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.study.run import run_study
from mafiabench.study.spec import Experiment, parse_experiment
from mafiabench.warehouse import builds
from mafiabench.warehouse.raw import connect


def _row_groups(con: duckdb.DuckDBPyConnection, table: str) -> int:
    return int(con.execute(f"select count(distinct row_group_id) from pragma_storage_info('{table}')")
               .fetchall()[0][0])


def _fragmented(path: Path, appends: int, rows: int = 100) -> duckdb.DuckDBPyConnection:
    """A table appended to `appends` times, each checkpointed by a writer of the warehouse (no vacuum): a row group
    each, as an increment's published rows."""
    con = connect(path)
    con.execute("create table main.per_game (game_id VARCHAR, n INTEGER, t VARCHAR)")
    for a in range(appends):
        con.execute(f"insert into main.per_game select 'g{a}-' || i, i, md5(i::varchar) from range({rows}) t(i)")
        con.execute("checkpoint")
    return con


@pytest.mark.parametrize(("since", "due"), [(builds.VACUUM_EVERY - 1, True), (builds.VACUUM_EVERY - 2, False),
                                            (0, False)])
def test_compact_vacuums_only_when_the_next_publish_would(tmp_path: Path, since: int, due: bool) -> None:
    con = _fragmented(tmp_path / "w.duckdb", 4)
    rows = con.execute("select * from main.per_game").fetchall()
    settings = "select current_setting('max_vacuum_tasks'), current_setting('enable_progress_bar')"
    before = con.execute(settings).fetchall()[0]
    builds.record_unvacuumed(con, since)
    assert _row_groups(con, "per_game") == 4
    seconds = builds.compact(con)
    assert (seconds is not None) == due
    assert _row_groups(con, "per_game") == (1 if due else 4)
    assert builds.unvacuumed(con) == (0 if due else since)
    assert con.execute("select * from main.per_game").fetchall() == rows  # the same rows, in the same order
    assert con.execute(settings).fetchall()[0] == before  # restored: a writer's (no vacuum), DuckDB's bar as it was
    assert before[0] == 0


def test_a_vacuum_duckdb_refuses_is_left_to_the_publish(tmp_path: Path) -> None:
    con = _fragmented(tmp_path / "w.duckdb", 4)
    builds.record_unvacuumed(con, builds.VACUUM_EVERY - 1)
    other = con.cursor()
    other.execute("begin transaction")
    other.execute("insert into main.per_game values ('open', 0, '')")  # a write transaction still open
    assert builds.compact(con) is None
    assert builds.unvacuumed(con) == builds.VACUUM_EVERY - 1 and _row_groups(con, "per_game") == 4
    other.execute("rollback")


# The vacuum in a process of its own, saying when its checkpoint starts (a connection that names its statements).
KILLED = """
import sys
from mafiabench.warehouse import builds
from mafiabench.warehouse.raw import connect


class Said:
    def __init__(self, con):
        self.con = con

    def execute(self, sql, *args):
        if sql == "checkpoint":
            print("checkpoint", flush=True)
        return self.con.execute(sql, *args)


builds.compact(Said(connect(sys.argv[1])))
"""


def test_a_vacuum_killed_midway_leaves_the_count_to_the_publish(tmp_path: Path) -> None:
    """kill -9 during the run's vacuum: the warehouse opens again with every row, and the count still says the
    next publish vacuums (it goes to 0 only once the checkpoint is done)."""
    path = tmp_path / "w.duckdb"
    con = _fragmented(path, 48, rows=40_000)  # about half a second of merging
    builds.record_unvacuumed(con, builds.VACUUM_EVERY - 1)
    con.execute("checkpoint")
    digest = con.execute("select count(*), sum(hash(game_id, n, t)) from main.per_game").fetchall()
    con.close()
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "checkpoint"
    time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL  # killed during its checkpoint, not after it
    con = connect(path)
    try:
        assert con.execute("select count(*), sum(hash(game_id, n, t)) from main.per_game").fetchall() == digest
        assert builds.unvacuumed(con) == builds.VACUUM_EVERY - 1 and builds.vacuum_due(con)
    finally:
        con.close()


def _experiment(tmp_path: Path, games: int, agents: dict[str, str]) -> Experiment:
    return parse_experiment({
        "name": f"compact-{games}",
        "cells": [{"name": "c", "agents": agents, "games": games}],
        "warehouse": str(tmp_path / "w.duckdb"),
    })


def _build(path: Path) -> int:
    """Build and publish; the increments published since the last vacuum after it."""
    con = connect(path)
    try:
        assert build_warehouse(con).published
        return builds.unvacuumed(con)
    finally:
        con.close()


# Policy players only (the lander holds the file opened directly), and a model's seat (the lander attaches it with
# small row groups, so the vacuum opens it again directly).
@pytest.mark.parametrize("agents", [{"default": "policy/random"}, {"mafioso": "fake/m", "default": "policy/random"}],
                         ids=["policy", "model"])
def test_a_run_compacts_so_the_build_after_it_publishes_without_the_merge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agents: dict[str, str]) -> None:
    monkeypatch.setattr(builds, "VACUUM_EVERY", 2)
    path = tmp_path / "w.duckdb"
    first = asyncio.run(run_study(_experiment(tmp_path, 20, agents), progress=False))
    assert not any("compacted" in line for line in first.after)  # a new warehouse: nothing to vacuum
    assert _build(path) == 0  # whole: vacuumed
    asyncio.run(run_study(_experiment(tmp_path, 30, agents), progress=False))
    assert _build(path) == 1  # an increment that only adds games: not vacuumed, and the next publish would
    third = asyncio.run(run_study(_experiment(tmp_path, 40, agents), progress=False))
    assert [line for line in third.after if line.startswith("compacted the warehouse")]
    con = connect(path)
    try:
        assert builds.unvacuumed(con) == 0
    finally:
        con.close()
    assert _build(path) == 1  # published without the vacuum: the run did it
