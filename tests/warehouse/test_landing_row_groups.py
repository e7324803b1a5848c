"""The landing writer's row groups: runs whose records carry prompts land them in small row groups (each landing's
checkpoint rewrites only a small last group, so a long run's memory stays flat: benchmarks/bench_run_memory.py);
policy runs keep DuckDB's default groups, which the marts scan faster (benchmarks/bench_row_groups.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb

from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.warehouse.raw import LANDING_ROW_GROUP_SIZE, connect


def row_groups(warehouse: Path, table: str) -> list[int]:
    """Rows in each row group of a table (as stored on disk)."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return [r[0] for r in con.execute(
            f"select max(count) from pragma_storage_info('{table}') where column_id = 0 "
            "group by row_group_id order by row_group_id"
        ).fetchall()]
    finally:
        con.close()


def study(tmp_path: Path, agents: dict[str, str], games: int) -> Path:
    warehouse = tmp_path / "w.duckdb"
    exp = parse_experiment(
        {"name": "rg", "games_per_cell": games, "shard_size": 100, "warehouse": str(warehouse),
         "cells": [{"name": "c", "agents": agents}]},
        "<test>",
    )
    summary = asyncio.run(run_study(exp, progress=False))
    assert summary.games_done == games
    return warehouse


def test_a_run_with_model_calls_lands_them_in_small_row_groups(tmp_path: Path) -> None:
    warehouse = study(tmp_path, {"default": "scripted/naive"}, 300)  # 9 calls a game: 2,700 rows
    groups = row_groups(warehouse, "raw_model_calls")
    assert sum(groups) == 2700
    assert len(groups) >= 2 and max(groups) <= LANDING_ROW_GROUP_SIZE


def test_a_policy_run_keeps_the_default_row_groups(tmp_path: Path) -> None:
    warehouse = study(tmp_path, {"default": "policy/random"}, 600)
    groups = row_groups(warehouse, "raw_events")
    assert sum(groups) > LANDING_ROW_GROUP_SIZE and max(groups) > LANDING_ROW_GROUP_SIZE


def test_the_landing_writer_keeps_the_catalog_name_and_a_quoted_path(tmp_path: Path) -> None:
    path = tmp_path / "it's a warehouse.duckdb"
    con = connect(path, landing=True)
    try:
        assert con.execute("select current_database()").fetchone() == ("it's a warehouse",)
        con.execute("insert into raw_games (game_id) values ('g')")
    finally:
        con.close()
    con = duckdb.connect(str(path), read_only=True)  # a reader opens it directly, under the same name
    try:
        assert con.execute("select current_database(), count(*) from raw_games").fetchone() == ("it's a warehouse", 1)
    finally:
        con.close()
