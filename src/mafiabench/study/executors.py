"""How a study's shards are played: on the running event loop, one game at a time in worker processes
(`concurrency.processes`), whole shards of policy games in shard workers, or on a Dask cluster (`[cluster]`).

`ShardExecutor` is what a planned `Study` (`study/run.py`) plays with: the per-loop backend pools and game slots, the
budget guard's say on each game, the shard file written atomically (a retried shard reuses the games its earlier
attempt finished), and the run's ledger, kept once a shard's file is written. It never touches DuckDB.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import time
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import Any

from mafiabench.agents.llm import ModelSettings
from mafiabench.backends.endpoints import BUILTIN_ENDPOINTS, EndpointConfig
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.prices import PriceTable, Usage, game_usage
from mafiabench.record import GameRecord, Provenance, encode_record, git_commit
from mafiabench.redact import known_secrets, secret_env_names
from mafiabench.study.budget import BudgetGuard
from mafiabench.study.design import PlannedGame
from mafiabench.study.plan import Shard, ShardResult
from mafiabench.study.shard_workers import (
    AUTO_SHARD_WORKERS_MIN_GAMES,
    ShardWorkerConfig,
    ShardWorkerPool,
)
from mafiabench.study.spec import AUTO_PROCESSES_MAX, Experiment
from mafiabench.study.summary import RunSummary
from mafiabench.study.workers import WorkerConfig, WorkerPool
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import FlatBatch
from mafiabench.warehouse.sidecar import import_beside, write_sidecar


class _Played:
    """A game played, with what it spent, until its shard file is written and it is counted."""

    __slots__ = ("busy_s", "per_model", "record", "usage")

    def __init__(self, record: GameRecord, usage: Usage, per_model: dict[str, Usage], busy_s: float) -> None:
        self.record = record
        self.usage = usage
        self.per_model = per_model
        self.busy_s = busy_s


HTTP_KINDS = frozenset({"openai", "anthropic"})


def uses_http(specs: list[str], endpoints: dict[str, EndpointConfig]) -> bool:
    """Whether any model of the study is reached over HTTP (an openai or anthropic kind of endpoint)."""
    known = {**BUILTIN_ENDPOINTS, **endpoints}
    return any(
        (ep := known.get(spec.partition("/")[0])) is not None and ep.kind in HTTP_KINDS
        for spec in specs
        if "/" in spec
    )


def shard_processes(experiment: Experiment, *, policy_only: bool, dask_address: str | None, games: int) -> int:
    """Worker processes for whole shards of policy games: `concurrency.processes` when given, for `auto` one per
    core (up to `AUTO_PROCESSES_MAX`) when the plan (`games`) is large enough to pay for starting them."""
    if not policy_only or dask_address is not None:
        return 1
    n = experiment.concurrency.processes
    if n != "auto":
        return n
    if games < AUTO_SHARD_WORKERS_MIN_GAMES:
        return 1
    return max(1, min(os.cpu_count() or 1, AUTO_PROCESSES_MAX))


def uses_game_workers(processes: int, shard_processes: int, *, policy_only: bool, dask_address: str | None) -> bool:
    """Whether games are played one at a time in worker processes (policy shards go whole to shard workers
    instead, and a Dask cluster has its own)."""
    return processes > 1 and shard_processes == 1 and not policy_only and dask_address is None


class ShardExecutor:
    """Plays shards of games for a planned study: everything it reads is given when it is made (the experiment and
    its settings, the run's ledger `summary`, the budget `guard`, the progress `bar`), and it keeps its own pools,
    workers and counters. `play_shard` is the callable the scheduler is handed."""

    def __init__(
        self,
        experiment: Experiment,
        *,
        models: dict[str, ModelSettings],
        prices: PriceTable,
        endpoints: dict[str, EndpointConfig],
        raw: Path,
        summary: RunSummary,
        guard: BudgetGuard,
        bar: Any,
        processes: int,
        shard_processes: int,
        policy_only: bool,
        dask_address: str | None,
    ) -> None:
        self.exp = experiment
        self.models = models
        self.prices = prices
        self.endpoints = endpoints
        self.raw = raw
        self.summary = summary
        self.guard = guard
        self.bar = bar
        self.processes = processes
        self.shard_processes = shard_processes  # policy studies: processes playing whole shards
        self.policy_only = policy_only
        self.dask_address = dask_address
        self._partial: dict[int, dict[str, _Played]] = {}  # shard → games an unfinished attempt of it played
        self._dask: Any = None
        # What the bar shows while games finish (the summary's ledger counts a shard once its file is written).
        self._live = Usage()
        self._live_failed = 0
        self._pools: dict[int, BackendPool] = {}
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._ahead: dict[str, float] = {}  # games started ahead of their shard (`head_start`) → when
        self._ahead_slots = 0  # the slots they hold, taken from the first loop's limit
        self.head_started: float | None = None  # when the first of them started (`time.perf_counter`)
        self._workers: WorkerPool | None = None
        self._shard_workers: ShardWorkerPool | None = None
        self.busy_games_s = 0.0  # summed over games: busy time over the play's wall time is the concurrency
        self.busy_calls_s = 0.0

    @functools.cached_property
    def _provenance(self) -> Provenance:
        """The records' provenance (the checkout's commit costs a `git` process: asked when a game first needs it)."""
        return Provenance(git_commit=git_commit())

    def pool(self) -> BackendPool:
        """The running loop's backend pool (SDK clients are loop-bound: one pool per event loop)."""
        key = id(asyncio.get_running_loop())
        if key not in self._pools:
            c = self.exp.concurrency
            self._pools[key] = BackendPool(
                endpoints=self.endpoints,
                limits=dict(c.providers),
                default_limit=c.default_provider,
                cache_dir=self.exp.cache_dir,
            )
            self._slots[key] = asyncio.Semaphore(c.games - self._ahead_slots)  # each started ahead gives its back
            self._ahead_slots = 0
        return self._pools[key]

    async def play_shard(self, shard: Shard) -> ShardResult:
        """Play a shard's games concurrently, then write their records as one shard file. A retried shard (after an
        infrastructure fault) reuses the games its earlier attempt finished: they are never played twice. Policy
        shards may go whole to a worker process (`shard_processes`)."""
        if self.shard_processes > 1:
            return await self._play_shard_in_worker(shard)
        t0 = time.perf_counter()
        pool = self.pool()
        slots = self._slots[id(asyncio.get_running_loop())]
        done = self._partial.setdefault(shard.index, {})
        result = ShardResult(shard.index)
        result.reused = sum(1 for g in shard.games if g.game_id in done)
        tasks = [
            asyncio.ensure_future(self._play_one(g, pool, slots, done)) for g in shard.games if g.game_id not in done
        ]
        try:
            finished, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION) if tasks else ((), ())
        except BaseException:  # cancelled from outside: take the games down with us
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        failed = [t for t in finished if not t.cancelled() and t.exception() is not None]
        if failed:
            # A failing attempt stops its other games before it reports, so a retry never overlaps them.
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            exc = failed[0].exception()
            assert exc is not None
            raise exc
        result.not_started = sum(1 for t in tasks if not t.result())
        played = [done[g.game_id] for g in shard.games if g.game_id in done]
        if played:
            result.batch, result.path = await asyncio.to_thread(self._write_shard, played, shard.index)
        del self._partial[shard.index]
        for p in played:
            self._account(p)
        result.played = len(played)
        result.wall_s = time.perf_counter() - t0
        return result

    async def _play_shard_in_worker(self, shard: Shard) -> ShardResult:
        """A shard of policy games played, written and flattened by a worker process; the ledger is kept here."""
        t0 = time.perf_counter()
        result = ShardResult(shard.index)
        games = []
        for g in shard.games:
            if self.guard.try_start():
                games.append(g)
            else:
                result.not_started += 1
        if not games:
            return result
        if self._shard_workers is None:
            self._shard_workers = ShardWorkerPool(
                ShardWorkerConfig(self.exp, self.raw, self._provenance, secret_env_names()), self.shard_processes
            )
        try:
            out = await self._shard_workers.play(shard.index, games)
        except BaseException:
            self.guard.finish(None, games=len(games))
            raise
        total = Usage()
        for cell, (played, failures) in out.cells.items():
            usage = Usage(games=played, failed_games=len(failures))  # policy games: no calls, no cost
            self.summary.add_games(cell, usage, played=played, failures=failures)
            total.add(usage)
        self.guard.finish(total, games=out.played)
        self._live.add(total)
        self._live_failed += total.failed_games
        self.busy_games_s += out.busy_s
        if self.bar is not None:
            self.bar.advance(out.played, failed=self._live_failed, tokens=self._live.tokens, usd=self._live.cost_usd)
        result.batch, result.path = out.batch, out.path
        result.played = out.played
        result.wall_s = time.perf_counter() - t0
        return result

    def _write_shard(self, played: list[_Played], index: int) -> tuple[FlatBatch, Path]:
        secrets = known_secrets()
        entries = [encode_record(p.record, secrets) for p in played]
        lines = [line for _, line in entries]
        path = landing.write_shard(lines, self.raw, index)
        batch = FlatBatch.of(entries)
        write_sidecar(path, lines, batch)  # the same rows as Parquet, for landing a backlog without parsing
        return batch, path

    async def _play_one(
        self, g: PlannedGame, pool: BackendPool, slots: asyncio.Semaphore, done: dict[str, _Played]
    ) -> bool:
        """Play one game into `done`; False if the budget guard did not let it start. A game started ahead of its
        shard (`head_start`) holds its slot and the guard's leave already: its record is waited for."""
        t0 = self._ahead.pop(g.game_id, None)
        if t0 is None:
            await slots.acquire()
        try:
            if t0 is None:
                if not self.guard.try_start():
                    self._tick()
                    return False
                t0 = time.perf_counter()
            usage: Usage | None = None
            try:
                rec = await self._play_game(g.spec(self.exp, self.models), pool)
                busy = time.perf_counter() - t0
                usage, per_model = game_usage(rec, self.prices)
            finally:
                self.guard.finish(usage)
        finally:
            slots.release()
        done[g.game_id] = _Played(rec, usage, per_model, busy)
        self._live.add(usage)
        self._live_failed += rec.outcome.get("status") == "failed"
        self._tick()
        return True

    def _play_game(self, spec: GameSpec, pool: BackendPool) -> Awaitable[GameRecord]:
        """On a Dask cluster (`[cluster]`), on this event loop, or with `concurrency.processes > 1` in the least busy
        worker process."""
        if self.dask_address is not None:
            if self._dask is None:
                from mafiabench.study.cluster import DaskGames

                self._dask = DaskGames(self.dask_address, self._worker_config(1))
            return self._dask.play(spec)
        if self.processes == 1:
            return play_game(spec, pool, provenance=self._provenance)
        if self._workers is None:
            self._workers = WorkerPool(self._worker_config(self.processes))
        return self._workers.play(spec)

    def _worker_config(self, processes: int) -> WorkerConfig:
        c = self.exp.concurrency
        return WorkerConfig(
            endpoints=self.endpoints,
            limits=dict(c.providers),
            default_limit=c.default_provider,
            cache_dir=self.exp.cache_dir,
            provenance=self._provenance,
            processes=processes,
            warm=tuple(s for s in self.exp.agent_specs() if "/" in s),
        )

    def close_workers(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        if self._shard_workers is not None:
            self._shard_workers.close()
            self._shard_workers = None

    def _account(self, played: _Played) -> None:
        """Add a game to the run's ledger (after its shard file is written, so a retried shard counts it once)."""
        rec, total, per_model, busy_s = played.record, played.usage, played.per_model, played.busy_s
        s = self.summary
        cell = (rec.design or {}).get("cell") or "?"
        s.add_game(rec.game_id, cell, total, failed=rec.outcome.get("status") == "failed", error=rec.error)
        for spec, u in per_model.items():
            s.per_model.setdefault(spec, Usage()).add(u)
        self.busy_games_s += busy_s
        self.busy_calls_s += sum(float(c.get("latency_ms") or 0.0) for c in rec.calls) / 1000.0

    def _tick(self) -> None:
        if self.bar is not None:
            self.bar.advance(failed=self._live_failed, tokens=self._live.tokens, usd=self._live.cost_usd)

    @property
    def uses_game_workers(self) -> bool:
        return uses_game_workers(self.processes, self.shard_processes, policy_only=self.policy_only,
                                 dask_address=self.dask_address)

    def spawn_game_workers(self) -> None:
        """Spawn the game workers now, without waiting for them: they start and import their SDKs while this process
        goes on (`mafiabench run` imports Prefect meanwhile); `start` waits for them."""
        if self.uses_game_workers and self._workers is None:
            self._workers = WorkerPool(self._worker_config(self.processes))
            self._workers.spawn()

    def head_start(self, games: Iterable[PlannedGame]) -> int:
        """Start the first of `games` (the plan's, in the order its shards hand them out) in the spawned workers
        now, as many as `concurrency.games` and the budget guard let start: they play while this process goes on
        (`mafiabench run` imports Prefect and starts its flow meanwhile), each holding its slot, and the shard that
        holds one waits for its record instead of starting it. The records are the same; only the time changes.
        Returns how many started."""
        if self._workers is None or self._ahead or self._slots:  # spawned, nothing started ahead, no shard yet
            return 0
        specs = []
        for g in itertools.islice(games, self.exp.concurrency.games):
            if not self.guard.try_start():
                break
            self._ahead[g.game_id] = time.perf_counter()
            specs.append(g.spec(self.exp, self.models))
        if specs:
            self._ahead_slots = len(specs)
            self.head_started = min(self._ahead.values())
            self._workers.head_start(specs)
        return len(specs)

    async def start(self) -> None:
        """Worker processes spawned and their SDKs imported before the first game, not while games wait for them
        (policy shards go whole to shard workers instead: these would sit idle). While they play, this process
        imports what writing their shards needs (`sidecar.import_beside`)."""
        if self.uses_game_workers:
            if self._workers is None:
                self._workers = WorkerPool(self._worker_config(self.processes))
            await asyncio.to_thread(self._workers.start)
            import_beside()

    async def stop(self) -> None:
        await asyncio.to_thread(self.close_workers)
        if self._dask is not None:
            dask, self._dask = self._dask, None
            await dask.close()
