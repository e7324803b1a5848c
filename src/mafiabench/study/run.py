"""Running an experiment: plan, skip what is landed, play shards of games concurrently, land, summarise.

All the logic of a run lives here and is tested without Prefect; `mafiabench.flows.study` only wraps `play_shard` and
`land_shard` as Prefect tasks and calls the same steps. One `Study` is one run against one warehouse:

1. `prepare()` takes the warehouse lock, expands the design, loads raw files that reached the landing folder but not
   DuckDB (a crash between the two), and shards the games still missing (failed games are replayed).
2. `play_shard()` plays a shard's games concurrently on the running event loop, in worker processes or on a Dask
   cluster (`study/executors.py`), under a global games-in-flight limit, per-provider call limits (`BackendPool`)
   and the budget guard, and writes each record atomically to the raw folder. It never touches DuckDB, and it is
   idempotent: a retried shard reuses the records it already wrote. `fan_out()` keeps a bounded number of shards
   in flight, and with `[stopping]` plays them in waves until each cell's interval is narrow enough
   (`study/waves.py`).
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
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.play.runner import BackendPool
from mafiabench.prices import PriceTable, free_providers_of, load_prices
from mafiabench.protocols import rows_for_warehouse
from mafiabench.study.budget import BudgetGuard, landed_usage, require_prices
from mafiabench.study.design import cell_fingerprints, expand_cells, slug
from mafiabench.study.plan import ShardPlan, ShardResult
from mafiabench.study.protocol import protocol_card
from mafiabench.study.spec import Experiment
from mafiabench.study.summary import RunSummary
from mafiabench.study.waves import WaveScheduler
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import (
    LoadResult,
    WarehouseBusyError,
    check_cell_fingerprints,
    connect,
    record_protocol_card,
)

# How long the lander keeps the warehouse open across landings at most: opening the file, checking its schema and
# closing it (the checkpoint that writes the rows into the file) cost about 0.15 s, which a run landing several
# shards a second (scripted games) paid for every shard. Readers still get in between, once a second.
LAND_HOLD_S = 1.0

# How long the lander waits for a reader (`mafiabench query`, a notebook) to release the warehouse file.
LAND_WAIT_S = 300.0


class Study(WaveScheduler):
    """One run of an experiment against one warehouse (not a dataclass on purpose: Prefect passes it to tasks as
    an opaque object instead of walking its fields). Its lifecycle is here; how shards are played is
    `ShardPlayer`'s (`study/executors.py`), how they are scheduled, in waves with [stopping], `WaveScheduler`'s
    (`study/waves.py`)."""

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
        self._init_executors(experiment)
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
        self.cells = []
        self.shards = ShardPlan(0, 0, lambda: iter(()))
        self._todo = []
        self._init_waves(experiment.stopping.rule() if experiment.stopping is not None else None)
        self.guard = None
        self._lock_cm: Any = None
        self._con: Any = None
        self._con_lock = threading.RLock()  # the lander's thread and this one share the connection
        self._con_depth = 0
        self._con_opened = 0.0
        self._release_timer: threading.Timer | None = None
        self._open = False
        self._bar = None
        self._land_lock: asyncio.Lock | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def __enter__(self) -> Study:
        if self._open:  # opened and planned before the flow (`plan_before_flow`): the flow's `with` takes it over
            return self
        self._lock_cm = landing.warehouse_lock(self.warehouse, what=f"mafiabench run {self.exp.name}")
        self._lock_cm.__enter__()
        self._open = True
        try:
            with self.connection(hold=True) as con:  # held for the plan that follows: one open, not two
                landing.ensure_runs_table(con)
            landing.remove_partial(self.raw)
        except BaseException:
            self._open = False
            self._lock_cm.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._open:  # closed already (the flow closed a study planned before it)
            return
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
        with self.connection(hold=True):  # held for a run with nothing to play, whose summary follows at once
            return self._prepare()

    def _prepare(self) -> ShardPlan:
        exp = self.exp
        if self.dask_address is not None:
            from mafiabench.study.cluster import check_scheduler

            check_scheduler(self.dask_address)
        BackendPool(endpoints=self.endpoints).check(
            [s for s in exp.agent_specs() if not s.startswith("policy/")]
        )  # unknown provider or missing key: fail before any game
        require_prices(exp.budget, exp.agent_specs(), self.prices)
        self.cells = expand_cells(exp)
        s = self.summary
        s.games_planned = sum(c.games for c in self.cells)
        loaded = landing.land_pending(self.con, self.raw, exp.name)
        s.games_loaded_from_raw = loaded.inserted + loaded.replaced
        check_cell_fingerprints(self.con, cell_fingerprints(exp, self.cells), source=f"experiment {exp.name!r}")
        card = protocol_card(exp)
        record_protocol_card(self.con, exp.name, rows_for_warehouse(card) if card is not None else [])
        finished = self._mark_still_to_play(self.con)
        s.games_already_landed = max(0, finished - s.games_loaded_from_raw)
        s.games_to_play = s.games_planned - finished
        if self.rule is not None:  # played in waves: the total grows as waves are added
            self._targets = {k: self.rule.min_games for k in range(len(self.cells))}
            s.games_to_play = 0
        self.guard = BudgetGuard(exp.budget, landed_usage(self.con, exp.name, self.prices))
        s.budget_spent = self.guard.spent
        self.shards = ShardPlan(math.ceil(s.games_to_play / exp.shard_size), s.games_to_play, self._iter_shards)
        self.shard_processes = self._shard_processes()
        landing.record_run(self.con, s.to_row())
        if self.progress is not False and (s.games_to_play or self.rule is not None):
            from mafiabench.study.progress import GameProgress

            self._bar = GameProgress(s.games_to_play, exp.name[:30], enabled=self.progress)
        return self.shards

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


# Studies opened and planned by `mafiabench run` before Prefect is imported, for the study flow to take over.
_PLANNED: dict[tuple[str, str | None], Study] = {}


def plan_before_flow(
    experiment: Experiment,
    key: tuple[str, str | None],
    *,
    warehouse: str | Path | None = None,
    progress: bool | None = None,
    dask: str | None = None,
    started: float | None = None,
) -> Study | None:
    """For a study played in worker processes: open it and plan it now, and if it has games to play spawn its
    workers, so that they start and import their SDKs (about a second of CPU each) while the command imports
    Prefect (another second), not after it. The study flow takes the opened study over (`take_planned(key)`, `key`
    being its experiment path and warehouse parameters); the caller closes it if the flow never ran (closing twice
    is harmless). None (nothing done) for a study without game workers: its plan stays the flow's."""
    study = Study(experiment, warehouse=warehouse, orchestrator="prefect", progress=progress, dask=dask,
                  started=started)
    if not study.uses_game_workers():
        return None
    with contextlib.ExitStack() as undo:
        undo.push(study.__exit__)
        study.__enter__()
        study.prepare()
        if study.shards.count or study.rule is not None:  # none for a plan with nothing to play
            study.spawn_game_workers()
        undo.pop_all()
    _PLANNED[key] = study
    return study


def take_planned(key: tuple[str, str | None]) -> Study | None:
    """The study `plan_before_flow` opened for these flow parameters, once."""
    return _PLANNED.pop(key, None)


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
