"""A build that stops part-way leaves nothing staged (publish.build_warehouse): a failing model drops what the
build staged before it, and the next build drops what a build killed outright (kill -9, or Ctrl-C's immediate
exit) left, so an old delta never mixes with a new build's and `__staged_*` names do not pile up in the warehouse."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build.dbt_runner import PACKAGED_PROJECT
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, games, published
from support.records import fresh_con


def staged_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where starts_with(table_name, '__staged') union all "
        "select view_name from duckdb_views() where starts_with(view_name, '__staged')").fetchall()}


def test_the_next_build_drops_what_a_killed_build_left_staged(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    assert build_warehouse(con).published
    load_records(con, games("b", 4, 1))
    # What a build killed during its dbt run leaves: the increment's ids, a delta holding a row no game has, a
    # staged mart.
    con.execute("create table __staged__increment_games as select 'ghost' as game_id")
    con.execute("create table __staged_fct_games__delta as select * from fct_games limit 1")
    con.execute("update __staged_fct_games__delta set game_id = 'ghost'")
    con.execute("create table __staged_mart_old as select 1 as x")
    # And a summed model's, killed while it took a replaced game's counts away (macros/increment.sql).
    con.execute("create view __staged_int_model_counts__reads_int_player_games as select * from int_player_games")
    con.execute("create table __staged_int_model_counts__removed as select * from int_model_counts limit 1")
    result = build_warehouse(con)
    assert result.published and any(m.materialized == "incremental" for m in result.models)
    assert staged_names(con) == set()
    assert_same(published(con), full_rebuild(con, tmp_path))


def test_a_build_that_fails_part_way_leaves_nothing_staged(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    assert build_warehouse(con).published
    load_records(con, games("b", 4, 1))
    before = published(con)
    project = tmp_path / "sql"
    shutil.copytree(PACKAGED_PROJECT, project, ignore=shutil.ignore_patterns("target", "logs", "dbt_packages"))
    broken = project / "models" / "marts" / "mart_win_rates.sql"
    broken.write_text(broken.read_text() + "\nselect * from no_such_table\n")  # fails after the models before it
    with pytest.raises(Exception, match=r"mart_win_rates|no_such_table"):
        build_warehouse(con, sql_dir=project)
    assert staged_names(con) == set()
    assert published(con) == before
