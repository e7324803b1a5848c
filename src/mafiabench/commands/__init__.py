"""CLI subcommands, one module per command: each defines `register(app)` and `mafiabench.cli` discovers them all.

A command is a plain function with typed parameters (typer builds the options from them) returning its exit code;
`command()` registers it. Commands may import any stage of the pipeline, lazily inside the function where the
import is slow; nothing imports `commands`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from pathlib import Path
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


def process_started() -> float:
    """When this process started (epoch seconds, to 10 ms; Linux's /proc), so a summary's wall time can be the whole
    command's: interpreter start-up and imports included."""
    import os
    import time
    from pathlib import Path

    try:
        ticks = int(Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return time.time()
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def write_generated(path: Path, text: str, *, check: bool, command: str) -> int:
    """Write a generated document to `path`, or with `check` only compare: exit code 1 and a line naming
    the command that regenerates it when the file differs, 0 when it is up to date (CI runs the checks)."""
    import sys

    if check:
        if (path.read_text() if path.exists() else "") != text:
            print(f"{path} is out of date: run `{command}`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return 0


RESUME_HINT = "interrupted: finished games are in the raw folder; run the same command again to resume"
# How long a first Ctrl-C waits for the run to wind down (cancel its games, tell Prefect, close its workers) before
# it is ended at once; a second Ctrl-C does not wait. The promise is 3 s from the first Ctrl-C to the prompt.
INTERRUPT_GRACE_S = 2.0


class Interrupt:
    """One Ctrl-C stops a command within seconds and says how to resume; a second stops it at once.

        with Interrupt(hint) as interrupt:       # installs the SIGINT handler
            result = interrupt.run(coro)         # asyncio.run, cancelled by Ctrl-C
        # interrupted: KeyboardInterrupt out of the block (the hint is printed once, exit code 130 is the caller's)

    On the first SIGINT the running coroutine is cancelled, as `asyncio.run` does (games in flight are abandoned,
    what is landed stays; outside a coroutine, KeyboardInterrupt is raised), the terminal's log handlers are silenced
    (no crash report, no traceback; Prefect's API still gets its records) and a timer ends the process
    `INTERRUPT_GRACE_S` later if winding down (cancelling, closing workers, the interpreter's exit) takes longer.
    Ending the process kills and reaps its child processes (game workers), removes its temporary folders, prints the
    hint and exits 130 without the interpreter's shutdown."""

    def __init__(self, hint: str | Callable[[], str] = RESUME_HINT, grace_s: float = INTERRUPT_GRACE_S) -> None:
        self.hint = hint
        self.grace_s = grace_s
        self.count = 0
        self._task: Any = None
        self._loop: Any = None
        self._previous: Any = None
        self._hinted = False

    @property
    def interrupted(self) -> bool:
        return self.count > 0

    def __enter__(self) -> Interrupt:
        import signal

        self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        import signal

        signal.signal(signal.SIGINT, self._previous)
        if self.interrupted or kind is KeyboardInterrupt:
            reap_children()  # what winding down left (multiprocessing's resource tracker): no orphan outlives us
            self.say_hint()  # the timer stays armed: the interpreter's own exit is bounded too

    def _on_sigint(self, *_: object) -> None:
        self.count += 1
        if self.count > 1:
            self.exit_now()
        self.silence()
        import threading

        timer = threading.Timer(self.grace_s, self.exit_now)
        timer.daemon = True
        timer.start()
        if self._task is None:
            raise KeyboardInterrupt
        self._loop.call_soon_threadsafe(self._task.cancel)

    def run(self, coro: Any) -> Any:
        """`asyncio.run(coro)`, cancelled by the first Ctrl-C; KeyboardInterrupt if interrupted."""
        import asyncio

        try:
            return asyncio.run(self._guarded(coro))
        except BaseException:
            if self.interrupted:
                raise KeyboardInterrupt from None  # whatever winding down raised (a crash report, a cancellation)
            raise
        finally:
            self._task = self._loop = None

    async def _guarded(self, coro: Any) -> Any:
        import asyncio

        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        if self.interrupted:
            coro.close()
            raise KeyboardInterrupt
        return await coro

    def say_hint(self) -> None:
        import sys

        if not self._hinted:
            self._hinted = True
            with contextlib.suppress(Exception):
                hint = self.hint
                if callable(hint):  # counted when it is said (how many games are kept, how many remain)
                    try:
                        hint = hint()
                    except Exception:
                        hint = RESUME_HINT
                sys.stderr.write(f"\n{hint}\n")
                sys.stderr.flush()

    @staticmethod
    def silence() -> None:
        """No more lines from loggers, dying threads or unraisable objects on the terminal."""
        import logging
        import sys
        import threading

        for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
            for handler in getattr(logger, "handlers", []):
                if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                    handler.setLevel(logging.CRITICAL + 1)
        logging.lastResort = logging.NullHandler()  # type: ignore[assignment]
        threading.excepthook = lambda _args: None
        sys.unraisablehook = lambda _args: None

    def exit_now(self) -> None:
        """Kill and reap our child processes, remove our temporary folders, print the hint, exit 130: now."""
        import os

        from mafiabench import scratch

        reap_children()
        scratch.remove_all()
        self.say_hint()
        os._exit(130)


def reap_children() -> None:
    """Stop every child process of this one and reap it: multiprocessing's resource tracker as it stops itself (its
    pipe closed), any other (game workers: what they finished is in shard files) by SIGKILL."""
    import os
    import signal
    import sys
    from pathlib import Path

    tracker = sys.modules.get("multiprocessing.resource_tracker")
    if tracker is not None and getattr(tracker._resource_tracker, "_pid", None) is not None:
        with contextlib.suppress(Exception):
            tracker._resource_tracker._stop()

    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            with contextlib.suppress(OSError):
                os.kill(int(kid), signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(int(kid), 0)
