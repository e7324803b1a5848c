"""`mafiabench dashboards`: render the static dashboards from a built warehouse (refused if its quality gate failed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mafiabench.commands import command
from mafiabench.errors import UserError
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE


def register(app: typer.Typer) -> None:
    command(
        app,
        "dashboards",
        short_help="render the static dashboards from the warehouse",
        help="Render static HTML dashboards (capabilities, exceptional games, transcripts, failures, biases, "
        "cost, data quality) from the marts of a built warehouse. They work offline from file://. Publishing is "
        "refused, and the previous dashboards left untouched, when the latest build failed its quality gate.",
    )(run)


def run(
    warehouse: Annotated[Path, typer.Option(help="DuckDB file")] = DEFAULT_WAREHOUSE,
    out: Annotated[
        Path | None,
        typer.Option(help="output folder (default: the warehouse's own: dashboards/ for mafiabench.duckdb, else "
                     "dashboards-<name>/)", show_default=False),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="replace a folder that shows another warehouse's pages")
    ] = False,
    export_images: Annotated[
        bool, typer.Option("--export-images", help="also write each chart as PNG and SVG beside its page")
    ] = False,
    figures: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="also copy each chart's PNG and SVG into DIR, a folder of yours that the next "
                     "render leaves alone (implies --export-images)", show_default=False),
    ] = None,
    max_transcripts: Annotated[
        int,
        typer.Option(
            help="render every game's transcript up to this many games; above it, linked games plus a sample"
        ),
    ] = 2000,
    transcript_sample: Annotated[int, typer.Option(help="sample size above --max-transcripts")] = 200,
) -> int:
    from mafiabench.publish import render

    if max_transcripts < 0 or transcript_sample < 0:
        raise UserError("--max-transcripts and --transcript-sample must be >= 0")
    result = render(
        warehouse,
        out,
        export_images=export_images,
        figures=figures,
        max_transcripts=max_transcripts,
        transcript_sample=transcript_sample,
        force=force,
    )
    print(result.summary())
    return 0
