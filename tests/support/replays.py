"""Scheduled builds for the replay tests (transform.build.replay): a warehouse built whole, then once incrementally
(which records dbt's runs), with another increment landed and not built; copies of it; what a build heard from dbt
or its replay."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import replay
from mafiabench.transform.build.dbt_runner import NodeResult
from mafiabench.warehouse.raw import load_records
from support.increments import games
from support.records import fresh_con


def scheduled() -> duckdb.DuckDBPyConnection:
    """A warehouse whose published build was an increment (recorded), with the next increment landed."""
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    assert build_warehouse(con).published
    load_records(con, games("b", 4, 1))
    recorded = build_warehouse(con)
    assert recorded.published and recorded.replayed == []
    assert {r[0] for r in con.execute(f"select kind from {replay.TABLE}").fetchall()} == {"graph", "run", "test"}
    load_records(con, games("c", 4, 2))
    return con


def copy(con: duckdb.DuckDBPyConnection, tmp: Path) -> duckdb.DuckDBPyConnection:
    """The same warehouse in a new folder, under the same name (the records are keyed by the file's stem)."""
    con.execute("checkpoint")
    source = con.execute("select path from duckdb_databases() where database_name = current_database()").fetchone()
    assert source is not None
    target = tmp / f"copy-{len(list(tmp.iterdir()))}" / "w.duckdb"
    target.parent.mkdir()
    shutil.copyfile(source[0], target)
    return duckdb.connect(str(target))


def heard(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[NodeResult]]]:
    """Every (command, NodeResults) the builds' dbt runs or replays give from now on."""
    out: list[tuple[str, list[NodeResult]]] = []
    run = replay.Session.run

    def spy(self: replay.Session, con: duckdb.DuckDBPyConnection, command: str, **kw: Any) -> list[NodeResult]:
        results = run(self, con, command, **kw)
        out.append((command, results))
        return results

    monkeypatch.setattr(replay.Session, "run", spy)
    return out


def staged_relations(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where starts_with(table_name, '__staged_') union all "
        "select view_name from duckdb_views() where starts_with(view_name, '__staged_')").fetchall()}
