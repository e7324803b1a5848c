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
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mafiabench.backends.endpoints import BUILTIN_ENDPOINTS, EndpointConfig, aclose_clients
from mafiabench.errors import UserError
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.prices import PriceTable, Usage, free_providers_of, game_usage, load_prices
from mafiabench.protocols import rows_for_warehouse
from mafiabench.record import GameRecord, Provenance, encode_record, git_commit
from mafiabench.redact import known_secrets, secret_env_names
from mafiabench.study.budget import BudgetGuard
from mafiabench.study.design import (
    Cell,
    PlannedGame,
    cell_fingerprints,
    cell_prefix,
    expand_cells,
    iter_interleaved,
    planned_game,
    slug,
)
from mafiabench.study.plan import Shard, ShardPlan, ShardResult, chunk_shards, is_infrastructure_fault
from mafiabench.study.protocol import protocol_card
from mafiabench.study.shard_workers import (
    AUTO_SHARD_WORKERS_MIN_GAMES,
    QUEUE_PER_WORKER,
    ShardWorkerConfig,
    ShardWorkerPool,
    is_policy_only,
)
from mafiabench.study.spec import AUTO_PROCESSES_MAX, Experiment
from mafiabench.study.stopping import CellLook, Rule, evaluate
from mafiabench.study.summary import RunSummary
from mafiabench.study.workers import WorkerConfig, WorkerPool, lean_gc
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import (
    FlatBatch,
    LoadResult,
    WarehouseBusyError,
    check_cell_fingerprints,
    connect,
    record_protocol_card,
)
from mafiabench.warehouse.sidecar import write_sidecar

# How long the lander keeps the warehouse open across landings at most: opening the file, checking its schema and
# closing it (the checkpoint that writes the rows into the file) cost about 0.15 s, which a run landing several
# shards a second (scripted games) paid for every shard. Readers still get in between, once a second.
LAND_HOLD_S = 1.0

# How long the lander waits for a reader (`mafiabench query`, a notebook) to release the warehouse file.
LAND_WAIT_S = 300.0

PlayFn = Callable[["Study", Shard], Awaitable[ShardResult]]


