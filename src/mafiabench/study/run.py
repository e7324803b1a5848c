"""Running an experiment: plan, skip what is landed, play shards of games concurrently, land, summarise.

All the logic of a run lives here and is tested without Prefect; `flows/study_flow.py` only wraps `play_shard` and
`land_shard` as Prefect tasks and calls the same steps. One `Study` is one run against one warehouse:

1. `prepare()` takes the warehouse lock, expands the design, loads raw files that reached the landing folder but not
   DuckDB (a crash between the two), and shards the games still missing (failed games are replayed).
2. `play_shard()` plays a shard's games concurrently on the running event loop (or, with `concurrency.processes`
   above 1, in worker processes: `mafiabench.study.workers`), under a global games-in-flight limit, per-provider call
   limits (`BackendPool`) and the budget guard, and writes each record atomically to the raw folder. It never
   touches DuckDB, and it is idempotent: a retried shard reuses the records it already wrote.
3. `land_shard()` loads a shard's records into DuckDB; the Study is the run's one writer.
4. `finish()` builds the run summary (games, calls, tokens, cost, wall time, achieved concurrency), records it in
   `raw_runs`, and prints it.

Model-call retries live in the backends; a game whose calls fail for good comes back as a failed record and is
landed as such. Only infrastructure faults (a full disk, a lost connection) fail a shard, and only those are retried.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mafiabench.backends.registry import EndpointConfig, aclose_clients
from mafiabench.errors import UserError
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.prices import PriceTable, Usage, free_providers_of, game_usage, load_prices
from mafiabench.record import GameRecord, Provenance, git_commit
from mafiabench.study.design import Cell, PlannedGame, expand_cells, iter_games, slug
from mafiabench.study.spec import Budget, Experiment
from mafiabench.study.workers import WorkerConfig, WorkerPool
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import LoadResult, connect

# -- plan pieces --------------------------------------------------------------------------------------------------


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

    __slots__ = ("index", "not_started", "records", "reused", "wall_s")

    def __init__(self, index: int) -> None:
        self.index = index
        self.records: list[GameRecord] = []
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


# -- the budget guard ---------------------------------------------------------------------------------------------


class BudgetGuard:
    """Stops starting games once spent + what the games in flight are expected to spend reaches the cap.

    `spent` counts every landed game of the experiment (earlier runs included) and each game of this run as it
    finishes; a game in flight is expected to cost the mean of the finished ones. So the overshoot is bounded by the
    games in flight whose cost exceeds the mean, and no game is started once the cap is reached.
    """

    def __init__(self, budget: Budget, spent: Usage) -> None:
        self.budget = budget
        self.spent = Usage()
        self.spent.add(spent)
        self._finished_games = max(spent.games, 0)
        self.in_flight = 0
        self.stopped = False

    def _mean(self) -> tuple[float, float]:
        n = self._finished_games
        if n <= 0:
            return 0.0, 0.0
        return self.spent.tokens / n, self.spent.cost_usd / n

    def _reached(self, tokens: float, usd: float) -> bool:
        b = self.budget
        return (b.max_tokens is not None and tokens >= b.max_tokens) or (b.max_usd is not None and usd >= b.max_usd)

    def try_start(self) -> bool:
        if not self.budget.active:
            self.in_flight += 1
            return True
        mean_tokens, mean_usd = self._mean()
        ahead = self.in_flight
        if self._reached(self.spent.tokens + ahead * mean_tokens, self.spent.cost_usd + ahead * mean_usd):
            self.stopped = True
            return False
        self.in_flight += 1
        return True

    def finish(self, usage: Usage | None) -> None:
        self.in_flight -= 1
        if usage is not None:
            self.spent.add(usage)
            self._finished_games += 1


# -- the summary ----------------------------------------------------------------------------------------------------


@dataclass
class RunSummary:
    run_id: str
    experiment: str
    orchestrator: str
    warehouse: str
    started_at: datetime
    finished_at: datetime | None = None
    wall_s: float = 0.0
    play_wall_s: float = 0.0
    games_planned: int = 0
    games_already_landed: int = 0
    games_loaded_from_raw: int = 0
    games_to_play: int = 0
    games_played: int = 0
    games_done: int = 0
    games_failed: int = 0
    games_not_started: int = 0
    budget_stopped: bool = False
    shard_errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    per_cell: dict[str, Usage] = field(default_factory=dict)
    per_model: dict[str, Usage] = field(default_factory=dict)
    budget_spent: Usage = field(default_factory=Usage)
    budget: dict[str, Any] = field(default_factory=dict)
    games_concurrency: float = 0.0
    calls_concurrency: float = 0.0
    price_version: str = ""
    failures: list[tuple[str, str]] = field(default_factory=list)
    description: str = ""

    @property
    def status(self) -> str:
        if self.finished_at is None:
            return "running"
        if self.shard_errors:
            return "failed"
        if self.budget_stopped:
            return "budget-stopped"
        return "completed"

    @property
    def games_missing(self) -> int:
        """Planned games neither landed finished nor failed after this run (budget, shard errors)."""
        return self.games_to_play - self.games_played

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "experiment": self.experiment,
            "orchestrator": self.orchestrator,
            "warehouse": self.warehouse,
            "status": self.status,
            "started_at": self.started_at.isoformat(timespec="seconds"),
            "finished_at": self.finished_at.isoformat(timespec="seconds") if self.finished_at else None,
            "wall_s": round(self.wall_s, 3),
            "play_wall_s": round(self.play_wall_s, 3),
            "games": {
                "planned": self.games_planned,
                "already_landed": self.games_already_landed,
                "loaded_from_raw": self.games_loaded_from_raw,
                "to_play": self.games_to_play,
                "played": self.games_played,
                "done": self.games_done,
                "failed": self.games_failed,
                "not_started": self.games_not_started,
            },
            "budget_stopped": self.budget_stopped,
            "budget": {**self.budget, "spent": self.budget_spent.to_dict()},
            "shard_errors": self.shard_errors,
            "usage": self.usage.to_dict(),
            "per_cell": {k: v.to_dict() for k, v in sorted(self.per_cell.items())},
            "per_model": {k: v.to_dict() for k, v in sorted(self.per_model.items())},
            "games_concurrency": round(self.games_concurrency, 2),
            "calls_concurrency": round(self.calls_concurrency, 2),
            "price_version": self.price_version,
            "failures": [{"game_id": g, "error": e} for g, e in self.failures],
        }

    def to_row(self) -> dict[str, Any]:
        import json

        u = self.usage
        return {
            "run_id": self.run_id,
            "experiment": self.experiment,
            "orchestrator": self.orchestrator,
            "status": self.status,
            "started_at": self.started_at.replace(tzinfo=None),
            "finished_at": self.finished_at.replace(tzinfo=None) if self.finished_at else None,
            "wall_s": self.wall_s,
            "games_planned": self.games_planned,
            "games_already_landed": self.games_already_landed,
            "games_loaded_from_raw": self.games_loaded_from_raw,
            "games_to_play": self.games_to_play,
            "games_played": self.games_played,
            "games_done": self.games_done,
            "games_failed": self.games_failed,
            "games_not_started": self.games_not_started,
            "budget_stopped": self.budget_stopped,
            "calls": u.calls,
            "failed_calls": u.failed_calls,
            "format_failures": u.format_failures,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cached_tokens": u.cached_tokens,
            "cost_usd": u.cost_usd,
            "unpriced_models": sorted(u.unpriced),
            "price_version": self.price_version,
            "games_concurrency": self.games_concurrency,
            "calls_concurrency": self.calls_concurrency,
            "shard_errors": len(self.shard_errors),
            "summary_json": json.dumps(self.to_dict(), sort_keys=True),
        }

    # -- rendering ---------------------------------------------------------------------------------------------
    def _headline(self) -> list[tuple[str, str]]:
        u = self.usage
        cost = f"${u.cost_usd:,.4f}" + (f" (+ unpriced: {', '.join(sorted(u.unpriced))})" if u.unpriced else "")
        rows = [
            ("experiment", self.experiment),
            ("status", self.status),
            ("games planned", f"{self.games_planned:,}"),
            ("skipped (already landed)", f"{self.games_already_landed:,}"),
            ("loaded from raw folder", f"{self.games_loaded_from_raw:,}"),
            ("played", f"{self.games_played:,} ({self.games_done:,} done, {self.games_failed:,} failed)"),
            ("not started (budget)", f"{self.games_not_started:,}"),
            (
                "model calls",
                f"{u.calls:,} ({u.failed_calls:,} failed, {u.format_failures:,} format failures, "
                f"{u.attempts - u.calls:,} retries)",
            ),
            ("tokens", f"{u.input_tokens:,} in ({u.cached_tokens:,} cached) + {u.output_tokens:,} out"),
            ("cost", f"{cost}  [prices {self.price_version}]"),
            ("wall time", f"{self.wall_s:.1f} s (playing {self.play_wall_s:.1f} s)"),
            (
                "achieved concurrency",
                f"{self.games_concurrency:.1f} games, {self.calls_concurrency:.1f} calls in flight",
            ),
        ]
        if self.budget:
            spent = self.budget_spent
            cap = ", ".join(
                f"${v:,.2f}" if k == "max_usd" else f"{v:,} tokens" for k, v in sorted(self.budget.items())
            )
            rows.append(
                (
                    "budget",
                    f"cap {cap}; the experiment has spent {spent.tokens:,} tokens, ${spent.cost_usd:,.4f}"
                    + (" — STOPPED at the cap" if self.budget_stopped else ""),
                )
            )
        if self.shard_errors:
            rows.append(("shard errors", f"{len(self.shard_errors)}: {self.shard_errors[0][:200]}"))
        return rows

    def _cell_rows(self, limit: int) -> list[tuple[str, Usage]]:
        rows = sorted(self.per_cell.items())
        return rows[:limit]

    def text(self, max_cells: int = 30) -> str:
        lines = [f"Run {self.run_id} — {self.warehouse}"]
        width = max(len(k) for k, _ in self._headline())
        lines += [f"  {k:<{width}}  {v}" for k, v in self._headline()]
        if self.per_cell:
            lines.append("  per cell (this run):")
            for name, u in self._cell_rows(max_cells):
                lines.append(
                    f"    {name[:60]:<60} {u.games:>6} games {u.failed_games:>4} failed {u.calls:>7} calls "
                    f"{u.tokens:>10,} tok ${u.cost_usd:,.4f}"
                )
            if len(self.per_cell) > max_cells:
                lines.append(f"    ... and {len(self.per_cell) - max_cells} more cells")
        if self.failures:
            lines.append("  failed games (first few):")
            for gid, err in self.failures[:5]:
                lines.append(f"    {gid}: {err.splitlines()[0][:160]}")
        return "\n".join(lines)

    def markdown(self, max_cells: int = 200) -> str:
        def esc(s: str) -> str:
            return s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")

        out = [f"# Run `{self.run_id}`", "", esc(self.description), "", f"Warehouse: `{self.warehouse}`", ""]
        out += ["| | |", "|---|---|"]
        out += [f"| {esc(k)} | {esc(v)} |" for k, v in self._headline()]
        if self.per_model:
            out += [
                "",
                "## Per model",
                "",
                "| model | calls | failed | format failures | input | cached | output | USD |",
                "|---|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for name, u in sorted(self.per_model.items()):
                usd = "unpriced" if u.unpriced else f"{u.cost_usd:.4f}"
                out.append(
                    f"| {esc(name)} | {u.calls} | {u.failed_calls} | {u.format_failures} | {u.input_tokens} | "
                    f"{u.cached_tokens} | {u.output_tokens} | {usd} |"
                )
        if self.per_cell:
            out += [
                "",
                "## Per cell",
                "",
                "| cell | games | failed | calls | tokens | USD |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            for name, u in self._cell_rows(max_cells):
                out.append(
                    f"| {esc(name)} | {u.games} | {u.failed_games} | {u.calls} | {u.tokens} | {u.cost_usd:.4f} |"
                )
        if self.failures:
            out += ["", "## Failed games (first 20)", ""]
            out += [f"- `{gid}`: {esc(err.splitlines()[0][:200])}" for gid, err in self.failures[:20]]
        return "\n".join(out) + "\n"


# -- the study ----------------------------------------------------------------------------------------------------

PlayFn = Callable[["Study", Shard], Awaitable[ShardResult]]
LandFn = Callable[["Study", ShardResult], Awaitable[Any]]


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
        try:
            self._con = connect(self.warehouse)
            landing.ensure_runs_table(self._con)
            landing.remove_partial(self.raw)
        except BaseException:
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
            self._lock_cm.__exit__(*exc)

    @property
    def con(self) -> Any:
        if self._con is None:
            raise RuntimeError("Study is not open: use `with Study(...) as study:`")
        return self._con

    # -- 1. plan --------------------------------------------------------------------------------------------------
    def prepare(self) -> list[Shard]:
        """Expand, load landed-but-not-loaded raw files, skip landed games, shard the rest."""
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
        todo = interleave(g for g in plan if g.game_id not in after.finished)
        s.games_to_play = len(todo)
        self.guard = BudgetGuard(exp.budget, self._landed_usage())
        s.budget_spent = self.guard.spent
        self.shards = shard_games(todo, exp.shard_size)
        landing.record_run(self.con, s.to_row())
        if self.progress is not False and todo:
            from tqdm import tqdm

            self._bar = tqdm(
                total=len(todo),
                unit="game",
                desc=exp.name[:30],
                disable=None if self.progress is None else not self.progress,
                dynamic_ncols=True,
                file=sys.stderr,
            )
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
        if c.processes == 1:
            return play_game(spec, pool, provenance=self._provenance)
        if self._workers is None:
            self._workers = WorkerPool(
                WorkerConfig(
                    endpoints=self.endpoints,
                    limits=dict(c.providers),
                    default_limit=c.default_provider,
                    cache_dir=self.exp.cache_dir,
                    provenance=self._provenance,
                    processes=c.processes,
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
            self._bar.update(1)
            u = self.summary.usage
            self._bar.set_postfix(
                failed=self.summary.games_failed, tok=f"{u.tokens:,}", usd=f"{u.cost_usd:.4f}", refresh=False
            )

    # -- 3. land --------------------------------------------------------------------------------------------------
    async def land_shard(self, result: ShardResult) -> LoadResult:
        """Load a shard's records into DuckDB off the event loop, one shard at a time (one writer)."""
        if self._land_lock is None:
            self._land_lock = asyncio.Lock()
        async with self._land_lock:
            return await asyncio.to_thread(self._land_sync, result.records)

    def _land_sync(self, records: list[GameRecord]) -> LoadResult:
        cur = self.con.cursor()
        try:
            return landing.land(cur, records)
        finally:
            cur.close()

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
        landing.record_run(self.con, s.to_row())
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


