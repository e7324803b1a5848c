"""`mafiabench build`: rebuild the marts of a warehouse and run the quality gate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "build",
        help="build staging views and marts, then run the quality gate",
        description="Rebuild every model in sql/ (and the Python marts) from the raw tables, validate raw tables "
        "and marts, store the results in validation_results, and publish the build only if every expectation "
        "passed. Exits 2 with the failing expectations and sample rows when the gate fails.",
    )
    p.add_argument("--warehouse", type=Path, default=DEFAULT_WAREHOUSE, help="DuckDB file (default: %(default)s)")
    p.add_argument("--no-validate", action="store_true", help="build without the gate (the build is not published)")
    p.add_argument(
        "--upset-threshold",
        type=float,
        default=0.05,
        help="probability at or under which a game counts as an upset (default: %(default)s)",
    )
    p.add_argument("--sql-dir", type=Path, default=None, help="folder of SQL models (default: the checkout's sql/)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mafiabench.publish import build

    result = build(
        args.warehouse, sql_dir=args.sql_dir, validate=not args.no_validate, upset_threshold=args.upset_threshold
    )
    for m in result.models:
        rows = "" if m.rows is None else f"{m.rows:>10} rows"
        print(f"  {m.layer:<12} {m.name:<32} {m.materialized:<5} {rows} {m.seconds:7.3f}s", file=sys.stderr)
    print(result.summary())
    return 0
