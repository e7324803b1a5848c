"""An increment reads the raw tables' rows of its games from their tails, the rows numbered from the published build's
count on (warehouse.builds.increment_tails), and publishes what a full rebuild does, row for row; a table whose rows
of the increment's games may lie before its tail (a replacing increment's after a vacuum, rows landed before their
game) is read by game id as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import increment
from mafiabench.warehouse.raw import load_records
from support import statement_games as hand
from support.gate_increments import copy
from support.increments import assert_same, full_rebuild, games, published, remove_game
from support.records import design, fresh_con, mini_record

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py), not last

# The tables the games of `support.increments.games` have rows in, each read from its tail.
TAILED = {"raw_games", "raw_players", "raw_events", "raw_model_calls", "raw_beliefs"}


@pytest.fixture
def tails() -> Iterator[list[dict[str, tuple[int, int]]]]:
    """What each build's plan found (`increment_tails`), build after build."""
    found: list[dict[str, tuple[int, int]]] = []
    real = increment.increment_tails

    def spy(con: duckdb.DuckDBPyConnection, games: str, **options: Any) -> dict[str, tuple[int, int]]:
        out = real(con, games, **options)
        found.append(out)
        return out

    with mock.patch.object(increment, "increment_tails", spy):
        yield found


def renumbered(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """What a checkpoint's vacuum does to a table's row numbers (DuckDB merges row groups holding deleted rows): the
    rows left numbered from 0, in their order. A real one needs row groups of 122,880 rows; tests/warehouse/
    test_increment_tails.py has one on a table that large."""
    con.execute(f"alter table {table} rename to __renumbered; "
                f"create table {table} as select * from __renumbered order by rowid; drop table __renumbered")


def test_an_increment_adding_games_reads_their_rows_from_the_tails(
        landed_increment: Path, tmp_path: Path, tails: list[dict[str, tuple[int, int]]]) -> None:
    con = copy(landed_increment, tmp_path)
    try:
        before = {t: con.execute(f"select count(*) from {t}").fetchall()[0][0] for t in TAILED}
        result = build_warehouse(con)
        assert result.published and any(m.materialized == "incremental" for m in result.models)
        assert len(tails) == 1 and set(tails[0]) == TAILED
        recorded = dict(con.execute("select source, n_rows from build_grain_rows").fetchall())
        # Each tail starts at the rows the published build read and holds the increment's rows, no other.
        assert {t: first + added for t, (first, added) in tails[0].items()} == before
        assert all(added > 0 and first + added == recorded[t] for t, (first, added) in tails[0].items())
        assert_same(published(con), full_rebuild(con, tmp_path))
    finally:
        con.close()


@pytest.mark.parametrize("vacuumed", [False, True])
def test_a_replacing_increment_reads_its_tails_unless_a_vacuum_moved_its_rows(
        vacuumed: bool, tmp_path: Path, tails: list[dict[str, tuple[int, int]]]) -> None:
    con = fresh_con()
    load_records(con, games("a", 12, 0))
    assert build_warehouse(con).published
    # A replacing increment (a published game landed again, another removed): their rows are deleted, which leaves
    # gaps in the numbers, and the new rows come after every row there is; a vacuum since (`vacuumed`) numbers the
    # rows left from 0, which moves the increment's first rows below the published count: those tables are read by
    # game id.
    load_records(con, [mini_record("a-0", models="X", votes={"Alice": "Bob", "Bob": "Alice", "Charlie": "Bob"},
                                   design=design("homogeneous|X", None, "X", "X"))], replace=True)
    remove_game(con, "e0-3")
    load_records(con, games("b", 4, 1))
    moved = {"raw_events", "raw_players"} if vacuumed else set()
    for table in moved:  # not raw_games: the copy would drop its primary key
        renumbered(con, table)
    result = build_warehouse(con)
    assert result.published and set(tails[-1]) == TAILED - moved
    assert all(added > 0 for added in (n for _, n in tails[-1].values()))
    assert_same(published(con), full_rebuild(con, tmp_path))
    # The increment after it, adding games (after another vacuum, `vacuumed`), reads every table from its tail.
    for table in moved:
        renumbered(con, table)
    load_records(con, games("c", 6, 2))
    result = build_warehouse(con)
    assert result.published and set(tails[-1]) == TAILED
    assert_same(published(con), full_rebuild(con, tmp_path))


def test_rows_of_an_increment_game_before_the_tail_are_read_by_game(
        tmp_path: Path, tails: list[dict[str, tuple[int, int]]]) -> None:
    """A game's statements and labels published before the game landed (no suite finds a statement of a game not
    landed): they lie before the tails, so those tables are read whole, and the increment is the full rebuild's."""
    con = fresh_con()
    load_records(con, [*games("a", 8, 0), hand.play(game_id="hand-1"), hand.play(hand.SEED + 1, game_id="hand-2")])
    for table in ("raw_games", "raw_players", "raw_events", "raw_model_calls", "raw_beliefs"):
        con.execute(f"delete from {table} where game_id = 'hand-1'")  # its statements and labels stay
    first = build_warehouse(con)
    assert first.published, [r for r in first.failures]
    load_records(con, [hand.play(game_id="hand-1")])  # now landed: its statements and labels again, in the tail
    result = build_warehouse(con)
    assert result.published
    assert not {"raw_statements", "raw_statement_labels"} & set(tails[-1]) and "raw_events" in tails[-1]
    labels: Any = con.execute("select count(*) from int_statement_labels where game_id = 'hand-1'").fetchall()
    assert labels[0][0] > 0
    assert_same(published(con), full_rebuild(con, tmp_path))
