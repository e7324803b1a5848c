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
3. `land_shard()` loads a shard's records into DuckDB through the Study's lander (`study/lander.py`), the run's
   one writer. It opens DuckDB only while it lands (and while it plans and summarises), so `mafiabench query` and
   other readers get in between landings; a reader holding the file makes the lander wait for it, never fail.
4. `finish()` builds the run summary (games, calls, tokens, cost, wall time, achieved concurrency), records it in
   `raw_runs`, and prints it.

Model-call retries live in the backends; a game whose calls fail for good comes back as a failed record and is
landed as such. Only infrastructure faults (a full disk, a lost connection) fail a shard, and only those are retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mafiabench.backends.endpoints import EndpointConfig, aclose_clients
from mafiabench.play.runner import BackendPool
from mafiabench.prices import PriceTable, free_providers_of, load_prices
from mafiabench.protocols import rows_for_warehouse
from mafiabench.study.budget import BudgetGuard, landed_usage, require_prices
from mafiabench.study.design import cell_fingerprints, expand_cells, slug
from mafiabench.study.executors import ShardExecutor, shard_processes, uses_game_workers, uses_http
from mafiabench.study.lander import Lander
from mafiabench.study.plan import Shard, ShardPlan, ShardResult
from mafiabench.study.protocol import protocol_card
from mafiabench.study.shard_workers import QUEUE_PER_WORKER, is_policy_only
from mafiabench.study.spec import Experiment
from mafiabench.study.summary import RunSummary, injected_faults
from mafiabench.study.waves import Backlog, LandFn, PlayFn, WaveScheduler, with_local_retries
from mafiabench.study.workers import lean_gc
from mafiabench.warehouse import builds, landing
from mafiabench.warehouse.raw import LoadResult, check_cell_fingerprints, record_protocol_card

log = logging.getLogger(__name__)


