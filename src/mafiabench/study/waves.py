"""Adaptive waves and the fan-out: how a study's shards are handed to `play` and then `land` a bounded number at a
time, and, with `[stopping]`, wave after wave until each cell's interval is narrow enough (`study/stopping.py` holds
the rule).

`WaveScheduler` is given what it calls (`play` a shard, `land` its result, `tally` a cell's games at a look) and
never reaches the executor or the warehouse otherwise; `Backlog` is which planned games are still to play.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from mafiabench.study.design import Cell, PlannedGame, cell_prefix, iter_interleaved, planned_game
from mafiabench.study.plan import Shard, ShardResult, chunk_shards, is_infrastructure_fault
from mafiabench.study.spec import Experiment
from mafiabench.study.stopping import CellLook, Rule, evaluate
from mafiabench.study.summary import RunSummary
from mafiabench.warehouse import landing

PlayFn = Callable[[Shard], Awaitable[ShardResult]]
LandFn = Callable[[ShardResult], Awaitable[Any]]
TallyFn = Callable[[list[tuple[str, int]]], list[tuple[int, int]]]


class Backlog:
    """One byte per planned game says whether it is still to play (a million-game plan costs a megabyte here, and
    its games are made only as their shards are handed out)."""

    def __init__(self, experiment: Experiment, cells: list[Cell]) -> None:
        self.exp = experiment
        self.cells = cells
        self.todo: list[bytearray] = [bytearray(b"\x01") * cell.games for cell in cells]

    def mark_finished(self, con: Any) -> int:
        """Mark the games already finished in the warehouse done; returns how many are."""
        finished = 0
        for cell, todo in zip(self.cells, self.todo, strict=True):
            for i in landing.finished_indices(con, cell_prefix(self.exp, cell)):
                if i < cell.games and todo[i]:
                    todo[i] = 0
                    finished += 1
        return finished

    def shards(self) -> Iterator[Shard]:
        """The games still to play, interleaved across cells, as shards (made lazily, as they are handed out)."""
        todo = self.todo
        games = iter_interleaved(self.exp, self.cells, lambda k, i: bool(todo[k][i]))
        return chunk_shards(games, self.exp.shard_size)


class WaveScheduler:
    """Fans shards out to `play` and `land`; with a `[stopping]` rule, in waves decided by looks at each cell. Its
    own state is the waves' (each open cell's next look, the looks so far); the run's counts go to `summary`."""

    def __init__(
        self,
        experiment: Experiment,
        backlog: Backlog,
        summary: RunSummary,
        *,
        rule: Rule | None,
        tally: TallyFn,
        limit: int,
        bar: Any = None,
    ) -> None:
        self.exp = experiment
        self.backlog = backlog
        self.summary = summary
        self.rule = rule
        self.tally = tally
        self.limit = limit  # shards in flight at most
        self.bar = bar
        self.looks: dict[str, CellLook] = {}  # with [stopping]: each cell at its last look
        # with [stopping]: open cell → the game count of its next look
        self._targets: dict[int, int] = {k: rule.min_games for k in range(len(backlog.cells))} if rule else {}
        self._next_shard = 0

    async def waves(self, play: PlayFn, land: LandFn, stopped: Callable[[], bool]) -> list[ShardResult]:
        """Wave after wave until every cell has stopped, or a shard failed for good, or `stopped()` (the budget)."""
        results: list[ShardResult] = []
        while (wave := self._next_wave()) is not None:
            results += await self.fan(wave, play, land)
            if self.summary.shard_errors or stopped():
                break
        return results

    async def fan(self, shards: Iterable[Shard], play: PlayFn, land: LandFn) -> list[ShardResult]:
        """Play every shard and land each as it finishes, at most `limit` at a time: shards are taken only as slots
        free up, so a run's memory does not grow with its size. A shard that fails for good is reported in the
        summary; the others go on."""
        limit = self.limit

        async def one(shard: Shard) -> ShardResult:
            result = await play(shard)
            await land(result)
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
                todo = self.backlog.todo[k]
                for i in range(target):
                    if todo[i]:
                        todo[i] = 0
                        wave.append(planned_game(self.exp, self.backlog.cells[k], i))
        s.stopping = {
            "rule": rule.to_dict(),
            "description": rule.describe(),
            "cells": {name: look.to_dict() for name, look in self.looks.items()},
        }
        if not wave:
            return None
        wave.sort(key=lambda g: g.index)  # interleaved: index first, cells in file order (the sort is stable)
        s.games_to_play += len(wave)
        if self.bar is not None:
            self.bar.set_total(s.games_to_play)
        shards = list(chunk_shards(wave, self.exp.shard_size, start=self._next_shard))
        self._next_shard += len(shards)
        return shards

    def _look(self, rule: Rule) -> None:
        """Each open cell whose games up to its look are all played: stopped, or moved to its next look."""
        cells = self.backlog.cells
        ready = [k for k, target in self._targets.items() if not any(self.backlog.todo[k][:target])]
        tallies = self.tally([(cell_prefix(self.exp, cells[k]), self._targets[k]) for k in ready])
        for k, (n, wins) in zip(ready, tallies, strict=True):
            target = self._targets[k]
            look = evaluate(rule, cells[k].name, target, n, wins)
            self.looks[cells[k].name] = look
            if look.state == "continue":
                self._targets[k] = rule.next_look(target + 1)
            else:
                del self._targets[k]


def with_local_retries(play: PlayFn, retries: int, delays: tuple[float, ...]) -> PlayFn:
    """`play` retried as the flow's shard task is, without Prefect: infrastructure faults only, `retries` times,
    after `delays` (the last one repeated)."""

    async def retrying(shard: Shard) -> ShardResult:
        attempt = 0
        while True:
            try:
                return await play(shard)
            except Exception as exc:
                if attempt >= retries or not is_infrastructure_fault(exc):
                    raise
                pause = delays or (0.0,)
                await asyncio.sleep(pause[min(attempt, len(pause) - 1)])
                attempt += 1

    return retrying