# -- estimate (preview) -------------------------------------------------------------------------------------------


@dataclass
class CellEstimate:
    cell: Cell
    games: int
    to_play: int
    calls_per_game: float
    usage_per_game: Usage
    per_model_per_game: dict[str, Usage]

    def scaled(self, n: int) -> Usage:
        u = Usage()
        p = self.usage_per_game
        u.calls = round(p.calls * n)
        u.input_tokens = round(p.input_tokens * n)
        u.output_tokens = round(p.output_tokens * n)
        u.cost_usd = p.cost_usd * n
        u.unpriced = set(p.unpriced)
        u.games = n
        return u


@dataclass
class Estimate:
    """What a run would play and spend, before anything is spent."""

    experiment: Experiment
    cells: list[CellEstimate]
    samples: int
    price_version: str
    landed: int | None  # games already landed, None when the warehouse could not be read

    @property
    def games(self) -> int:
        return sum(c.games for c in self.cells)

    @property
    def to_play(self) -> int:
        return sum(c.to_play for c in self.cells)

    def total(self, *, remaining: bool = True) -> Usage:
        t = Usage()
        for c in self.cells:
            t.add(c.scaled(c.to_play if remaining else c.games))
        return t

    def per_model(self, *, remaining: bool = True) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        for c in self.cells:
            n = c.to_play if remaining else c.games
            for spec, u in c.per_model_per_game.items():
                agg = out.setdefault(spec, Usage())
                agg.calls += round(u.calls * n)
                agg.input_tokens += round(u.input_tokens * n)
                agg.output_tokens += round(u.output_tokens * n)
                agg.cost_usd += u.cost_usd * n
                agg.unpriced |= u.unpriced
        return out


