"""`mafiabench dashboards`: render the static dashboards from a built warehouse (refused if its quality gate failed)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mafiabench.errors import UserError
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "dashboards",
        help="render the static dashboards from the warehouse",
        description="Render static HTML dashboards (capabilities, exceptional games, transcripts, failures, biases, "
        "cost, data quality) from the marts of a built warehouse. They work offline from file://. Publishing is "
        "refused, and the previous dashboards left untouched, when the latest build failed its quality gate.",
    )
    p.add_argument(
        "--warehouse", type=Path, default=DEFAULT_WAREHOUSE, help=f"DuckDB file (default {DEFAULT_WAREHOUSE})"
    )
    p.add_argument("--out", type=Path, default=Path("dashboards"), help="output folder (default dashboards/)")
    p.add_argument("--export-images", action="store_true", help="also write each chart as PNG and SVG beside its page")
    p.add_argument(
        "--max-transcripts",
        type=int,
        default=2000,
        help="render every game's transcript up to this many games; above it, linked games plus a sample "
        "(default 2000)",
    )
    p.add_argument(
        "--transcript-sample", type=int, default=200, help="sample size above --max-transcripts (default 200)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mafiabench.publish import render

    if args.max_transcripts < 0 or args.transcript_sample < 0:
        raise UserError("--max-transcripts and --transcript-sample must be >= 0")
    result = render(
        args.warehouse,
        args.out,
        export_images=args.export_images,
        max_transcripts=args.max_transcripts,
        transcript_sample=args.transcript_sample,
    )
    print(result.summary())
    return 0
