"""The run's progress bar (rich), on stderr: games done of games to play, failures, tokens and dollars so far.

`enabled=None` shows it only on a terminal; `True` forces it (a non-terminal gets the final state once, at close).
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


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
        self._progress.start()

    def advance(self, *, failed: int, tokens: int, usd: float) -> None:
        self._progress.update(self._task, advance=1, status=f"failed={failed} tok={tokens:,} usd={usd:.4f}")

    def set_total(self, total: int) -> None:
        """A study played in waves learns its total as waves are added."""
        self._progress.update(self._task, total=total)

    def close(self) -> None:
        self._progress.stop()