class _Played:
    """A game played, with what it spent, until its shard file is written and it is counted."""

    __slots__ = ("busy_s", "per_model", "record", "usage")

    def __init__(self, record: GameRecord, usage: Usage, per_model: dict[str, Usage], busy_s: float) -> None:
        self.record = record
        self.usage = usage
        self.per_model = per_model
        self.busy_s = busy_s


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
        dask: str | None = None,
        started: float | None = None,
    ) -> None:
        """`started`: when the command began (`time.time()`), so the summary's wall time is the whole command's
        (start-up and Prefect included); default now."""
        self._t0 = time.perf_counter() - (time.time() - started if started is not None else 0.0)
        self.exp = experiment
        self.dask_address = dask or (experiment.cluster.dask if experiment.cluster is not None else None)
        self._dask: Any = None
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
        self.uses_http = uses_http(experiment.agent_specs(), self.endpoints)
        self.processes = experiment.concurrency.worker_processes(self.uses_http)
        self.summary = RunSummary(
            run_id=f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.getpid()}-{uuid.uuid4().hex[:6]}",
            experiment=experiment.name,
            orchestrator=orchestrator,
            warehouse=str(self.warehouse),
            started_at=datetime.now(UTC) if started is None else datetime.fromtimestamp(started, UTC),
            price_version=self.prices.version,
            budget={k: v for k, v in experiment.budget.model_dump().items() if v is not None},
            description=experiment.description,
        )
        self.cells: list[Cell] = []
        self.shards = ShardPlan(0, 0, lambda: iter(()))
        self._todo: list[bytearray] = []
        self._partial: dict[int, dict[str, _Played]] = {}  # shard → games an unfinished attempt of it played
        self.rule: Rule | None = experiment.stopping.rule() if experiment.stopping is not None else None
        self.looks: dict[str, CellLook] = {}  # with [stopping]: each cell at its last look
        self._targets: dict[int, int] = {}  # with [stopping]: open cell → the game count of its next look
        self._next_shard = 0
        self.guard: BudgetGuard | None = None
        self._lock_cm: Any = None
        self._con: Any = None
        self._con_lock = threading.RLock()  # the lander's thread and this one share the connection
        self._con_depth = 0
        self._con_opened = 0.0
        self._release_timer: threading.Timer | None = None
        self._open = False
        self._bar: Any = None
        # What the bar shows while games finish (the summary's ledger counts a shard once its file is written).
        self._live = Usage()
        self._live_failed = 0
        self._pools: dict[int, BackendPool] = {}
        self._slots: dict[int, asyncio.Semaphore] = {}
        self._land_lock: asyncio.Lock | None = None
        self._workers: WorkerPool | None = None
        self._shard_workers: ShardWorkerPool | None = None
        self.policy_only = is_policy_only(experiment.agent_specs())
        self.shard_processes = 1  # policy studies: processes playing whole shards (decided once the plan is known)
        self._busy_games_s = 0.0
        self._busy_calls_s = 0.0
        self._provenance = Provenance(git_commit=git_commit())

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
            with self._con_lock:
                self._close_con()
        finally:
            self._con = None
            self._open = False
            self._lock_cm.__exit__(*exc)

    @contextlib.contextmanager
    def connection(self, *, hold: bool = False) -> Iterator[Any]:
        """DuckDB for one step (plan, land a shard, summarise), closed after it so readers get in between. Nested
        uses share one connection. A reader holding the file is waited for, up to `LAND_WAIT_S`.

        `hold` (the lander's): keep the file open after the step for up to `LAND_HOLD_S` from its opening, so
        shards landing in quick succession share one open and one closing checkpoint; a timer closes it when no
        landing comes, and `release()` at the end of the shards."""
        if not self._open:
            raise RuntimeError("Study is not open: use `with Study(...) as study:`")
        with self._con_lock:
            if self._con is None:
                self._con = self._connect()
                self._con_opened = time.monotonic()
            self._con_depth += 1
            try:
                yield self._con
            finally:
                self._con_depth -= 1
                if self._con_depth == 0:
                    left = self._con_opened + LAND_HOLD_S - time.monotonic()
                    if hold and left > 0:
                        if self._release_timer is None:
                            self._release_timer = threading.Timer(left, self._release_idle)
                            self._release_timer.daemon = True
                            self._release_timer.start()
                    else:
                        self._close_con()

    def _connect(self) -> Any:
        deadline = time.monotonic() + LAND_WAIT_S
        delay = 0.05
        while True:
            try:
                # Records with model calls carry their prompts: small row groups keep each landing's checkpoint
                # bounded. Policy games have none and keep DuckDB's default groups, which the marts scan faster.
                return connect(self.warehouse, landing=not self.policy_only)
            except WarehouseBusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(1.0, delay * 2)

    def _close_con(self) -> None:
        """Close the connection (its checkpoint writes the landed rows into the file); caller holds `_con_lock`."""
        timer, self._release_timer = self._release_timer, None
        if timer is not None:
            timer.cancel()
        con, self._con = self._con, None
        if con is not None:
            con.close()

    def _release_idle(self) -> None:
        with self._con_lock:
            self._release_timer = None
            if self._con_depth == 0:
                self._close_con()

    def release(self) -> None:
        """Close a connection the lander kept open (`connection(hold=True)`), now."""
        with self._con_lock:
            if self._con_depth == 0:
                self._close_con()

    @property
    def con(self) -> Any:
        """The open connection of the current step (inside `with study.connection()`)."""
        if self._con is None:
            raise RuntimeError("no warehouse connection open: use `with study.connection() as con:`")
        return self._con

    # -- 1. plan --------------------------------------------------------------------------------------------------
    def prepare(self) -> ShardPlan:
        """Expand, load landed-but-not-loaded raw files, skip landed games, shard the rest."""
        with self.connection():
            return self._prepare()

    def _prepare(self) -> ShardPlan:
        exp = self.exp
        if self.dask_address is not None:
            from mafiabench.study.cluster import check_scheduler

            check_scheduler(self.dask_address)
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
        s = self.summary
        s.games_planned = sum(c.games for c in self.cells)
        loaded = landing.land_pending(self.con, self.raw, exp.name)
        s.games_loaded_from_raw = loaded.inserted + loaded.replaced
        check_cell_fingerprints(self.con, cell_fingerprints(exp, self.cells), source=f"experiment {exp.name!r}")
        card = protocol_card(exp)
        record_protocol_card(self.con, exp.name, rows_for_warehouse(card) if card is not None else [])
        # One byte per planned game says whether it is still to play: a million-game plan costs a megabyte here,
        # and its games are made only as their shards are handed out.
        self._todo = []
        finished = 0
        for cell in self.cells:
            todo = bytearray(b"\x01") * cell.games
            for i in landing.finished_indices(self.con, cell_prefix(exp, cell)):
                if i < cell.games and todo[i]:
                    todo[i] = 0
                    finished += 1
            self._todo.append(todo)
        s.games_already_landed = max(0, finished - s.games_loaded_from_raw)
        s.games_to_play = s.games_planned - finished
        if self.rule is not None:  # played in waves: the total grows as waves are added
            self._targets = {k: self.rule.min_games for k in range(len(self.cells))}
            s.games_to_play = 0
        self.guard = BudgetGuard(exp.budget, self._landed_usage())
        s.budget_spent = self.guard.spent
        self.shards = ShardPlan(math.ceil(s.games_to_play / exp.shard_size), s.games_to_play, self._iter_shards)
        self.shard_processes = self._shard_processes()
        landing.record_run(self.con, s.to_row())
        if self.progress is not False and (s.games_to_play or self.rule is not None):
            from mafiabench.study.progress import GameProgress

            self._bar = GameProgress(s.games_to_play, exp.name[:30], enabled=self.progress)
        return self.shards

    def _shard_processes(self) -> int:
        """Worker processes for whole shards of policy games: `concurrency.processes` when given, for `auto` one
        per core (up to `AUTO_PROCESSES_MAX`) when the plan is large enough to pay for starting them."""
        if not self.policy_only or self.dask_address is not None:
            return 1
        n = self.exp.concurrency.processes
        if n != "auto":
            return n
        games = self.summary.games_planned if self.rule is not None else self.summary.games_to_play
        if games < AUTO_SHARD_WORKERS_MIN_GAMES:
            return 1
        return max(1, min(os.cpu_count() or 1, AUTO_PROCESSES_MAX))

    def _iter_shards(self) -> Iterator[Shard]:
        todo = self._todo
        games = iter_interleaved(self.exp, self.cells, lambda k, i: bool(todo[k][i]))
        return chunk_shards(games, self.exp.shard_size)

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
        assert self.guard is not None
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
        self._busy_games_s += out.busy_s
        if self._bar is not None:
            self._bar.advance(out.played, failed=self._live_failed, tokens=self._live.tokens, usd=self._live.cost_usd)
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
        """Play one game into `done`; False if the budget guard did not let it start."""
        assert self.guard is not None
        async with slots:
            if not self.guard.try_start():
                self._tick()
                return False
            usage: Usage | None = None
            try:
                t0 = time.perf_counter()
                rec = await self._play_game(g.spec(self.exp, self.models), pool)
                busy = time.perf_counter() - t0
                usage, per_model = game_usage(rec, self.prices)
            finally:
                self.guard.finish(usage)
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

    def _close_workers(self) -> None:
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
        self._busy_games_s += busy_s
        self._busy_calls_s += sum(float(c.get("latency_ms") or 0.0) for c in rec.calls) / 1000.0

    def _tick(self) -> None:
        if self._bar is not None:
            self._bar.advance(failed=self._live_failed, tokens=self._live.tokens, usd=self._live.cost_usd)

    # -- 3. land --------------------------------------------------------------------------------------------------
    async def land_shard(self, result: ShardResult) -> LoadResult:
        """Load a shard's records into DuckDB off the event loop, one shard at a time (one writer)."""
        if self._land_lock is None:
            self._land_lock = asyncio.Lock()
        async with self._land_lock:
            return await asyncio.to_thread(self._land_sync, result)

    def _land_sync(self, result: ShardResult) -> LoadResult:
        if result.path is None or result.batch is None:  # nothing played (budget)
            return LoadResult()
        with self.connection(hold=True) as con:
            return landing.land_shard(con, result.batch, result.path, self.exp.name)

    # -- fan out --------------------------------------------------------------------------------------------------
    def shards_in_flight(self) -> int:
        """Enough shards to keep every game slot busy, plus slack for shards finishing their tail or landing."""
        if self.shard_processes > 1:  # shards queued to each worker, and one more each landing
            return (QUEUE_PER_WORKER + 1) * self.shard_processes
        known = self.exp.shard_size if self.rule is not None else self.shards.games  # waves: sized as they come
        per = max(1, min(self.exp.shard_size, known or 1))
        return max(2, 2 * math.ceil(self.exp.concurrency.games / per))

    async def fan_out(
        self, play: PlayFn | None = None, land: LandFn | None = None, shards: Iterable[Shard] | None = None
    ) -> list[ShardResult]:
        """Play every shard (default: the plan's; with [stopping], wave after wave until each cell's interval is
        narrow enough) and land each as it finishes, a bounded number at a time: shards are taken from the plan only
        as slots free up, so a run's memory does not grow with its size. A shard that fails for good is reported in
        the summary; the others go on."""
        play = play or _play_with_local_retries
        land = land or _land_direct
        if self.processes > 1 and self.shard_processes == 1 and self.dask_address is None and self._workers is None:
            # workers spawned and their SDKs imported before the first game, not while games wait for them (policy
            # shards go whole to shard workers instead: these would sit idle)
            self._workers = WorkerPool(self._worker_config(self.processes))
            await asyncio.to_thread(self._workers.start)
        t0 = time.perf_counter()
        results: list[ShardResult] = []
        # calls over HTTP allocate much and briefly: a lean collector while they run (workers.lean_gc)
        with lean_gc() if self.uses_http else contextlib.nullcontext():
            try:
                if self.rule is None or shards is not None:
                    results = await self._fan(self.shards if shards is None else shards, play, land)
                else:
                    while (wave := self._next_wave()) is not None:
                        results += await self._fan(wave, play, land)
                        if self.summary.shard_errors or (self.guard is not None and self.guard.stopped):
                            break
            finally:
                self.summary.play_wall_s = time.perf_counter() - t0
                await asyncio.to_thread(self.release)
                await aclose_clients()
                await asyncio.to_thread(self._close_workers)
                if self._dask is not None:
                    dask, self._dask = self._dask, None
                    await dask.close()
        if self.guard is not None and self.guard.stopped:
            self.summary.budget_stopped = True
        results.sort(key=lambda r: r.index)
        return results

    async def _fan(self, shards: Iterable[Shard], play: PlayFn, land: LandFn) -> list[ShardResult]:
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

    # -- adaptive sample sizes ([stopping]) --------------------------------------------------------------------
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
            self._bar.show(failed=s.games_failed, tokens=s.usage.tokens, usd=s.usage.cost_usd)  # the summary's
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
    dask: str | None = None,
    started: float | None = None,
) -> RunSummary:
    """Run an experiment without Prefect (`mafiabench run --no-prefect`): the same steps as the flow."""
    with Study(experiment, warehouse=warehouse, progress=progress, prices=prices, dask=dask, started=started) as study:
        study.prepare()
        await study.fan_out()
        return study.finish()
