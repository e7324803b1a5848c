"""`mafiabench import FORMAT PATH`: land another tool's games in the warehouse and print what happened."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mafiabench.errors import UserError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    from mafiabench.importers.common import FORMATS
    from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE

    p = sub.add_parser(
        "import",
        help="import an external game dataset into the warehouse",
        description="Read a dataset in another tool's format, turn every game into a canonical game record and "
        "land it in the warehouse. Importing the same data twice changes nothing; invalid games are landed with "
        "their validity flag; games that cannot be read are listed with the reason. Formats: "
        + ", ".join(f"{name} ({source})" for name, (_, _, source) in FORMATS.items()) + ".",
    )
    p.add_argument("format", choices=list(FORMATS), help="the dataset's format")
    p.add_argument("path", type=Path, help="the dataset: a root folder, one batch/game folder, or one game file")
    p.add_argument("--warehouse", type=Path, default=DEFAULT_WAREHOUSE,
                   help=f"DuckDB warehouse file (default: {DEFAULT_WAREHOUSE})")
    p.add_argument("--records", type=Path, default=None, help="also write each record as JSON into this folder")
    p.add_argument("--study", default=None,
                   help="the study these games are (default: mini-mafia: the folder imported; others: the source)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--strict", action="store_true", help="exit with status 1 when any game was unreadable")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mafiabench.importers.common import run_import
    from mafiabench.warehouse.landing import warehouse_lock
    from mafiabench.warehouse.raw import connect

    if not args.path.exists():
        raise UserError(f"{args.path}: no such file or directory (the {args.format} dataset to import)")
    with warehouse_lock(args.warehouse, what=f"import {args.format}"):
        con = connect(args.warehouse)
        try:
            report = run_import(args.format, args.path, con, records_dir=args.records, study=args.study)
        finally:
            con.close()
    print(json.dumps(report.to_dict(), indent=1) if args.json else report.to_text())
    return 1 if args.strict and report.unreadable else 0
