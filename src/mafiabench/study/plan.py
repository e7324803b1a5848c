"""Planning pieces of a run: shards (the unit of orchestration), interleaving, which faults a shard retries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from mafiabench.errors import UserError
from mafiabench.study.design import PlannedGame
from mafiabench.warehouse.raw import FlatBatch


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
    """What a shard produced: its records (flattened for landing, as written to its file), and what it did not
    play."""

    __slots__ = ("batch", "index", "landed", "not_started", "path", "played", "reused", "wall_s")

    def __init__(self, index: int) -> None:
        self.index = index
        self.batch: FlatBatch | None = None  # the records to land; dropped once landed (`landed` keeps the count)
        self.path: Path | None = None  # the shard file, once written
        self.landed = 0
        self.played = 0
        self.not_started = 0  # skipped by the budget guard
        self.reused = 0  # played by an earlier attempt of this shard
        self.wall_s = 0.0

    def __repr__(self) -> str:
        n = len(self.batch) if self.batch is not None else self.landed
        return f"ShardResult({self.index}, {n} records, {self.not_started} not started)"


class ShardPlan:
    """The shards still to play, produced lazily (`len` is known up front, the games are made when iterated)."""

    def __init__(self, count: int, games: int, make: Callable[[], Iterator[Shard]]) -> None:
        self.count = count
        self.games = games
        self._make = make

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Shard]:
        return self._make()


def chunk_shards(games: Iterable[PlannedGame], size: int, start: int = 0) -> Iterator[Shard]:
    """Consecutive shards of `size` games from a stream of games."""
    batch: list[PlannedGame] = []
    index = start
    for g in games:
        batch.append(g)
        if len(batch) >= size:
            yield Shard(index, batch)
            index += 1
            batch = []
    if batch:
        yield Shard(index, batch)


def is_infrastructure_fault(exc: BaseException) -> bool:
    """Worth retrying a whole shard: I/O and connection trouble, not bugs, user errors or model failures (those
    are recorded in the game records)."""
    if isinstance(exc, UserError):
        return False
    return isinstance(exc, (OSError, ConnectionError, TimeoutError, MemoryError))
