"""The `mafiabench` command (typer, plain help text). Subcommands live one per module in `mafiabench.commands` and are
discovered, so a feature adds its command without touching this file.

May import: `mafiabench.commands` (discovered), `mafiabench.errors`. Commands signal their exit code with
`typer.Exit`; a `UserError` anywhere becomes one clear line on stderr and exit code 2, as do usage errors.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import signal
import sys
from collections.abc import Sequence
from typing import Annotated, NoReturn

import typer

from mafiabench import __version__, commands
from mafiabench.errors import UserError

HELP = "Measure how language models deceive, detect deception and disclose, by playing Mafia."


def _version(value: bool) -> None:
    if value:
        print(f"mafiabench {__version__}")
        raise typer.Exit(0)


def build_app() -> typer.Typer:
    """The command tree: every module of `mafiabench.commands` registers its commands on it."""
    app = typer.Typer(
        name="mafiabench",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,  # plain help: brackets in help text ([detector], [[imports]]) shown as written
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback()
    def _root(
        version: Annotated[
            bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
        ] = False,
    ) -> None:
        """Measure how language models deceive, detect deception and disclose, by playing Mafia."""

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"mafiabench.commands.{info.name}")
        module.register(app)
    return app


def command_names() -> list[str]:
    """The subcommands, as `mafiabench --help` lists them (the README's command table is checked against this)."""
    group = typer.main.get_command(build_app())
    return sorted(group.commands)  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (0 ok, 1 a failed run, 2 bad input or usage)."""
    command = typer.main.get_command(build_app())
    _ctrl_c_to_python()
    try:
        command.main(args=None if argv is None else list(argv), prog_name="mafiabench", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `mafiabench play | head`: the reader left; not an error
        sys.stderr.close()
        return 0
    return 0


def _ctrl_c_to_python() -> None:
    """From here a Ctrl-C is Python's KeyboardInterrupt again, which each command handles (`mafiabench.__main__`
    ends the command quietly while it imports)."""
    if getattr(signal.getsignal(signal.SIGINT), "__name__", "") == "_nothing_started":
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run() -> NoReturn:
    """The installed command: `main`, then exit without the interpreter's last garbage collection, which would walk
    every object a build leaves (dbt's parsed project among them) only to free memory the exit frees anyway: 0.6 s of
    a million-game build's exit (BENCHMARKS.md). `atexit` handlers still run; only objects in reference cycles are
    left unfinalized (none holds unwritten data: files and the warehouse are closed explicitly)."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
