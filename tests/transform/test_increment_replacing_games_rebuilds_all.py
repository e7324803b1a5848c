"""An increment that replaces or removes published games rebuilds every model (transform.build.increment): the
sources lose rows of published games, which no count of the increment's rows shows. A removed game that had beliefs,
with no beliefs landed since, would otherwise keep its rows in the belief marts."""

from __future__ import annotations

from pathlib import Path

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, games, kept, published, remove_game
from support.records import engine_records, fresh_con, mini_record


def test_a_replaced_or_removed_game_rebuilds_everything(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    assert build_warehouse(con).published
    load_records(con, engine_records(2, seed=9))  # no beliefs landed: the belief models are kept
    assert {"stg_beliefs", "int_belief_consistency"} <= kept(build_warehouse(con))

    believer = con.execute("select min(game_id) from raw_beliefs").fetchone()
    assert believer is not None
    remove_game(con, believer[0])
    result = build_warehouse(con)
    assert result.published and not kept(result)
    assert_same(published(con), full_rebuild(con, tmp_path))

    load_records(con, [mini_record("e9-0", models="X")], replace=True)  # a published game, another record of it
    result = build_warehouse(con)
    assert result.published and not kept(result)
    assert_same(published(con), full_rebuild(con, tmp_path))
