"""CLI subcommands, one module per command: each defines `register(app)` and `mafiabench.cli` discovers them all.

A command is a plain function with typed parameters (typer builds the options from them) returning its exit code;
`command()` registers it. Commands may import any stage of the pipeline, lazily inside the function where the
import is slow; nothing imports `commands`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer


def command(app: typer.Typer, name: str, *, help: str, short_help: str) -> Callable[[Callable[..., Any]], Any]:
    """Register `func` as `mafiabench NAME`; its return value becomes the exit code (None or 0: success)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> None:
            code = func(*args, **kwargs)
            if code:
                raise typer.Exit(int(code))

        app.command(name, help=help, short_help=short_help)(run)
        return func

    return decorate
