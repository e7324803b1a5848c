"""An incremental build keeps the SQL models whose inputs did not change (transform.build.increment.kept_models):
games that land without beliefs, statements or model calls leave the models that read only those (and runs,
protocol cards) as published, dbt builds fewer models, the rebuilt models read the kept ones' published relations
(a per-game model its delta of them), and the marts published equal a full rebuild's, row for row."""

from __future__ import annotations

from pathlib import Path

import duckdb

import support.statement_games as hand
from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, games, kept, published
from support.records import engine_records, fresh_con

# Read only what the new games do not land in: beliefs, statements and their labels, model calls, runs, cards.
UNTOUCHED = {
    "stg_beliefs", "int_belief_consistency", "stg_statements", "stg_statement_labels", "stg_model_calls",
    "stg_runs", "stg_stopping_looks", "stg_protocol_cards", "mart_runs", "mart_stopping", "mart_protocol_cards",
}


def _oids(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return dict(con.execute("select table_name, table_oid from duckdb_tables() where schema_name = 'main' union all "
                            "select view_name, view_oid from duckdb_views() where schema_name = 'main'").fetchall())


def test_an_increment_keeps_what_it_does_not_change(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, [*games("a", 12, 0), hand.play(game_id="hand-1")])
    first = build_warehouse(con)
    assert first.published and not kept(first)
    before = _oids(con)

    load_records(con, engine_records(6, seed=9))  # mini-mafia games: players and events only
    result = build_warehouse(con)
    assert result.published
    assert kept(result) >= UNTOUCHED
    assert {"stg_games", "stg_events", "fct_games", "int_player_games", "int_statement_labels",
            "mart_deception_scores"}.isdisjoint(kept(result))
    sql = [m for m in result.models if m.kind == "sql"]
    assert len(sql) == len([m for m in first.models if m.kind == "sql"])  # every model listed, kept or built
    after = _oids(con)
    assert all(after[name] == before[name] for name in kept(result))  # the very relations published before
    assert all(after[name] != before[name] for name in {"mart_win_rates", "mart_format_failures"})

    assert_same(published(con), full_rebuild(con, tmp_path))