def _scale(u: Usage, k: float) -> Usage:
    return Usage(
        calls=round(u.calls * k),
        input_tokens=round(u.input_tokens * k),
        output_tokens=round(u.output_tokens * k),
        cost_usd=u.cost_usd * k,
        unpriced=set(u.unpriced),
    )


def estimate_plan(
    experiment: Experiment,
    *,
    warehouse: str | Path | None = None,
    samples: int = 3,
    prices: PriceTable | None = None,
) -> Estimate:
    """Calls, tokens and cost per cell, from a few sample games per cell played against an in-process fake of
    every model (no key, no network, no money). Input tokens are the fake's estimate of the real prompts (about
    four characters per token); output tokens count each call at its token cap when one is set (what a reply may
    cost at most), else the fake's reply length; cached tokens are taken as zero. So the figure is an upper bound
    for capped models and a rough guide for uncapped (reasoning) ones."""
    exp = experiment
    endpoints = exp.endpoint_configs()
    table = (prices or load_prices()).with_overrides(exp.prices, free_providers_of(endpoints))
    cells = expand_cells(exp)
    plan = list(iter_games(exp, cells))
    landed = _landed_ids_readonly(exp.warehouse_path(warehouse), [g.game_id for g in plan])
    by_cell: dict[str, list[PlannedGame]] = {}
    for g in plan:
        by_cell.setdefault(g.cell.name, []).append(g)
    providers = {s.split("/", 1)[0] for s in exp.agent_specs() if not s.startswith(("policy/", "human/"))}
    fake_endpoints = {p: EndpointConfig(p, "fake") for p in providers}
    models = exp.model_settings()

    async def sample() -> list[CellEstimate]:
        pool = BackendPool(endpoints=fake_endpoints)
        out: list[CellEstimate] = []
        for cell in cells:
            games = by_cell[cell.name]
            picked = games[: max(1, samples)]
            recs = await asyncio.gather(*(play_game(g.spec(exp, models), pool) for g in picked))
            per_game = Usage()
            per_model: dict[str, Usage] = {}
            for rec in recs:
                for call in rec.calls:
                    cap = ((call.get("request") or {}).get("settings") or {}).get("max_tokens")
                    if cap is not None:
                        call["output_tokens"] = int(cap)
                    call["cached_tokens"] = 0
                total, pm = game_usage(rec, table)
                per_game.add(total)
                for spec, u in pm.items():
                    per_model.setdefault(spec, Usage()).add(u)
            k = 1.0 / len(recs)
            to_play = len(games) if landed is None else sum(1 for g in games if g.game_id not in landed)
            out.append(
                CellEstimate(
                    cell=cell,
                    games=len(games),
                    to_play=to_play,
                    calls_per_game=per_game.calls * k,
                    usage_per_game=_scale(per_game, k),
                    per_model_per_game={s: _scale(u, k) for s, u in per_model.items()},
                )
            )
        return out

    return Estimate(exp, asyncio.run(sample()), samples, table.version, None if landed is None else len(landed))


def _landed_ids_readonly(warehouse: Path, ids: list[str]) -> set[str] | None:
    """Finished games already in the warehouse, read-only; None if there is none or a run holds it."""
    if not warehouse.exists():
        return set()
    try:
        import duckdb

        con = duckdb.connect(str(warehouse), read_only=True)
    except Exception:
        return None
    try:
        if not con.execute("select count(*) from information_schema.tables where table_name = 'raw_games'").fetchall()[
            0
        ][0]:
            return set()
        return landing.landing_state(con, ids).finished
    finally:
        con.close()
