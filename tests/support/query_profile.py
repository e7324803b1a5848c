"""What DuckDB did for each query a function ran: a connection wrapper that keeps every query's profile (operators,
the rows each produced and the table each scan read), for tests that a model reads or aggregates only what it must.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import duckdb


@dataclass(frozen=True)
class Operator:
    name: str
    rows: int
    table: str | None
    children: tuple[Operator, ...]


def _operator(node: dict[str, Any]) -> Operator:
    table = node.get("extra_info", {}).get("Table")
    return Operator(node["name"], int(node.get("intermediate_rows", 0)),
                    table.rsplit(".", 1)[-1] if isinstance(table, str) else None,
                    tuple(_operator(c) for c in node.get("children", [])))


def walk(op: Operator) -> list[Operator]:
    return [op, *(o for c in op.children for o in walk(c))]


def operators(cur: duckdb.DuckDBPyConnection) -> list[Operator]:
    """Every operator of the last query `cur` ran with profiling on (`pragma enable_profiling`), in plan order."""
    profile = json.loads(cur.get_profiling_information(format="json"))
    return [o for top in profile.get("operator", []) for o in walk(_operator(top))]


class _Result:
    def __init__(self, relation: duckdb.DuckDBPyRelation | None, rows: list[tuple[Any, ...]] | None = None) -> None:
        self._rows = rows
        self._relation = relation

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows if self._rows is not None else self._relation.fetchall()  # type: ignore[union-attr]


@dataclass
class ProfiledConnection:
    """Stands in for a DuckDB connection (`execute(...).fetchall()`, `sql(...).pl()`): runs each query at once and
    keeps its profile in `queries` as (query text, operators)."""

    con: duckdb.DuckDBPyConnection
    queries: list[tuple[str, list[Operator]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.con.execute("pragma enable_profiling = 'no_output'")

    def _keep(self, query: str) -> None:
        self.queries.append((query, operators(self.con)))

    def execute(self, query: str, parameters: Any = None) -> _Result:
        rows = self.con.execute(query, parameters).fetchall()
        self._keep(query)
        return _Result(None, rows)

    def sql(self, query: str) -> Any:
        frame = self.con.sql(query).pl()
        self._keep(query)
        return _Frame(frame)

    def operators(self) -> list[Operator]:
        return [o for _, ops in self.queries for o in ops]

    def scanned(self, table: str) -> int:
        """Rows the queries' scans of `table` produced (after the filters pushed into them)."""
        return sum(o.rows for o in self.operators() if o.table == table)

    def aggregated(self) -> int:
        """The most rows any aggregate took in."""
        return max((sum(c.rows for c in o.children) for o in self.operators() if "GROUP_BY" in o.name), default=0)


class _Frame:
    def __init__(self, frame: Any) -> None:
        self._frame = frame

    def pl(self) -> Any:
        return self._frame
