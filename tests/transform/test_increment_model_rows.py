"""An incremental build's per-model table gives each incremental model the rows it publishes (transform.build.marts:
`_staged_rows`): its published table's and its delta's when the increment only adds games, its staged view's when the
delta rewrites published games (fct_player_games as a study's settings_varied flips) or the increment replaces or
removes games."""

from __future__ import annotations

import duckdb

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import load_records
from support.increments import games, remove_game
from support.records import fresh_con, mini_record


def listed_and_published(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int | None, int]]:
    """A build's incremental models: the rows its per-model table lists for each, and the rows it published."""
    result = build_warehouse(con)
    assert result.published
    rows = {m.name: (m.rows, int(con.execute(f'select count(*) from main."{m.name}"').fetchall()[0][0]))
            for m in result.models if m.materialized == "incremental"}
    assert {"fct_games", "fct_player_games", "int_decisions"} <= set(rows)
    return rows


def varied(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("select count(*) from fct_player_games where settings_varied").fetchall()[0][0])


def test_each_incremental_model_lists_the_rows_it_publishes() -> None:
    con = fresh_con()
    load_records(con, games("a", 12, 0))
    assert build_warehouse(con).published
    load_records(con, games("b", 4, 1))
    builds = [listed_and_published(con)]
    assert varied(con) == 0
    load_records(con, games("c", 4, 2, temperature=0.2))  # another temperature: model X's published rows rewritten
    builds.append(listed_and_published(con))
    assert varied(con) > 0
    load_records(con, [mini_record("e0-2", models="X")], replace=True)
    remove_game(con, "e0-3")
    builds.append(listed_and_published(con))
    for rows in builds:
        assert {name: listed for name, (listed, _) in rows.items()} == \
            {name: published for name, (_, published) in rows.items()}
