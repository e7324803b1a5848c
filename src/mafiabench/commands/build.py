"""`mafiabench build`: rebuild the marts of a warehouse and run the quality gate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mafiabench.commands import command
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE


def register(app: typer.Typer) -> None:
    command(
        app,
        "build",
        short_help="build staging views and marts, then run the quality gate",
        help="Rebuild every model in sql/ (and the Python marts) from the raw tables, validate raw tables "
        "and marts, store the results in validation_results, and publish the build only if every expectation "
        "passed. Exits 2 with the failing expectations and sample rows when the gate fails.",
    )(run)


def run(
    warehouse: Annotated[Path, typer.Option(help="DuckDB file")] = DEFAULT_WAREHOUSE,
    no_validate: Annotated[
        bool, typer.Option("--no-validate", help="build without the gate (the build is not published)")
    ] = False,
    upset_threshold: Annotated[
        float, typer.Option(help="probability at or under which a game counts as an upset")
    ] = 0.05,
    max_unusable: Annotated[
        float | None,
        typer.Option(help="largest share of games that may be invalid or unscored before the gate refuses the build "
                     "(default: 0.5)", show_default=False),
    ] = None,
    sql_dir: Annotated[
        Path | None, typer.Option(help="folder of SQL models (default: the checkout's sql/)", show_default=False)
    ] = None,
) -> int:
    from mafiabench.publish import build

    result = build(warehouse, sql_dir=sql_dir, validate=not no_validate, upset_threshold=upset_threshold,
                   max_unusable=max_unusable)
    for m in result.models:
        rows = "" if m.rows is None else f"{m.rows:>10} rows"
        print(f"  {m.layer:<12} {m.name:<32} {m.materialized:<5} {rows} {m.seconds:7.3f}s", file=sys.stderr)
    print(result.summary())
    return 0
