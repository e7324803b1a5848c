"""`mafiabench schema`: write docs/experiment.md, every section and key of an experiment file, from the schema."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mafiabench.commands import command, write_generated


def register(app: typer.Typer) -> None:
    command(
        app,
        "schema",
        short_help="write docs/experiment.md: every section and key of an experiment file",
        help="Generate docs/experiment.md (in the working folder) from the experiment schema: every section and "
        "key with its type, default, description and an example from experiments/*.toml.",
    )(run_schema)


def run_schema(
    output: Annotated[
        Path | None,
        typer.Option(help="file to write (default: docs/experiment.md in the working folder)", show_default=False),
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="exit 1 if the file differs from the generated one")] = False,
) -> int:
    from mafiabench.study import keys_doc

    return write_generated(output or keys_doc.DEFAULT_PATH, keys_doc.generate(), check=check,
                           command="mafiabench schema")
