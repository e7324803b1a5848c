"""The increments' reference (support.increments.full_rebuild): a first build of a copy that keeps the landed tables
and a table of the test's own, and nothing a build made; that first build replays the session's record of a first
build (it ran dbt at every reference as `--full-refresh`, 26 runs and 183 s of six files' 421 s: BENCHMARKS.md) and
publishes what the warehouse's own first build published."""

from __future__ import annotations

from pathlib import Path

import duckdb

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, games, landed_copy, published
from support.records import fresh_con


def _relations(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' union all "
        "select view_name from duckdb_views() where schema_name = 'main' and not internal").fetchall()}


def test_the_landed_copy_is_what_a_first_build_finds_and_its_build_replays_the_first_build(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    con.execute("create table notes as select 1 as x")  # a table of the user's: not a build's, kept
    landed = _relations(con)
    assert any(n.startswith("raw_") for n in landed) and "notes" in landed
    first = build_warehouse(con)  # publishes, and keeps its record on the machine
    assert first.published and _relations(con) > landed

    copy = landed_copy(con, tmp_path)
    try:
        assert _relations(copy) == landed
        result = build_warehouse(copy)
        assert result.published and result.replayed == ["run", "test"]
        assert all(m.materialized not in ("incremental", "kept") for m in result.models)
        assert_same(published(copy), published(con))
    finally:
        copy.close()
        con.close()
