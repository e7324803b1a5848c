"""Running an experiment: plan, skip what is landed, play shards of games concurrently, land, summarise.

All the logic of a run lives here and is tested without Prefect; `flows/study_flow.py` only wraps `play_shard` and
`land_shard` as Prefect tasks and calls the same steps. One `Study` is one run against one warehouse:

1. `prepare()` takes the warehouse lock, expands the design, loads raw files that reached the landing folder but not
   DuckDB (a crash between the two), and shards the games still missing (failed games are replayed).
2. `play_shard()` plays a shard's games concurrently on the running event loop (or, with `concurrency.processes`
   above 1, in worker processes: `mafiabench.study.workers`), under a global games-in-flight limit, per-provider call
   limits (`BackendPool`) and the budget guard, and writes each record atomically to the raw folder. It never
   touches DuckDB, and it is idempotent: a retried shard reuses the records it already wrote.
3. `land_shard()` loads a shard's records into DuckDB; the Study is the run's one writer. It opens DuckDB only
   while it lands (and while it plans and summarises), so `mafiabench query` and other readers get in between
   landings; a reader holding the file makes the lander wait for it (`LAND_WAIT_S`), never fail.
4. `finish()` builds the run summary (games, calls, tokens, cost, wall time, achieved concurrency), records it in
   `raw_runs`, and prints it.

Model-call retries live in the backends; a game whose calls fail for good comes back as a failed record and is
landed as such. Only infrastructure faults (a full disk, a lost connection) fail a shard, and only those are retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mafiabench.backends.registry import BUILTIN_ENDPOINTS, EndpointConfig, aclose_clients
from mafiabench.errors import UserError
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.prices import PriceTable, Usage, free_providers_of, game_usage, load_prices
from mafiabench.record import GameRecord, Provenance, git_commit
from mafiabench.study.budget import BudgetGuard
from mafiabench.study.design import Cell, PlannedGame, cell_fingerprints, expand_cells, iter_games, slug
from mafiabench.study.plan import Shard, ShardResult, interleave, is_infrastructure_fault, shard_games
from mafiabench.study.spec import Experiment
from mafiabench.study.summary import RunSummary
from mafiabench.study.workers import WorkerConfig, WorkerPool
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import LoadResult, WarehouseBusyError, check_cell_fingerprints, connect

# How long the lander waits for a reader (`mafiabench query`, a notebook) to release the warehouse file.
LAND_WAIT_S = 300.0

PlayFn = Callable[["Study", Shard], Awaitable[ShardResult]]
LandFn = Callable[["Study", ShardResult], Awaitable[Any]]


HTTP_KINDS = frozenset({"openai", "anthropic"})


def uses_http(specs: list[str], endpoints: dict[str, EndpointConfig]) -> bool:
    """Whether any model of the study is reached over HTTP (an openai or anthropic kind of endpoint)."""
    known = {**BUILTIN_ENDPOINTS, **endpoints}
    return any(
        (ep := known.get(spec.partition("/")[0])) is not None and ep.kind in HTTP_KINDS
        for spec in specs
        if "/" in spec
    )


class Study:
    """One run of an experiment against one warehouse (not a dataclass on purpose: Prefect passes it to tasks as
    an opaque object instead of walking its fields)."""

    def __init__(
        self,
        experiment: Experiment,
        *,
        warehouse: str | Path | None = None,
        orchestrator: str = "local",
        progress: bool | None = None,
        prices: PriceTable | None = None,
        shard_retries: int = 2,
        shard_retry_delays: tuple[float, ...] = (1.0, 5.0),
    ) -> None:
        self.exp = experiment
        self.warehouse = experiment.warehouse_path(warehouse)
        self.raw = landing.raw_dir(self.warehouse, experiment.name)
        self.orchestrator = orchestrator
        self.progress = progress
        self.shard_retries = shard_retries
        self.shard_retry_delays = shard_retry_delays
        self.endpoints: dict[str, EndpointConfig] = experiment.endpoint_configs()
        base = prices or load_prices()
        self.prices = base.with_overrides(experiment.prices, free_providers_of(self.endpoints))
        self.models = experiment.model_settings()
        self.processes = experiment.concurrency.worker_processes(uses_http(experiment.agent_specs(), self.endpoints))
        self.summary = RunSummary(
            run_id=f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.getpid()}-{uuid.uuid4().hex[:6]}",
            experiment=experiment.name,
            orchestrator=orchestrator,
            warehouse=str(self.warehouse),
            started_at=datetime.now(UTC),
            price_version=self.prices.version,
            budget={k: v for k, v in experiment.budget.model_dump().items() if v is not None},
            description=experiment.description,
        )
        self.cells: list[Cell] = []
        self.shards: list[Shard] = []
        self.guard: BudgetGuard | None = None
        self._t0 = time.perf_counter()
        self._lock_cm: Any = None
        self._con: Any = None
        self._open = False
        self._bar: Any = None
        self._pools: dict[int, BackendPool] = {}
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._land_lock: asyncio.Lock | None = None
        self._workers: WorkerPool | None = None
        self._busy_games_s = 0.0
        self._busy_calls_s = 0.0
        self._provenance = Provenance(git_commit=git_commit())
        self._written: set[str] = set()

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def __enter__(self) -> Study:
        self._lock_cm = landing.warehouse_lock(self.warehouse, what=f"mafiabench run {self.exp.name}")
        self._lock_cm.__enter__()
        self._open = True
        try:
            with self.connection() as con:
                landing.ensure_runs_table(con)
            landing.remove_partial(self.raw)
        except BaseException:
            self._open = False
            self._lock_cm.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._close_workers()
            if self._bar is not None:
                self._bar.close()
            if self._con is not None:
                self._con.close()
        finally:
            self._con = None
            self._open = False
            self._lock_cm.__exit__(*exc)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """DuckDB for one step (plan, land a shard, summarise), closed after it so readers get in between. Nested
        uses share one connection. A reader holding the file is waited for, up to `LAND_WAIT_S`."""
        if not self._open:
            raise RuntimeError("Study is not open: use `with Study(...) as study:`")
        if self._con is not None:
            yield self._con
            return
        deadline = time.monotonic() + LAND_WAIT_S
        delay = 0.05
        while True:
            try:
                self._con = connect(self.warehouse)
                break
            except WarehouseBusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(1.0, delay * 2)
        try:
            yield self._con
        finally:
            self._con.close()
            self._con = None

    @property
    def con(self) -> Any:
        """The open connection of the current step (inside `with study.connection()`)."""
        if self._con is None:
            raise RuntimeError("no warehouse connection open: use `with study.connection() as con:`")
        return self._con

    # -- 1. plan --------------------------------------------------------------------------------------------------
    def prepare(self) -> list[Shard]:
        """Expand, load landed-but-not-loaded raw files, skip landed games, shard the rest."""
        with self.connection():
            return self._prepare()

    def _prepare(self) -> list[Shard]:
        exp = self.exp
        BackendPool(endpoints=self.endpoints).check(
            [s for s in exp.agent_specs() if not s.startswith("policy/")]
        )  # unknown provider or missing key: fail before any game
        if exp.budget.max_usd is not None:
            unpriced = [
                s
                for s in exp.agent_specs()
                if not self.prices.is_free(s) and self.prices.lookup(s) is None and not s.startswith("human/")
            ]
            if unpriced:
                raise UserError(
                    f"budget.max_usd is set but these models have no price: {', '.join(unpriced)}; add rows under "
                    '[prices."provider/model"] in the experiment (input_per_mtok, output_per_mtok)'
                )
        self.cells = expand_cells(exp)
        plan = list(iter_games(exp, self.cells))
        ids = [g.game_id for g in plan]
        s = self.summary
        s.games_planned = len(plan)
        before = landing.landing_state(self.con, ids)
        files = landing.raw_files(self.raw)
        pending = [files[i] for i in ids if i in files and i not in before.finished]
        loaded = landing.land_files(self.con, pending)
        s.games_loaded_from_raw = loaded.inserted + loaded.replaced
        after = landing.landing_state(self.con, ids) if pending else before
        s.games_already_landed = len(before.finished)
        check_cell_fingerprints(self.con, cell_fingerprints(exp, self.cells), source=f"experiment {exp.name!r}")
        todo = interleave(g for g in plan if g.game_id not in after.finished)
        s.games_to_play = len(todo)
        self.guard = BudgetGuard(exp.budget, self._landed_usage())
        s.budget_spent = self.guard.spent
        self.shards = shard_games(todo, exp.shard_size)
        landing.record_run(self.con, s.to_row())
        if self.progress is not False and todo:
            from mafiabench.study.progress import GameProgress

            self._bar = GameProgress(len(todo), exp.name[:30], enabled=self.progress)
        return self.shards

    def _landed_usage(self) -> Usage:
        total = Usage()
        for provider, model, calls, tin, tout, tcached in landing.usage_by_model(self.con, self.exp.name):
            spec = f"{provider}/{model}"
            cost = self.prices.cost(spec, tin, tout, tcached)
            total.add(
                Usage(
                    calls=calls,
                    input_tokens=tin,
                    output_tokens=tout,
                    cached_tokens=tcached,
                    cost_usd=cost or 0.0,
                    unpriced={spec} if cost is None else set(),
                )
            )
        row = self.con.execute("select count(*) from raw_games where experiment = $e", {"e": self.exp.name}).fetchone()
        games = int(row[0]) if row else 0
        total.games = games
        return total

    # -- 2. play --------------------------------------------------------------------------------------------------
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
            self._slots[key] = asyncio.Semaphore(c.games)
        return self._pools[key]

    async def play_shard(self, shard: Shard) -> ShardResult:
        """Play a shard's games concurrently; each record lands in the raw folder as soon as it is finished."""
        t0 = time.perf_counter()
        pool = self.pool()
        slots = self._slots[id(asyncio.get_running_loop())]
        result = ShardResult(shard.index)
        tasks = [asyncio.ensure_future(self._play_one(g, pool, slots)) for g in shard.games]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        except BaseException:  # cancelled from outside: take the games down with us
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        failed = [t for t in done if not t.cancelled() and t.exception() is not None]
        if failed:
            # A failing attempt stops its other games before it reports, so a retry never overlaps them.
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            exc = failed[0].exception()
            assert exc is not None
            raise exc
        outcomes = [t.result() for t in tasks]
        for kind, rec in outcomes:
            if kind == "not-started":
                result.not_started += 1
                continue
            assert rec is not None
            result.records.append(rec)
            if kind == "reused":
                result.reused += 1
        result.wall_s = time.perf_counter() - t0
        return result

    async def _play_one(
        self, g: PlannedGame, pool: BackendPool, slots: asyncio.Semaphore
    ) -> tuple[str, GameRecord | None]:
        if g.game_id in self._written:  # an earlier attempt of this shard wrote it: reuse, do not replay
            return "reused", await asyncio.to_thread(landing.read_raw, landing.raw_path(self.raw, g.game_id))
        assert self.guard is not None
        async with slots:
            if not self.guard.try_start():
                self._tick()
                return "not-started", None
            usage: Usage | None = None
            try:
                t0 = time.perf_counter()
                rec = await self._play_game(g.spec(self.exp, self.models), pool)
                busy = time.perf_counter() - t0
                usage, per_model = game_usage(rec, self.prices)
            finally:
                self.guard.finish(usage)
        await asyncio.to_thread(landing.write_raw, rec, self.raw)
        self._written.add(g.game_id)
        self._account(rec, usage, per_model, busy)
        self._tick()
        return "played", rec

    def _play_game(self, spec: GameSpec, pool: BackendPool) -> Awaitable[GameRecord]:
        """On this event loop, or with `concurrency.processes > 1` in the least busy worker process."""
        c = self.exp.concurrency
        if self.processes == 1:
            return play_game(spec, pool, provenance=self._provenance)
        if self._workers is None:
            self._workers = WorkerPool(
                WorkerConfig(
                    endpoints=self.endpoints,
                    limits=dict(c.providers),
                    default_limit=c.default_provider,
                    cache_dir=self.exp.cache_dir,
                    provenance=self._provenance,
                    processes=self.processes,
                )
            )
        return self._workers.play(spec)

    def _close_workers(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None

    def _account(self, rec: GameRecord, total: Usage, per_model: dict[str, Usage], busy_s: float) -> None:
        """Add a landed game to the run's ledger (after its file is written, so a retried shard counts it once)."""
        s = self.summary
        s.usage.add(total)
        cell = (rec.design or {}).get("cell") or "?"
        s.per_cell.setdefault(cell, Usage()).add(total)
        for spec, u in per_model.items():
            s.per_model.setdefault(spec, Usage()).add(u)
        s.games_played += 1
        if rec.outcome.get("status") == "failed":
            s.games_failed += 1
            if len(s.failures) < 50:
                s.failures.append((rec.game_id, rec.error or "failed"))
        else:
            s.games_done += 1
        self._busy_games_s += busy_s
        self._busy_calls_s += sum(float(c.get("latency_ms") or 0.0) for c in rec.calls) / 1000.0

    def _tick(self) -> None:
        if self._bar is not None:
            u = self.summary.usage
            self._bar.advance(failed=self.summary.games_failed, tokens=u.tokens, usd=u.cost_usd)

    # -- 3. land --------------------------------------------------------------------------------------------------
    async def land_shard(self, result: ShardResult) -> LoadResult:
        """Load a shard's records into DuckDB off the event loop, one shard at a time (one writer)."""
        if self._land_lock is None:
            self._land_lock = asyncio.Lock()
        async with self._land_lock:
            return await asyncio.to_thread(self._land_sync, result.records)

    def _land_sync(self, records: list[GameRecord]) -> LoadResult:
        with self.connection() as con:
            return landing.land(con, records)

    # -- fan out --------------------------------------------------------------------------------------------------
    def shards_in_flight(self) -> int:
        """Enough shards to keep every game slot busy, plus slack for shards finishing their tail."""
        per = max(1, min(self.exp.shard_size, max((len(s) for s in self.shards), default=1)))
        return max(2, 2 * math.ceil(self.exp.concurrency.games / per))

    async def fan_out(self, play: PlayFn | None = None, land: LandFn | None = None) -> list[ShardResult]:
        """Play every shard (a bounded number at a time) and land each as it finishes. A shard that fails for good
        is reported in the summary; the others go on."""
        play = play or _play_with_local_retries
        land = land or _land_direct
        limiter = asyncio.Semaphore(self.shards_in_flight())
        t0 = time.perf_counter()

        async def one(shard: Shard) -> ShardResult:
            async with limiter:
                result = await play(self, shard)
            await land(self, result)
            # Landed: its records are in the raw folder and DuckDB. Dropping them here keeps a run's memory bounded
            # by the shards in flight, whatever its size (Prefect's task result is this same object).
            result.landed = len(result.records)
            result.records = []
            return result

        try:
            outcomes = await asyncio.gather(*(one(s) for s in self.shards), return_exceptions=True)
        finally:
            self.summary.play_wall_s = time.perf_counter() - t0
            await aclose_clients()
            await asyncio.to_thread(self._close_workers)
        results: list[ShardResult] = []
        for shard, o in zip(self.shards, outcomes, strict=True):
            if isinstance(o, BaseException):
                if isinstance(o, (KeyboardInterrupt, asyncio.CancelledError)):
                    raise o
                self.summary.shard_errors.append(f"shard {shard.index} ({len(shard)} games): {type(o).__name__}: {o}")
            else:
                results.append(o)
                self.summary.games_not_started += o.not_started
        if self.guard is not None and self.guard.stopped:
            self.summary.budget_stopped = True
        return results

    # -- 4. summary ----------------------------------------------------------------------------------------------
    def finish(self) -> RunSummary:
        s = self.summary
        s.finished_at = datetime.now(UTC)
        s.wall_s = time.perf_counter() - self._t0
        if s.play_wall_s > 0:
            s.games_concurrency = self._busy_games_s / s.play_wall_s
            s.calls_concurrency = self._busy_calls_s / s.play_wall_s
        if self.guard is not None:
            s.budget_spent = self.guard.spent
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        with self.connection() as con:
            landing.record_run(con, s.to_row())
        return s

    def artifact_key(self) -> str:
        """A Prefect artifact key (lowercase letters, digits, dashes)."""
        return ("mafiabench-run-" + slug(self.exp.name).lower().replace(".", "-").replace("_", "-"))[:100]


async def _play_with_local_retries(study: Study, shard: Shard) -> ShardResult:
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


async def _land_direct(study: Study, result: ShardResult) -> LoadResult:
    return await study.land_shard(result)


async def run_study(
    experiment: Experiment,
    *,
    warehouse: str | Path | None = None,
    progress: bool | None = None,
    prices: PriceTable | None = None,
) -> RunSummary:
    """Run an experiment without Prefect (`mafiabench run --no-prefect`): the same steps as the flow."""
    with Study(experiment, warehouse=warehouse, progress=progress, prices=prices) as study:
        study.prepare()
        await study.fan_out()
        return study.finish()
