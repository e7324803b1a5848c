"""The run's progress bar (rich), on stderr: games done of games to play, failures, tokens and dollars so far.

`enabled=None` shows it only on a terminal; `True` forces it (a non-terminal gets the final state once, at close).
While the bar is live, log handlers that write to the terminal's stderr (Prefect's console handler included) write
through the bar's console, so a log line is printed whole above the bar instead of being cut into it.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text


class GameProgress:
    """A bar over games; `advance` after each landed game, `close` once."""

    def __init__(self, total: int, label: str, *, enabled: bool | None) -> None:
        console = Console(file=sys.stderr)
        self.active = console.is_terminal if enabled is None else enabled
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("games"),
            TimeElapsedColumn(),
            TextColumn("<"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            disable=not self.active,
            transient=False,
        )
        self._task = self._progress.add_task(label, total=total, status="")
        stderr = sys.stderr
        self._progress.start()
        live = sys.stderr is not stderr  # rich redirects stderr while the bar is live (on a terminal only)
        self._rerouted = _reroute_handlers(stderr, sys.stderr, console) if live else []

    def advance(self, games: int = 1, *, failed: int, tokens: int, usd: float) -> None:
        self._progress.update(self._task, advance=games, status=status(failed, tokens, usd))

    def show(self, *, failed: int, tokens: int, usd: float) -> None:
        """Set the totals shown (the run's own, at the end) without advancing."""
        self._progress.update(self._task, status=status(failed, tokens, usd))

    def set_total(self, total: int) -> None:
        """A study played in waves learns its total as waves are added."""
        self._progress.update(self._task, total=total)

    def close(self) -> None:
        for handler, stream, own in self._rerouted:
            handler.setStream(stream)
            if own is not None:
                handler.console = own  # type: ignore[attr-defined]
        self._rerouted = []
        self._progress.stop()


def status(failed: int, tokens: int, usd: float) -> str:
    """The bar's counts, in the run summary's words."""
    return f"{failed:,} failed, {tokens:,} tokens, ${usd:,.4f}"


class _ThroughBar:
    """Stands in for a log handler's own rich Console (Prefect's console handler prints through one): renders as
    that console would (its colours), then prints the result through the bar's console, above the live bar. (A
    Console given rich's stderr proxy as its file would unwrap it and write straight to the terminal.)"""

    def __init__(self, own: Console, bar: Console) -> None:
        self._own, self._bar = own, bar

    def print(self, *objects: Any, **kwargs: Any) -> None:
        with self._own.capture() as captured:
            self._own.print(*objects, **kwargs)
        self._bar.print(Text.from_ansi(captured.get().rstrip("\n")), soft_wrap=True)


def _handlers() -> list[logging.Handler]:
    loggers: list[Any] = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return list({id(h): h for lg in loggers for h in getattr(lg, "handlers", [])}.values())


Rerouted = tuple[logging.StreamHandler[Any], TextIO, Console | None]


def _reroute_handlers(old: TextIO, proxy: TextIO, bar: Console) -> list[Rerouted]:
    """Point every stream handler that writes to `old` (the terminal's stderr) at the live bar: plain handlers at
    rich's stderr proxy, a handler printing through its own rich Console at the bar's console."""
    moved: list[Rerouted] = []
    for h in _handlers():
        if isinstance(h, logging.StreamHandler) and h.stream is old:
            own = getattr(h, "console", None)
            moved.append((h, old, own if isinstance(own, Console) else None))
            h.setStream(proxy)
            if isinstance(own, Console):
                h.console = _ThroughBar(own, bar)  # type: ignore[attr-defined]
    return moved


class CountProgress:
    """A bar over things a command counts as it works (models built, games read, detections answered), for the
    commands other than `run`: on a terminal only (a pipe or a log gets no redraws, just the command's own lines),
    transient (the command's summary follows it), naming the latest thing done as plain text (a game id is data).

        with CountProgress("build", "models") as bar:
            bar.expect("sql", 57)        # a part's count, said again alike (parts add up to the total)
            bar.done("mart_win_rates")
    """

    def __init__(self, label: str, unit: str, *, enabled: bool | None = None, then: str = "") -> None:
        """`then`: what the command does once every counted thing is done (shown in place of the last name)."""
        console = Console(file=sys.stderr)
        self._then = then
        self.active = console.is_terminal if enabled is None else enabled
        self._parts: dict[str, int] = {}
        self._done = 0
        self._lock = threading.Lock()  # dbt reports its models from its worker threads
        self._progress = Progress(
            TextColumn(label),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(unit),
            TimeElapsedColumn(),
            TextColumn("{task.fields[latest]}", markup=False),
            console=console,
            disable=not self.active,
            transient=True,
        )
        self._task = self._progress.add_task(label, total=None, latest="")

    def __enter__(self) -> CountProgress:
        self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._progress.stop()

    def expect(self, part: str, count: int) -> None:
        with self._lock:
            if self._parts.get(part) != count:
                self._parts[part] = count
                self._progress.update(self._task, total=max(sum(self._parts.values()), self._done))

    def done(self, name: str = "") -> None:
        with self._lock:
            self._done += 1
            total = self._progress.tasks[0].total
            last = total is not None and self._done >= total and bool(self._then)
            self._progress.update(self._task, advance=1, latest=self._then if last else name,
                                  total=None if total is None else max(total, self._done))
