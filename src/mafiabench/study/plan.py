"""Planning pieces of a run: shards (the unit of orchestration), interleaving, which faults a shard retries."""

from __future__ import annotations

from collections.abc import Iterable

from mafiabench.errors import UserError
from mafiabench.record import GameRecord
from mafiabench.study.design import PlannedGame


class Shard:
    """A batch of games: the unit of orchestration (one Prefect task run), never of concurrency.

    Deliberately not a dataclass (nor is `ShardResult`): Prefect walks dataclass task arguments and results
    recursively, which for a shard of game records costs more CPU than playing the games."""

    __slots__ = ("games", "index")

    def __init__(self, index: int, games: list[PlannedGame]) -> None:
        self.index = index
        self.games = games

    def __len__(self) -> int:
        return len(self.games)

    def __repr__(self) -> str:
        return f"Shard({self.index}, {len(self.games)} games)"


class ShardResult:
    """The records a shard produced, and what it did not play."""

    __slots__ = ("index", "landed", "not_started", "records", "reused", "wall_s")

    def __init__(self, index: int) -> None:
        self.index = index
        self.records: list[GameRecord] = []  # emptied once landed (`landed` keeps the count)
        self.landed = 0
        self.not_started = 0  # skipped by the budget guard
        self.reused = 0  # found already written by an earlier attempt of this shard
        self.wall_s = 0.0

    def __repr__(self) -> str:
        return f"ShardResult({self.index}, {len(self.records)} records, {self.not_started} not started)"


def is_infrastructure_fault(exc: BaseException) -> bool:
    """Worth retrying a whole shard: I/O and connection trouble, not bugs, user errors or model failures (those
    are recorded in the game records)."""
    if isinstance(exc, UserError):
        return False
    return isinstance(exc, (OSError, ConnectionError, TimeoutError, MemoryError))


def shard_games(games: list[PlannedGame], size: int) -> list[Shard]:
    return [Shard(i, games[k : k + size]) for i, k in enumerate(range(0, len(games), size))]


def interleave(games: Iterable[PlannedGame]) -> list[PlannedGame]:
    """Game index first, then cell: a run stopped early (budget, kill) leaves every cell about equally advanced."""
    return sorted(games, key=lambda g: g.index)  # stable: cells keep their file order within an index
