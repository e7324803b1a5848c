"""`mafiabench query`: ad hoc SQL against the warehouse (read-only); `mafiabench catalogue`: document its tables."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from mafiabench.commands import command, write_generated
from mafiabench.errors import UserError
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE

MAX_CELL = 60


def register(app: typer.Typer) -> None:
    command(
        app,
        "query",
        short_help="run a SQL query against the warehouse (read-only)",
        help="Run SQL on a read-only connection to the warehouse and print the result as a table, or write "
        "it to CSV or Parquet. `mafiabench catalogue` lists the tables, their grain and columns.",
    )(run_query)
    command(
        app,
        "catalogue",
        short_help="write the catalogue of warehouse tables (grain, purpose, every column's meaning)",
        help="Generate docs/catalogue.md (in the working folder) from the dbt project's YAML: every source, model "
        "and Python mart with its grain, purpose, lineage and each column's type and meaning, and the data tests.",
    )(run_catalogue)


def run_query(
    sql: Annotated[
        str, typer.Argument(help='the query, e.g. "select * from mart_win_rates where dimension = \'all\'"')
    ],
    warehouse: Annotated[Path, typer.Option(help="DuckDB file")] = DEFAULT_WAREHOUSE,
    csv: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="write the result to a CSV file ('-': to standard output)",
                     show_default=False),
    ] = None,
    parquet: Annotated[
        Path | None, typer.Option(metavar="FILE", help="write the result to a Parquet file", show_default=False)
    ] = None,
    max_rows: Annotated[int, typer.Option(help="rows to print (0 = all)")] = 100,
) -> int:
    import duckdb

    from mafiabench.warehouse.landing import connect_reader

    if csv and parquet:
        raise typer.BadParameter("--csv and --parquet are mutually exclusive: give one", param_hint="--parquet")
    if not Path(warehouse).exists():
        raise UserError(f"warehouse {warehouse} does not exist; land games and run `mafiabench build` first")
    con = connect_reader(Path(warehouse))  # a running study lets readers in between its landings
    try:
        try:
            rel = con.sql(sql)
        except duckdb.Error as exc:
            raise UserError(f"query failed: {exc}") from exc
        if rel is None:  # a statement without a result (SET, PRAGMA ...)
            return 0
        try:
            if csv is not None and str(csv) == "-":  # to standard output, as DuckDB writes a file
                _csv_to_stdout(rel)
            elif csv:
                rel.write_csv(str(csv), header=True)
                print(_wrote(csv, warehouse, empty=_csv_is_empty(csv, rel.columns), holds="the header"),
                      file=sys.stderr)
            elif parquet:
                rel.write_parquet(str(parquet))
                n = con.execute("select coalesce(sum(num_rows), 0) from parquet_file_metadata(?)",
                                [str(parquet)]).fetchall()[0][0]
                print(_wrote(parquet, warehouse, empty=n == 0, holds="the column types", rows=int(n)),
                      file=sys.stderr)
            else:
                limit = max_rows if max_rows > 0 else None
                rows = rel.limit(limit + 1).fetchall() if limit else rel.fetchall()
                more = bool(limit and len(rows) > limit)
                print(format_table(rel.columns, rows[:limit] if limit else rows, more=more))
        except duckdb.Error as exc:
            raise UserError(f"query failed: {exc}") from exc
    finally:
        con.close()
    return 0


def _csv_to_stdout(rel: Any) -> None:
    """`--csv -`: DuckDB writes the CSV into a temporary file of this process, copied to standard output (the same
    bytes as a file; a file named `-` was written before)."""
    from mafiabench import scratch

    with scratch.folder("query") as folder:
        path = folder / "result.csv"
        rel.write_csv(str(path), header=True)
        sys.stdout.flush()
        with path.open("rb") as f:
            shutil.copyfileobj(f, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def _wrote(path: Path, warehouse: Path, *, empty: bool, holds: str, rows: int | None = None) -> str:
    """The line after writing a file: a file with no rows says so and why, in one line naming both files."""
    if empty:
        return (f"wrote {path} with no rows: the query returned none from {warehouse} (the file holds only {holds}; "
                "check the query's filters and the table it reads)")
    return f"wrote {path}" + ("" if rows is None else f" ({rows:,} row{'s' if rows != 1 else ''})")


def _csv_is_empty(path: Path, columns: Sequence[str]) -> bool:
    """Whether a CSV the query wrote holds its header alone: nothing after the header's line (read up to it only;
    a column name with a line break in it makes the answer "not empty", never a false "empty")."""
    if any("\n" in c or "\r" in c for c in columns):
        return False
    with open(path, "rb") as f:
        f.readline()
        return not f.read(1)


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


def run_catalogue(
    output: Annotated[
        Path | None,
        typer.Option(help="file to write (default: docs/catalogue.md in the working folder)", show_default=False),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="exit 1 if the file differs from the generated catalogue")
    ] = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="build the scratch warehouse afresh instead of reusing its cached column types, lineage and data "
            "tests (the cache is keyed by the dbt project, the package and library versions; the text is the same)",
        ),
    ] = False,
) -> int:
    from mafiabench.transform.build import catalogue

    text = catalogue.generate(cache=not no_cache)
    return write_generated(output or catalogue.DEFAULT_PATH, text, check=check, command="mafiabench catalogue")
