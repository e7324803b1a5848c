"""Adaptive waves and the fan-out: how a study's shards are handed to the executors a bounded number at a time, and,
with `[stopping]`, wave after wave until each cell's interval is narrow enough (`study/stopping.py` holds the rule).

`WaveScheduler` is the part of `Study` (`study/run.py`) that schedules; it plays through `ShardPlayer`
(`study/executors.py`) and lands and reads the warehouse through the lifecycle's methods, declared abstract here.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from mafiabench.backends.endpoints import aclose_clients
from mafiabench.study.design import Cell, PlannedGame, cell_prefix, iter_interleaved, planned_game
from mafiabench.study.executors import ShardPlayer
from mafiabench.study.plan import Shard, ShardPlan, ShardResult, chunk_shards, is_infrastructure_fault
from mafiabench.study.shard_workers import QUEUE_PER_WORKER
from mafiabench.study.stopping import CellLook, Rule, evaluate
from mafiabench.study.workers import lean_gc
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import LoadResult

S = TypeVar("S", bound="WaveScheduler")
PlayFn = Callable[[S, Shard], Awaitable[ShardResult]]
LandFn = Callable[[S, ShardResult], Awaitable[Any]]


class WaveScheduler(ShardPlayer, abc.ABC):
    """Fans shards out to the executors; with `[stopping]`, in waves decided by looks at each cell."""

    cells: list[Cell]
    shards: ShardPlan
    _todo: list[bytearray]  # per cell, one byte per planned game: 1 while it is still to play
    shard_retries: int
    shard_retry_delays: tuple[float, ...]

    def _init_waves(self, rule: Rule | None) -> None:
        self.rule = rule
        self.looks: dict[str, CellLook] = {}  # with [stopping]: each cell at its last look
        self._targets: dict[int, int] = {}  # with [stopping]: open cell → the game count of its next look
        self._next_shard = 0

    def _mark_still_to_play(self, con: Any) -> int:
        """One byte per planned game says whether it is still to play (a million-game plan costs a megabyte here,
        and its games are made only as their shards are handed out); the games already finished are marked done.
        Returns how many are."""
        self._todo = []
        finished = 0
        for cell in self.cells:
            todo = bytearray(b"\x01") * cell.games
            for i in landing.finished_indices(con, cell_prefix(self.exp, cell)):
                if i < cell.games and todo[i]:
                    todo[i] = 0
                    finished += 1
            self._todo.append(todo)
        return finished

    def _iter_shards(self) -> Iterator[Shard]:
        """The games still to play, interleaved across cells, as shards (made lazily, as they are handed out)."""
        todo = self._todo
        games = iter_interleaved(self.exp, self.cells, lambda k, i: bool(todo[k][i]))
        return chunk_shards(games, self.exp.shard_size)

    # The lifecycle's (`Study`): the warehouse connection, and landing a shard.
    @abc.abstractmethod
    def connection(self, *, hold: bool = False) -> AbstractContextManager[Any]: ...

    @abc.abstractmethod
    def release(self) -> None: ...

    @abc.abstractmethod
    async def land_shard(self, result: ShardResult) -> LoadResult: ...

    def shards_in_flight(self) -> int:
        """Enough shards to keep every game slot busy, plus slack for shards finishing their tail or landing."""
        if self.shard_processes > 1:  # shards queued to each worker, and one more each landing
            return (QUEUE_PER_WORKER + 1) * self.shard_processes
        known = self.exp.shard_size if self.rule is not None else self.shards.games  # waves: sized as they come
        per = max(1, min(self.exp.shard_size, known or 1))
        return max(2, 2 * math.ceil(self.exp.concurrency.games / per))

    async def fan_out(
        self: S, play: PlayFn[S] | None = None, land: LandFn[S] | None = None, shards: Iterable[Shard] | None = None
    ) -> list[ShardResult]:
        """Play every shard (default: the plan's; with [stopping], wave after wave until each cell's interval is
        narrow enough) and land each as it finishes, a bounded number at a time: shards are taken from the plan only
        as slots free up, so a run's memory does not grow with its size. A shard that fails for good is reported in
        the summary; the others go on."""
        play_fn: PlayFn[S] = play or _play_with_local_retries
        land_fn: LandFn[S] = land or _land_direct
        if self.shards.count or self.rule is not None or shards is not None:  # none for a plan with nothing to play
            await self._start_game_workers()
        t0 = time.perf_counter()
        results: list[ShardResult] = []
        # calls over HTTP allocate much and briefly: a lean collector while they run (workers.lean_gc)
        with lean_gc() if self.uses_http else contextlib.nullcontext():
            try:
                if self.rule is None or shards is not None:
                    results = await self._fan(self.shards if shards is None else shards, play_fn, land_fn)
                else:
                    while (wave := self._next_wave()) is not None:
                        results += await self._fan(wave, play_fn, land_fn)
                        if self.summary.shard_errors or (self.guard is not None and self.guard.stopped):
                            break
            finally:
                self.summary.play_wall_s = time.perf_counter() - t0
                if self.shards.count or self.rule is not None or shards is not None:  # landed something: let go
                    await asyncio.to_thread(self.release)
                await aclose_clients()
                await self._stop_executors()
        if self.guard is not None and self.guard.stopped:
            self.summary.budget_stopped = True
        results.sort(key=lambda r: r.index)
        return results

    async def _fan(self: S, shards: Iterable[Shard], play: PlayFn[S], land: LandFn[S]) -> list[ShardResult]:
        limit = self.shards_in_flight()

        async def one(shard: Shard) -> ShardResult:
            result = await play(self, shard)
            await land(self, result)
            # Landed: its records are in the raw folder and DuckDB; drop them (Prefect's task result is this object).
            result.landed = len(result.batch) if result.batch is not None else 0
            result.batch = None
            return result

        running: dict[asyncio.Future[ShardResult], Shard] = {}
        results: list[ShardResult] = []
        interrupted: BaseException | None = None

        def collect(done: Iterable[asyncio.Future[ShardResult]]) -> None:
            nonlocal interrupted
            for t in done:
                shard = running.pop(t)
                if t.cancelled():
                    interrupted = interrupted or asyncio.CancelledError()
                    continue
                o = t.exception()
                if o is None:
                    r = t.result()
                    results.append(r)
                    self.summary.games_not_started += r.not_started
                elif isinstance(o, (KeyboardInterrupt, asyncio.CancelledError)):
                    interrupted = interrupted or o
                else:
                    self.summary.shard_errors.append(
                        f"shard {shard.index} ({len(shard)} games): {type(o).__name__}: {o}"
                    )

        try:
            for shard in shards:
                while len(running) >= limit:
                    done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    collect(done)
                running[asyncio.ensure_future(one(shard))] = shard
            while running:
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                collect(done)
        except BaseException:
            for t in running:
                t.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        if interrupted is not None:
            raise interrupted
        return results

    def _next_wave(self) -> list[Shard] | None:
        """Look at every open cell whose games up to its current look are all played: stop it (narrow enough, or
        max_games) or move it to its next look. Then the games of the open cells up to their looks, as shards; None
        when every cell has stopped. Only the cells' first `look` games count at a look (ids are deterministic), so
        a resumed run looks at the same games again and never adds a look."""
        rule = self.rule
        assert rule is not None
        s = self.summary
        wave: list[PlannedGame] = []
        while self._targets and not wave:  # a resumed study may pass several looks whose games are all landed
            self._look(rule)
            for k, target in self._targets.items():
                todo = self._todo[k]
                for i in range(target):
                    if todo[i]:
                        todo[i] = 0
                        wave.append(planned_game(self.exp, self.cells[k], i))
        s.stopping = {
            "rule": rule.to_dict(),
            "description": rule.describe(),
            "cells": {name: look.to_dict() for name, look in self.looks.items()},
        }
        if not wave:
            return None
        wave.sort(key=lambda g: g.index)  # interleaved: index first, cells in file order (the sort is stable)
        s.games_to_play += len(wave)
        if self._bar is not None:
            self._bar.set_total(s.games_to_play)
        shards = list(chunk_shards(wave, self.exp.shard_size, start=self._next_shard))
        self._next_shard += len(shards)
        return shards

    def _look(self, rule: Rule) -> None:
        """Each open cell whose games up to its look are all played: stopped, or moved to its next look."""
        with self.connection() as con:
            for k, cell in enumerate(self.cells):
                if k not in self._targets:
                    continue
                target = self._targets[k]
                if any(self._todo[k][:target]):
                    continue  # this look's games are not all played yet
                row = con.execute(
                    """select count(*) filter (where status = 'finished' and valid and winner is not null),
                              count(*) filter (where status = 'finished' and valid and winner = 'mafia')
                       from raw_games where starts_with(game_id, $p) and game_index < $n""",
                    {"p": cell_prefix(self.exp, cell), "n": target},
                ).fetchone()
                n, wins = (int(row[0]), int(row[1])) if row else (0, 0)
                look = evaluate(rule, cell.name, target, n, wins)
                self.looks[cell.name] = look
                if look.state == "continue":
                    self._targets[k] = rule.next_look(target + 1)
                else:
                    del self._targets[k]


async def _play_with_local_retries(study: WaveScheduler, shard: Shard) -> ShardResult:
    """Without Prefect: the same retry rule as the flow's shard task (infrastructure faults only)."""
    attempt = 0
    while True:
        try:
            return await study.play_shard(shard)
        except Exception as exc:
            if attempt >= study.shard_retries or not is_infrastructure_fault(exc):
                raise
            delays = study.shard_retry_delays or (0.0,)
            await asyncio.sleep(delays[min(attempt, len(delays) - 1)])
            attempt += 1


async def _land_direct(study: WaveScheduler, result: ShardResult) -> LoadResult:
    return await study.land_shard(result)
