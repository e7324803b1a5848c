"""An increment whose games the lander replaced (a failed game played again, a re-import) proves the suites over the
raw tables from the increment's rows as one that only adds games does (quality.delta), given the rows the lander
deleted (`warehouse.raw.DELETED_ROWS`): each raw table holds the published build's rows, less those, plus the
increment's. The suite that adds the increment's rows to the published count (belief_sums) runs whole, the replaced
games' rows being in that count; a bad row in a replaced game runs whole too. The lander counts only the deleted rows
the published build read, so a game replaced twice since, or a new game landed and replaced since, is proven as well.
Every time, the gate gives every expectation the verdict, counts and failing rows the whole suites give."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from mafiabench.warehouse.raw import DELETED_ROWS, load_records
from support.gate_increments import RAW_SUITES, assert_same_gate, build, copy, gate_twice
from support.records import engine_records, mini_record

VOTES = {"Alice": "Bob", "Bob": "Alice", "Charlie": "Bob"}


def _replace(con: duckdb.DuckDBPyConnection, game: str = "e0-0", **options: object) -> None:
    load_records(con, [mini_record(game, models="X", votes=VOTES, **options)], replace=True)  # type: ignore[arg-type]


def _replace_a_believer(con: duckdb.DuckDBPyConnection) -> None:
    """A classic game with beliefs landed again as another game's record: belief_sums' count changes."""
    (other,) = engine_records(1, seed=97, variant="classic", rules={"n_players": 6, "n_mafia": 1, "decision": "belief"})
    load_records(con, [dataclasses.replace(other, game_id="e50-0")], replace=True)


def _twice(con: duckdb.DuckDBPyConnection) -> None:
    """A published game replaced, then replaced again before the build: the second delete is of rows landed since."""
    _replace(con)
    _replace(con, seats=(("Bob", "villager"), ("Alice", "mafioso"), ("Charlie", "detective"), ("Diana", "villager")))


def _new_then_replaced(con: duckdb.DuckDBPyConnection) -> None:
    """A published game replaced, and a game new to the warehouse landed, then replaced (its first rows never read)."""
    _replace(con)
    load_records(con, [mini_record("n0-0", models="X")])
    _replace(con, "n0-0")


@pytest.mark.parametrize("change", [_replace, _replace_a_believer, _twice, _new_then_replaced])
def test_a_replacing_increment_is_gated_as_a_whole_gate_would(
        change: Callable[[duckdb.DuckDBPyConnection], None], landed_increment: Path, tmp_path: Path) -> None:
    got, whole = gate_twice(landed_increment, tmp_path, change)
    assert got.published and any(m.materialized == "incremental" for m in got.models)
    assert got.proven_suites == [s for s in RAW_SUITES if s != "belief_sums"]
    assert_same_gate(got, whole)


def test_the_publish_clears_the_deletes_it_accounted_for(landed_increment: Path, tmp_path: Path) -> None:
    con = copy(landed_increment, tmp_path)
    try:
        _replace(con)
        deleted = dict(con.execute(f"select source, sum(n_rows) from {DELETED_ROWS} group by all").fetchall())
        assert deleted["raw_games"] == 1 and deleted["raw_players"] == 4  # the replaced game's earlier rows
        assert build(con).published
        assert not con.execute(f"select count(*) from {DELETED_ROWS}").fetchall()[0][0]
        _replace(con, "e0-1")  # the next increment's deletes, counted from the publish on
        _replace(con, "e0-1", seats=(("Bob", "villager"), ("Alice", "mafioso"), ("Charlie", "detective"),
                                     ("Diana", "villager")))  # rows landed since: not counted
        deleted = dict(con.execute(f"select source, sum(n_rows) from {DELETED_ROWS} group by all").fetchall())
        assert deleted["raw_games"] == 1 and deleted["raw_players"] == 4
        again = build(con)
        assert again.published and "raw_players" in again.proven_suites
    finally:
        con.close()


def _bad_role(con: duckdb.DuckDBPyConnection) -> None:
    _replace(con)
    con.execute("update raw_players set role = 'wizard' where game_id = 'e0-0'")


def _removed_by_hand(con: duckdb.DuckDBPyConnection) -> None:
    """A replaced game, and a published game's players deleted outside the lander: the sum does not add up."""
    _replace(con)
    con.execute("delete from raw_players where game_id = 'e0-1'")


CASES: dict[str, tuple[Callable[[duckdb.DuckDBPyConnection], object], bool]] = {
    "a replaced game's unknown role": (_bad_role, False),
    "a published game's rows deleted outside the lander": (_removed_by_hand, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_cannot_be_proven_runs_whole(case: str, landed_increment: Path, tmp_path: Path) -> None:
    change, passes = CASES[case]
    got, whole = gate_twice(landed_increment, tmp_path, change)
    assert got.published == passes and "raw_players" not in got.proven_suites
    assert_same_gate(got, whole)
