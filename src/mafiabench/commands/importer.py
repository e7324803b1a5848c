"""`mafiabench import FORMAT PATH`: land another tool's games in the warehouse and print what happened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mafiabench.commands import command
from mafiabench.errors import UserError
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE


def _formats() -> dict[str, tuple[str, str, str]]:
    from mafiabench.importers.common import FORMATS

    return FORMATS


def register(app: typer.Typer) -> None:
    command(
        app,
        "import",
        short_help="import an external game dataset into the warehouse",
        help="Read a dataset in another tool's format, turn every game into a canonical game record and "
        "land it in the warehouse. Importing the same data twice changes nothing; invalid games are landed with "
        "their validity flag; games that cannot be read are listed with the reason. Formats: "
        + ", ".join(f"{name} ({source})" for name, (_, _, source) in _formats().items())
        + ".",
    )(run)


def _check_format(value: str) -> str:
    if value not in _formats():
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, _formats()))}")
    return value


def run(
    format: Annotated[
        str,
        typer.Argument(help="the dataset's format: mini-mafia, mini-mafia-sqlite, mini-mafia-web, dallinger or llmafia",
                       callback=_check_format),
    ],
    path: Annotated[
        Path,
        typer.Argument(help="the dataset: a root folder, one batch/game folder, one game file, or one SQLite database"),
    ],
    warehouse: Annotated[Path, typer.Option(help="DuckDB warehouse file")] = DEFAULT_WAREHOUSE,
    records: Annotated[
        Path | None, typer.Option(help="also write each record as JSON into this folder", show_default=False)
    ] = None,
    study: Annotated[
        str | None,
        typer.Option(
            help="the study these games are (default: mini-mafia: the folder imported; mini-mafia-sqlite and "
            "mini-mafia-web: the database's file name; others: the source)",
            show_default=False,
        ),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="exit with status 1 when any game was unreadable")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="the whole report: invalid games by reason, flagged events, notes")
    ] = False,
) -> int:
    from mafiabench.importers.common import run_import
    from mafiabench.study.progress import CountProgress
    from mafiabench.warehouse.landing import warehouse_lock
    from mafiabench.warehouse.raw import connect

    if not path.exists():
        raise UserError(f"{path}: no such file or directory (the {format} dataset to import)")
    with warehouse_lock(warehouse, what=f"import {format}"):
        con = connect(warehouse)
        try:
            with CountProgress("import", "games") as bar:
                report = run_import(format, path, con, records_dir=records, study=study, progress=bar)
        finally:
            con.close()
    print(json.dumps(report.to_dict(), indent=1) if json_ else report.to_text() if verbose else report.brief())
    return 1 if strict and report.unreadable else 0
