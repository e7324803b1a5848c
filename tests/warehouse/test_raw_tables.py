"""Each raw table is declared once (`warehouse.raw.RAW_SCHEMA`), and the dbt project's sources (one YAML per table,
`models/staging/sources/<table>.yml`) say the same: every source table is a declared one (or `ref_prices`, which the
build writes from the price table), with the same columns in the same order; a disagreement names the table and the
columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml  # type: ignore[import-untyped]

from mafiabench.transform.build.dbt_runner import PACKAGED_PROJECT
from mafiabench.transform.build.marts import ref_prices
from mafiabench.warehouse.raw import RAW_SCHEMA, column_names, ensure_schema


def project_sources() -> dict[str, Any]:
    """The `sources:` of every YAML of the packaged project, as one document."""
    files = sorted((PACKAGED_PROJECT / "models").rglob("*.yml"))
    return {"sources": [s for p in files for s in (yaml.safe_load(p.read_text()) or {}).get("sources") or []]}


def declared_columns() -> dict[str, list[str]]:
    """What the warehouse's writers create, read back from a fresh database (not parsed from the declaration)."""
    con = duckdb.connect()
    ensure_schema(con)
    out = {t: [r[0] for r in con.execute(f'describe "{t}"').fetchall()] for t in RAW_SCHEMA}
    out["ref_prices"] = list(ref_prices().columns)
    return out


def disagreements(sources: dict[str, Any], declared: dict[str, list[str]]) -> list[str]:
    found = []
    tables = {t["name"]: [c["name"] for c in t.get("columns") or []]
              for src in sources["sources"] for t in src["tables"]}
    for name, columns in tables.items():
        if name not in declared:
            found.append(f"{name}: a source no writer declares")
        elif columns != declared[name]:
            found.append(f"{name}: its source YAML lists {columns}, the declaration {declared[name]}")
    found += [f"{name}: declared but not a source" for name in declared if name not in tables]
    return found


def test_the_sources_are_the_declared_tables() -> None:
    assert disagreements(project_sources(), declared_columns()) == []


def test_the_declaration_is_what_ensure_schema_creates() -> None:
    declared = declared_columns()
    for table in RAW_SCHEMA:
        assert column_names(table) == declared[table], table


@pytest.mark.parametrize("change", ["drop a column", "rename a table", "add a table", "reorder"])
def test_a_disagreement_is_named(change: str, tmp_path: Path) -> None:
    sources = project_sources()
    tables = sources["sources"][0]["tables"]
    games = next(t for s in sources["sources"] for t in s["tables"] if t["name"] == "raw_games")
    if change == "drop a column":
        games["columns"] = [c for c in games["columns"] if c["name"] != "batch_id"]
        expected = "raw_games: its source YAML lists"
    elif change == "rename a table":
        games["name"] = "raw_game"
        expected = "raw_game: a source no writer declares"
    elif change == "add a table":
        tables.append({"name": "raw_extra", "columns": [{"name": "x"}]})
        expected = "raw_extra: a source no writer declares"
    else:
        games["columns"] = games["columns"][::-1]
        expected = "raw_games: its source YAML lists"
    found = disagreements(sources, declared_columns())
    assert found and any(f.startswith(expected) for f in found), found
