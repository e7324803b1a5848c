"""The `mafiabench` command's entry (the installed script, and `python -m mafiabench`): a Ctrl-C while the command
still imports and assembles itself (about a second: typer, every command's module) ends it quietly, with exit 130,
since nothing has started; `cli.main` hands Ctrl-C back to Python (KeyboardInterrupt, which each command handles)
before the command runs. Before, such a Ctrl-C printed the traceback of whichever import it interrupted. Python
itself turns a Ctrl-C into a traceback from its own start until these lines run (site's imports, about 60 ms here):
that gap no Python code can close."""

from __future__ import annotations

import os
import signal
from typing import NoReturn

NOTHING_STARTED = "\ninterrupted before the command started\n"


def _nothing_started(signum: int, frame: object) -> None:
    os.write(2, NOTHING_STARTED.encode())
    os._exit(130)


def run() -> NoReturn:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where Ctrl-C is ignored (a background job)
        signal.signal(signal.SIGINT, _nothing_started)
    from mafiabench import cli

    cli.run()


if __name__ == "__main__":
    run()
