"""An incremental build finds an increment that only adds games as raw_games' rows after the published games, when its
rows below the publish's bound are the published fct_games' games with the same marks (transform.build.increment:
`_added_only` against the publish's record, `GAMES_TABLE`), without comparing raw_games with fct_games, also after a
replacing increment published without a vacuum (its deleted rows gaps in the numbers); a game replaced or removed, a
mark edited in place, a vacuum that renumbered the rows or no record: the comparison (`_compared`), unless the published
games are still raw_games' first rows (a vacuum after a replacing increment: `first_rows_bound`). Either way the
increment is the games whose id, landed mark or checksum differ from the published fct_games'."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import increment
from mafiabench.warehouse import builds
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, games, published, remove_game
from support.records import fresh_con, mini_record

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py), not last

# The increment by definition: the games on one side only of raw_games and the published fct_games, or whose landed
# mark or checksum differ; published: those fct_games holds.
DIFFERING = """
    select coalesce(r.game_id, f.game_id), f.game_id is not null
    from raw_games as r full outer join fct_games as f on f.game_id = r.game_id
    where r.game_id is null or f.game_id is null
        or f.landed_at is distinct from r.landed_at or f.record_sha256 is distinct from r.record_sha256
"""


@pytest.fixture
def plans() -> Iterator[list[dict[str, Any]]]:
    """Each build's plan: the increment by definition (before it), the games and `Increment` it found, and whether
    it compared the tables."""
    found: list[dict[str, Any]] = []
    plan, compared = increment.plan, increment._compared

    def spy_plan(con: duckdb.DuckDBPyConnection, key: str, parsed: Callable[[], Any]) -> increment.Increment | None:
        built = con.execute("select count(*) from duckdb_tables() where table_name = 'fct_games'").fetchall()[0][0]
        expected = con.execute(DIFFERING).fetchall() if built else []
        found.append({"expected": {g for g, _ in expected}, "replaces": any(p for _, p in expected),
                      "compared": False})
        inc = plan(con, key, parsed)
        found[-1]["increment"] = inc
        found[-1]["games"] = {r[0] for r in con.execute(
            f"select game_id from main.{increment.INCREMENT_GAMES}").fetchall()} if inc is not None else None
        return inc

    def spy_compared(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
        found[-1]["compared"] = True
        return compared(con)

    with mock.patch.object(increment, "plan", spy_plan), mock.patch.object(increment, "_compared", spy_compared):
        yield found


def recorded(con: duckdb.DuckDBPyConnection) -> list[tuple[int, int, int]]:
    return [(int(n), int(m), int(b)) for n, m, b in con.execute(f"select * from {increment.GAMES_TABLE}").fetchall()]


def counted(con: duckdb.DuckDBPyConnection) -> list[tuple[int, int, int]]:
    """What `GAMES_TABLE` must hold: the published fct_games' rows and sum of `MARKS`, counted, and raw_games' row
    number after its last row (every game of raw_games published)."""
    n, marks = con.execute(f"select count(*), sum({increment.MARKS}) from fct_games").fetchall()[0]
    bound = con.execute("select max(rowid) + 1 from raw_games").fetchall()[0][0]
    return [(int(n), int(marks), int(bound))]


def renumbered(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """What a checkpoint's vacuum does to a table's row numbers after deletes (DuckDB merges the row groups holding
    them): the rows left numbered from 0, in their order; the table made again from its own DDL, primary key and all
    (a real one needs row groups of 122,880 rows)."""
    ddl = con.execute("select sql from duckdb_tables() where table_name = ?", [table]).fetchall()[0][0]
    con.execute(f"create temp table __rows as select * from {table} order by rowid")
    con.execute(f"drop table {table}")
    con.execute(ddl)
    con.execute(f"insert into {table} select * from __rows")
    con.execute("drop table __rows")


def test_an_increment_adding_games_is_the_rows_after_the_published_games(
        tmp_path: Path, plans: list[dict[str, Any]]) -> None:
    con = fresh_con()
    load_records(con, games("a", 12, 0))
    assert build_warehouse(con).published
    assert recorded(con) == counted(con)  # a whole build counts its record
    for prefix, seed in (("b", 1), ("c", 2)):  # the second from the first's record: the increment's games added
        load_records(con, games(prefix, 4, seed))
        result = build_warehouse(con)
        assert result.published and any(m.materialized == "incremental" for m in result.models)
        plan = plans[-1]
        assert not plan["compared"] and plan["games"] == plan["expected"] and len(plan["games"]) > 4
        assert not plan["increment"].replaces and plan["increment"].games == len(plan["games"])
        assert recorded(con) == counted(con)
    assert_same(published(con), full_rebuild(con, tmp_path))


def _mark_edited(con: duckdb.DuckDBPyConnection) -> None:
    # Not the landing step: a published game's checksum changed in place, its row where it was.
    con.execute("update raw_games set record_sha256 = 'edited' where game_id = 'e0-2'")


def _replaced(con: duckdb.DuckDBPyConnection) -> None:
    load_records(con, [mini_record("e0-2", models="X")], replace=True)


def _removed_and_vacuumed(con: duckdb.DuckDBPyConnection) -> None:
    # The new games' first row moves into the removed game's place: raw_games' first rows are as many as before.
    remove_game(con, "e0-2")
    renumbered(con, "raw_games")


def _no_record(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"delete from {increment.GAMES_TABLE}")


@pytest.mark.parametrize("change", [_mark_edited, _replaced, _removed_and_vacuumed, _no_record])
def test_anything_but_games_added_after_them_is_compared(
        change: Callable[[duckdb.DuckDBPyConnection], None], tmp_path: Path, plans: list[dict[str, Any]]) -> None:
    con = fresh_con()
    load_records(con, games("a", 12, 0))
    assert build_warehouse(con).published
    load_records(con, games("b", 4, 1))
    change(con)
    result = build_warehouse(con)
    assert result.published
    plan = plans[-1]
    assert plan["compared"] and plan["games"] == plan["expected"]
    assert plan["increment"].replaces == plan["replaces"] == (change is not _no_record)
    assert recorded(con) == counted(con)
    if change is _replaced:  # published without a vacuum: the replaced game's deleted row is a gap in the numbers
        assert con.execute("select max(rowid) + 1 > count(*) from raw_games").fetchall()[0][0]
    load_records(con, games("c", 4, 2))  # the record the build kept serves the next, below its bound
    assert build_warehouse(con).published and not plans[-1]["compared"]
    assert recorded(con) == counted(con)
    assert_same(published(con), full_rebuild(con, tmp_path))


def _whole_build(con: duckdb.DuckDBPyConnection) -> None:
    assert build_warehouse(con, full_refresh=True).published  # its publish vacuums, after recording the bound


def _runs_compact(con: duckdb.DuckDBPyConnection) -> None:
    builds.record_unvacuumed(con, builds.VACUUM_EVERY - 1)
    assert builds.compact(con) is not None


def _checkpoint_after_landing(con: duckdb.DuckDBPyConnection) -> None:
    # As a landing connection's checkpoint does (DuckDB's own vacuum): the new games' rows move into the gap.
    load_records(con, games("b", 4, 1))
    con.execute("checkpoint")


@pytest.mark.parametrize("vacuum", [_whole_build, _runs_compact, _checkpoint_after_landing])
def test_after_a_vacuum_closes_a_replaced_games_gap_the_increment_is_the_rows_after_the_published_ones(
        vacuum: Callable[[duckdb.DuckDBPyConnection], None], tmp_path: Path, plans: list[dict[str, Any]]) -> None:
    """The publish records the bound before any vacuum renumbers the rows around a replaced game's gap and moves
    later rows below it; the plan, and a run's rehearsal, then take the rows after raw_games' first published-many
    rows (`increment.first_rows_bound`), rather than comparing the tables."""
    con = fresh_con()
    load_records(con, games("a", 12, 0))
    assert build_warehouse(con).published
    _replaced(con)
    assert build_warehouse(con).published  # an increment published without a vacuum: the replaced game's gap
    assert con.execute("select max(rowid) + 1 > count(*) from raw_games").fetchall()[0][0]
    vacuum(con)
    load_records(con, games("c", 4, 2))
    assert con.execute("select max(rowid) + 1 = count(*) from raw_games").fetchall()[0][0]  # renumbered
    (n, bound), = con.execute(f"select n_rows, bound from {increment.GAMES_TABLE}").fetchall()
    after = increment.first_rows_bound(con, n, bound)
    expected = {g for g, _ in con.execute(DIFFERING).fetchall()}
    assert after < bound and {g for (g,) in con.execute(
        f"select game_id from raw_games where rowid >= {after}").fetchall()} == expected  # the rehearsal's games
    assert build_warehouse(con).published
    assert not plans[-1]["compared"] and plans[-1]["games"] == expected
    assert recorded(con) == counted(con)
    assert_same(published(con), full_rebuild(con, tmp_path))


@pytest.mark.parametrize(("deleted", "n", "bound", "expected"), [
    ((), 12, 20, 12),  # every gap closed: the count
    ((3, 15), 12, 20, 13),  # a gap left below the first n rows (a vacuum that merged only some row groups)
    ((3, 4, 12), 9, 20, 11),  # gaps on both sides of the n-th row
    ((3,), 12, 13, 13),  # no more rows below it than n: the recorded bound
    ((), 0, 20, 0),  # no published game
])
def test_the_bound_after_raw_games_first_n_rows(deleted: tuple[int, ...], n: int, bound: int, expected: int) -> None:
    con = duckdb.connect()  # no checkpoint: deleted rows stay gaps in the numbers
    con.execute("create table raw_games as select range::varchar as game_id from range(20)")
    for row in deleted:
        con.execute(f"delete from raw_games where rowid = {row}")
    assert increment.first_rows_bound(con, n, bound) == expected
    below = con.execute(f"select count(*) from raw_games where rowid < {expected}").fetchall()[0][0]
    assert below == min(n, con.execute(f"select count(*) from raw_games where rowid < {bound}").fetchall()[0][0])
