"""`mafiabench query`: ad hoc SQL against the warehouse (read-only); `mafiabench catalogue`: document its tables."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mafiabench.errors import UserError
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE

MAX_CELL = 60


def register(subparsers: argparse._SubParsersAction) -> None:
    q = subparsers.add_parser(
        "query",
        help="run a SQL query against the warehouse (read-only)",
        description="Run SQL on a read-only connection to the warehouse and print the result as a table, or write "
        "it to CSV or Parquet. `mafiabench catalogue` lists the tables, their grain and columns.",
    )
    q.add_argument("sql", help='the query, e.g. "select * from mart_win_rates where dimension = \'all\'"')
    q.add_argument("--warehouse", type=Path, default=DEFAULT_WAREHOUSE, help="DuckDB file (default: %(default)s)")
    out = q.add_mutually_exclusive_group()
    out.add_argument("--csv", type=Path, metavar="FILE", help="write the result to a CSV file")
    out.add_argument("--parquet", type=Path, metavar="FILE", help="write the result to a Parquet file")
    q.add_argument("--max-rows", type=int, default=100, help="rows to print (default: %(default)s; 0 = all)")
    q.set_defaults(func=run_query)

    c = subparsers.add_parser(
        "catalogue",
        help="write the catalogue of warehouse tables (grain, purpose, columns)",
        description="Generate docs/catalogue.md from the models in sql/ and the Python marts.",
    )
    c.add_argument("--output", type=Path, default=None, help="file to write (default: docs/catalogue.md)")
    c.add_argument("--check", action="store_true", help="exit 1 if the file differs from the generated catalogue")
    c.set_defaults(func=run_catalogue)


def run_query(args: argparse.Namespace) -> int:
    import duckdb

    from mafiabench.warehouse.raw import connect

    if not Path(args.warehouse).exists():
        raise UserError(f"warehouse {args.warehouse} does not exist; land games and run `mafiabench build` first")
    con = connect(args.warehouse, read_only=True)
    try:
        try:
            rel = con.sql(args.sql)
        except duckdb.Error as exc:
            raise UserError(f"query failed: {exc}") from exc
        if rel is None:  # a statement without a result (SET, PRAGMA ...)
            return 0
        try:
            if args.csv:
                rel.write_csv(str(args.csv), header=True)
                print(f"wrote {args.csv}", file=sys.stderr)
            elif args.parquet:
                rel.write_parquet(str(args.parquet))
                print(f"wrote {args.parquet}", file=sys.stderr)
            else:
                limit = args.max_rows if args.max_rows > 0 else None
                rows = rel.limit(limit + 1).fetchall() if limit else rel.fetchall()
                more = bool(limit and len(rows) > limit)
                print(format_table(rel.columns, rows[:limit] if limit else rows, more=more))
        except duckdb.Error as exc:
            raise UserError(f"query failed: {exc}") from exc
    finally:
        con.close()
    return 0


def _cell(value: Any) -> str:
    text = "NULL" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, more: bool = False) -> str:
    """A plain aligned text table (numbers right-aligned), with a row count."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [
        bool(rows) and all(isinstance(r[i], int | float) or r[i] is None for r in rows) for i in range(len(columns))
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True))

    out = [line(list(columns)).rstrip(), "  ".join("-" * w for w in widths)]
    out += [line(r).rstrip() for r in cells]
    n = len(rows)
    out.append(f"({n} row{'s' if n != 1 else ''}{', more not shown: use --max-rows 0 or --csv' if more else ''})")
    return "\n".join(out)


def run_catalogue(args: argparse.Namespace) -> int:
    from mafiabench.build import catalogue

    path = args.output or catalogue.DEFAULT_PATH
    text = catalogue.generate()
    if args.check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            print(f"{path} is out of date: run `mafiabench catalogue`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return 0
