"""An increment that replaces or removes published games keeps the models whose sources lost and gained no row
(transform.build.increment.changed_sources): a table a game record lands in changed when it holds rows of the
increment's games or other than the rows the published build read; with no record of those rows, every model is
rebuilt. A removed game that had beliefs, with no beliefs landed since, must not keep its rows in the belief marts;
each time the published relations equal a full rebuild's, row for row."""

from __future__ import annotations

from pathlib import Path

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.builds import GRAIN_ROWS_TABLE
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, games, kept, published, remove_game
from support.records import engine_records, fresh_con, mini_record

BELIEFS = {"stg_beliefs", "int_belief_consistency"}


def test_a_replaced_or_removed_game_rebuilds_what_it_touched(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    assert build_warehouse(con).published
    load_records(con, engine_records(2, seed=9))  # no beliefs landed: the belief models are kept
    assert kept(build_warehouse(con)) >= BELIEFS

    believer = con.execute("select min(game_id) from raw_beliefs").fetchone()
    assert believer is not None
    remove_game(con, believer[0])  # its beliefs go: the belief models are rebuilt, the statements' kept
    result = build_warehouse(con)
    assert result.published and not BELIEFS & kept(result) and "stg_statements" in kept(result)
    assert_same(published(con), full_rebuild(con, tmp_path))

    # A published game without beliefs, another record of it: the belief models are kept again.
    assert not con.execute("select count(*) from raw_beliefs where game_id = 'e9-0'").fetchall()[0][0]
    load_records(con, [mini_record("e9-0", models="X")], replace=True)
    result = build_warehouse(con)
    assert result.published and kept(result) >= BELIEFS
    assert_same(published(con), full_rebuild(con, tmp_path))


def test_without_the_published_rows_every_model_is_rebuilt(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 4, 0))
    assert build_warehouse(con).published
    con.execute(f"delete from {GRAIN_ROWS_TABLE}")  # as a build published without its gate's record
    load_records(con, [mini_record("e0-0", models="X")], replace=True)
    result = build_warehouse(con)
    assert result.published and not kept(result)
    assert_same(published(con), full_rebuild(con, tmp_path))