class Study:
    """One run of an experiment against one warehouse (not a dataclass on purpose: Prefect passes it to tasks as
    an opaque object instead of walking its fields). Its lifecycle is here, and it owns the lander (`study/lander.py`);
    once planned, it makes the `ShardExecutor` that plays shards (`study/executors.py`) and the `WaveScheduler` that
    hands them out (`study/waves.py`), handing the scheduler the executor's `play` and the lander's `land`."""

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
        self.uses_http = uses_http(experiment.agent_specs(), self.endpoints)
        self.processes = experiment.concurrency.worker_processes(self.uses_http)
        self.policy_only = is_policy_only(experiment.agent_specs())
        self.rule = experiment.stopping.rule() if experiment.stopping is not None else None
        self.summary = RunSummary(
            run_id=f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.getpid()}-{uuid.uuid4().hex[:6]}",
            experiment=experiment.name,
            orchestrator=orchestrator,
            warehouse=str(self.warehouse),
            started_at=datetime.now(UTC) if started is None else datetime.fromtimestamp(started, UTC),
            price_version=self.prices.version,
            budget={k: v for k, v in experiment.budget.model_dump().items() if v is not None},
            description=experiment.description,
            expected=injected_faults(self.endpoints),
        )
        self.lander = Lander(self.warehouse, experiment.name, small_groups=not self.policy_only)
        self.shards = ShardPlan(0, 0, lambda: iter(()))
        self.shard_processes = 1  # policy studies: processes playing whole shards (decided by the plan)
        self.guard: BudgetGuard | None = None
        self.vacuum_due = False  # DuckDB's vacuum due at the next build's publish (the plan reads it)
        self.rehearsal_due = False  # whether the next build's dbt could be rehearsed (the plan reads it)
        # Made by the plan: what plays the shards, and what hands them out.
        self.executor: ShardExecutor | None = None
        self.scheduler: WaveScheduler | None = None
        self._lock_cm: Any = None
        self._bar: Any = None

    @property
    def planned(self) -> bool:
        """Whether `prepare()` ran (a study planned before the flow is not planned again)."""
        return self.executor is not None

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def __enter__(self) -> Study:
        if self.lander.open:  # opened and planned before the flow (`plan_early`): the flow's `with` takes it over
            return self
        self._lock_cm = landing.warehouse_lock(self.warehouse, what=f"mafiabench run {self.exp.name}")
        self._lock_cm.__enter__()
        self.lander.open = True
        try:
            with self.connection(hold=True) as con:  # held for the plan that follows: one open, not two
                landing.ensure_runs_table(con)
            landing.remove_partial(self.raw)
        except BaseException:
            self.lander.open = False
            self._lock_cm.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.lander.open:  # closed already (the flow closed a study planned before it)
            return
        try:
            if self.executor is not None:
                self.executor.close_workers()
            if self._bar is not None:
                self._bar.close()
            self.lander.close()
        finally:
            self.lander.open = False
            self._lock_cm.__exit__(*exc)

    def connection(self, *, hold: bool = False) -> contextlib.AbstractContextManager[Any]:
        """DuckDB for one step, closed after it so readers get in between (`Lander.connection`)."""
        return self.lander.connection(hold=hold)

    @property
    def con(self) -> Any:
        """The open connection of the current step (inside `with study.connection()`)."""
        return self.lander.con

    def uses_game_workers(self) -> bool:
        """Whether games are played one at a time in worker processes (known before the plan: policy studies,
        whose shards may go whole to shard workers, never use them)."""
        return uses_game_workers(self.processes, self.shard_processes, policy_only=self.policy_only,
                                 dask_address=self.dask_address)

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
        cells = expand_cells(exp)
        s = self.summary
        s.games_planned = sum(c.games for c in cells)
        loaded = landing.land_pending(self.con, self.raw, exp.name)
        s.games_loaded_from_raw = loaded.inserted + loaded.replaced
        check_cell_fingerprints(self.con, cell_fingerprints(exp, cells), source=f"experiment {exp.name!r}")
        card = protocol_card(exp)
        record_protocol_card(self.con, exp.name, rows_for_warehouse(card) if card is not None else [])
        backlog = Backlog(exp, cells)
        finished = backlog.mark_finished(self.con)
        s.games_already_landed = max(0, finished - s.games_loaded_from_raw)
        s.games_to_play = s.games_planned - finished
        if self.rule is not None:  # played in waves: the total grows as waves are added
            s.games_to_play = 0
        self.guard = BudgetGuard(exp.budget, landed_usage(self.con, exp.name, self.prices))
        s.budget_spent = self.guard.spent
        self.vacuum_due = builds.vacuum_due(self.con)  # run by the run while its games play (`fan_out`)
        # The next build's dbt, rehearsed while the games play (`fan_out`); a run with none to play has no use for it.
        self.rehearsal_due = bool(s.games_to_play or self.rule is not None) and _rehearsal_due(self.con)
        self.shards = ShardPlan(math.ceil(s.games_to_play / exp.shard_size), s.games_to_play, backlog.shards)
        self.shard_processes = shard_processes(
            exp, policy_only=self.policy_only, dask_address=self.dask_address,
            games=s.games_planned if self.rule is not None else s.games_to_play,
        )
        landing.record_run(self.con, s.to_row())
        if self.progress is not False and (s.games_to_play or self.rule is not None):
            from mafiabench.study.progress import GameProgress

            self._bar = GameProgress(s.games_to_play, exp.name[:30], enabled=self.progress)
        self.executor = ShardExecutor(
            exp, models=self.models, prices=self.prices, endpoints=self.endpoints, raw=self.raw, summary=s,
            guard=self.guard, bar=self._bar, processes=self.processes, shard_processes=self.shard_processes,
            policy_only=self.policy_only, dask_address=self.dask_address,
        )
        self.scheduler = WaveScheduler(exp, backlog, s, rule=self.rule, tally=self.lander.tally,
                                       limit=self.shards_in_flight(), bar=self._bar)
        return self.shards

    def shards_in_flight(self) -> int:
        """Enough shards to keep every game slot busy, plus slack for shards finishing their tail or landing."""
        if self.shard_processes > 1:  # shards queued to each worker, and one more each landing
            return (QUEUE_PER_WORKER + 1) * self.shard_processes
        known = self.exp.shard_size if self.rule is not None else self.shards.games  # waves: sized as they come
        per = max(1, min(self.exp.shard_size, known or 1))
        return max(2, 2 * math.ceil(self.exp.concurrency.games / per))

    def spawn_game_workers(self) -> None:
        """Spawn a planned study's game workers now, without waiting for them (`ShardExecutor.spawn_game_workers`)."""
        assert self.executor is not None, "plan the study first (prepare)"
        self.executor.spawn_game_workers()

    def head_start(self) -> int:
        """Start the plan's first games in the spawned workers now, before its shards are handed out
        (`ShardExecutor.head_start`: as many as are in flight at once); none for a study played in waves, whose
        games are known wave by wave. Returns how many started."""
        assert self.executor is not None, "plan the study first (prepare)"
        if self.rule is not None:
            return 0
        return self.executor.head_start(g for shard in self.shards for g in shard.games)

    # -- 2. play ----------------------------------------------------------------------------------------------------
    async def play_shard(self, shard: Shard) -> ShardResult:
        """Play a shard's games concurrently and write their records as one shard file (`ShardExecutor`)."""
        assert self.executor is not None, "plan the study first (prepare)"
        return await self.executor.play_shard(shard)

    async def fan_out(
        self, play: PlayFn | None = None, land: LandFn | None = None, shards: Iterable[Shard] | None = None
    ) -> list[ShardResult]:
        """Play every shard (default: the plan's; with [stopping], wave after wave until each cell's interval is
        narrow enough) and land each as it finishes, a bounded number at a time (`WaveScheduler`). `play` and `land`
        default to the executor's, retried on infrastructure faults, and the lander's; the flow passes its tasks."""
        executor, scheduler = self.executor, self.scheduler
        assert executor is not None and scheduler is not None, "plan the study first (prepare)"
        play_fn = play or with_local_retries(executor.play_shard, self.shard_retries, self.shard_retry_delays)
        land_fn = land or self.land_shard
        playing = bool(self.shards.count or self.rule is not None or shards is not None)  # none: nothing to play
        if playing:
            await executor.start()
        # The vacuum the next build would run, if due, now, while the games play (`Lander.compact`).
        compacting = asyncio.create_task(self.lander.compact()) if playing and self.vacuum_due else None
        # And the next build's dbt, rehearsed once games landed, so that the build replays it (`_rehearse`).
        rehearsing = None
        if playing and self.rehearsal_due:
            self.lander.landed_games = asyncio.Event()  # before any landing
            rehearsing = asyncio.create_task(self._rehearse())
        t0 = min(time.perf_counter(), executor.head_started or math.inf)  # from the first game started ahead
        results: list[ShardResult] = []
        # calls over HTTP allocate much and briefly: a lean collector while they run (workers.lean_gc)
        with lean_gc() if self.uses_http else contextlib.nullcontext():
            try:
                if self.rule is None or shards is not None:
                    results = await scheduler.fan(self.shards if shards is None else shards, play_fn, land_fn)
                else:
                    guard = self.guard
                    results = await scheduler.waves(play_fn, land_fn, lambda: guard is not None and guard.stopped)
            finally:
                self.summary.play_wall_s = time.perf_counter() - t0
                if compacting is not None:
                    await self._compacted(compacting)
                if rehearsing is not None:  # a rehearsal never lengthens a run: one not done yet is stopped
                    rehearsing.cancel()
                    await asyncio.gather(rehearsing, return_exceptions=True)
                # Landed something: let go of the warehouse (its checkpoint, a few tenths of a second after a run
                # of model calls) while the workers stop, not before.
                done = await asyncio.gather(
                    *([asyncio.to_thread(self.lander.release)] if playing else []), _stop(executor),
                    return_exceptions=True,
                )
                for outcome in done:
                    if isinstance(outcome, BaseException):
                        raise outcome
        if self.guard is not None and self.guard.stopped:
            self.summary.budget_stopped = True
        results.sort(key=lambda r: r.index)
        return results

    async def _compacted(self, compacting: asyncio.Task[float | None]) -> None:
        """Wait for the run's vacuum (a landing waited for it already unless none came) and say what it cost; it
        is maintenance the next build would do otherwise, so its failure only leaves that to the build."""
        try:
            seconds = await compacting
        except Exception as exc:  # the build's publish vacuums instead
            log.debug("the run's vacuum did not run: %s", exc)
            return
        if seconds is not None:
            self.summary.after.append(
                f"compacted the warehouse (DuckDB's vacuum, due at the next build's publish) in {seconds:.1f} s "
                "while the games played")

    async def _rehearse(self) -> None:
        """Once a landing inserted games: the next build's dbt run and test, rehearsed on an empty copy of the
        warehouse in a process of its own, which keeps their records on this machine (`transform.build.rehearsal`):
        the first increment after a whole build then replays them rather than paying dbt. Its failure only leaves
        dbt to the build; cancelled (the games done first), its process is stopped."""
        from mafiabench import scratch
        from mafiabench.transform.build import rehearsal

        assert self.lander.landed_games is not None
        await self.lander.landed_games.wait()
        proc = None
        with scratch.folder("rehearsal") as folder:
            try:
                if not await self.lander.rehearse(folder / "copy"):
                    return
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "mafiabench.transform.build.rehearsal", str(folder / "copy"),
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                out, err = await proc.communicate()
                done = rehearsal.outcome(out.decode(errors="replace")) if proc.returncode == 0 else None
                if done is None:
                    log.debug("the rehearsal of the next build's dbt failed: %s", err.decode(errors="replace")[-2000:])
                elif done.recorded:
                    self.summary.after.append(
                        f"rehearsed the next build's dbt {' and '.join(done.recorded)} on an empty copy of the "
                        f"warehouse in {done.seconds:.1f} s while the games played: that build replays them")
            except Exception as exc:  # the build runs dbt instead
                log.debug("the rehearsal of the next build's dbt did not run: %s", exc)
            finally:
                if proc is not None and proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    # -- 3. land --------------------------------------------------------------------------------------------------
    async def land_shard(self, result: ShardResult) -> LoadResult:
        """Load a shard's records into DuckDB off the event loop, one shard at a time (the lander's)."""
        return await self.lander.land(result)

    # -- 4. summary ----------------------------------------------------------------------------------------------
    def finish(self) -> RunSummary:
        s = self.summary
        s.finished_at = datetime.now(UTC)
        s.wall_s = time.perf_counter() - self._t0
        if s.play_wall_s > 0 and self.executor is not None:
            s.games_concurrency = self.executor.busy_games_s / s.play_wall_s
            s.calls_concurrency = self.executor.busy_calls_s / s.play_wall_s
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


async def _stop(executor: ShardExecutor) -> None:
    """The SDK clients of this loop closed, then the executor's workers stopped."""
    await aclose_clients()
    await executor.stop()


def plan_early(study: Study) -> bool:
    """For a study played in worker processes: open it and plan it now, and if it has games to play spawn its
    workers and hand them its first games, so that they start, import their modules and SDKs (about 0.7 s of CPU
    each) and play while the command imports Prefect (another second) and starts its flow, not after it. The
    command then hands the opened study to the flow, whose `with` takes it over and whose shards wait for the games
    started ahead; the command closes it if the flow never ran (closing twice is harmless: games started ahead are
    abandoned, as at a Ctrl-C). False (nothing done) for a study without game workers: its plan stays the flow's."""
    if not study.uses_game_workers():
        return False
    with contextlib.ExitStack() as undo:
        undo.push(study.__exit__)
        study.__enter__()
        study.prepare()
        if study.shards.count or study.rule is not None:  # none for a plan with nothing to play
            study.spawn_game_workers()
            study.head_start()
        undo.pop_all()
    return True


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


def _rehearsal_due(con: Any) -> bool:
    from mafiabench.transform.build import rehearsal

    return rehearsal.due(con)
