"""Policy games played a whole shard at a time in worker processes, for scripted studies at scale.

A game of policy players (`policy/...` in every seat) makes no call: it is pure CPU (the engine, the record, its
line, its rows), about half a millisecond, so one process tops out near 1,000 games/s end to end. Here each worker
plays a whole shard, writes its shard file itself (atomically, as the run would) and flattens its records into the
raw tables' Arrow columns; it sends back only those columns, the lines' checksums and what the ledger needs. The
parent keeps the plan, the budget guard, the progress bar, the summary and DuckDB (one writer), and lands the
columns as they come.

A worker plays one shard at a time, with the next one already queued in its pipe (`QUEUE_PER_WORKER`), and the
study keeps one more shard per worker in flight for the lander, so a worker waits neither for the run to read its
reply nor for the lander. A worker that dies fails the shards queued to it with `WorkerLost` (an infrastructure
fault: they are retried, and a file it may have written is landed idempotently by game id); it is replaced on the
next shard.
Workers exit when the parent closes their pipe, or dies. Started with "spawn" (see `study.workers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from mafiabench.play.runner import BackendPool, play_game
from mafiabench.record import Provenance, encode_record
from mafiabench.redact import known_secrets, secret_env
from mafiabench.study.design import PlannedGame
from mafiabench.study.spec import Experiment
from mafiabench.study.workers import WorkerLost, _picklable, ignore_ctrl_c, start_deaf
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import FlatBatch
from mafiabench.warehouse.sidecar import write_sidecar

# Below this many games to play, `processes = "auto"` keeps policy games in the run's own process: starting a
# worker (a fresh interpreter and its imports) costs about a second of CPU.
AUTO_SHARD_WORKERS_MIN_GAMES = 5_000


@dataclass(frozen=True)
class ShardWorkerConfig:
    """What a worker needs (pickled once, at spawn)."""

    experiment: Experiment
    raw: Path
    provenance: Provenance
    secret_envs: tuple[str, ...]  # names of the variables holding secrets: the worker scrubs their values too


@dataclass
class ShardPlayed:
    """A shard played: its file, its rows, and what the parent's ledger needs, counted per cell (the ledger adds
    a shard at once, not game by game)."""

    path: Path
    played: int
    cells: dict[str, tuple[int, list[tuple[str, str | None]]]]  # cell → (games played, (game id, error) of failed)
    batch: FlatBatch
    busy_s: float


def is_policy_only(specs: list[str]) -> bool:
    return bool(specs) and all(s.startswith("policy/") for s in specs)


# -- the worker's side ----------------------------------------------------------------------------------------------


def _worker_main(conn: Connection, config: ShardWorkerConfig) -> None:
    ignore_ctrl_c()  # Ctrl-C is the parent's: it stops sending shards
    landing.batch_gc()
    for name in config.secret_envs:
        secret_env(name)
    loop = asyncio.new_event_loop()
    models = config.experiment.model_settings()
    pool = BackendPool()
    while True:
        try:
            index, games = conn.recv()
        except (EOFError, OSError):  # the parent closed our pipe, or died
            return
        try:
            reply: tuple[str, Any] = ("ok", loop.run_until_complete(_play(config, models, pool, index, games)))
        except Exception as exc:
            reply = ("error", _picklable(exc))
        try:
            conn.send(reply)
        except OSError:
            return


async def _play(
    config: ShardWorkerConfig, models: dict[str, Any], pool: BackendPool, index: int, games: list[PlannedGame]
) -> ShardPlayed:
    t0 = time.perf_counter()
    entries = []
    cells: dict[str, tuple[int, list[tuple[str, str | None]]]] = {}
    secrets = known_secrets()  # once a shard: it reads the environment
    for g in games:
        rec = await play_game(g.spec(config.experiment, models), pool, provenance=config.provenance)
        entries.append(encode_record(rec, secrets))
        cell = (rec.design or {}).get("cell") or "?"
        n, failures = cells.get(cell) or (0, [])
        if rec.outcome.get("status") == "failed":
            failures.append((rec.game_id, rec.error))
        cells[cell] = (n + 1, failures)
    busy = time.perf_counter() - t0
    lines = [line for _, line in entries]
    path = landing.write_shard(lines, config.raw, index)
    batch = FlatBatch.of(entries, path=path, keep_lines=False)
    write_sidecar(path, lines, batch)  # the same rows as Parquet, for landing a backlog without parsing
    return ShardPlayed(path, len(entries), cells, batch, busy)


# -- the parent's side ----------------------------------------------------------------------------------------------


class _Worker:
    """A worker process and its pipe. Shards sent to it are played in the order sent, and their replies read in that
    order: each caller takes a ticket as it sends and reads when its turn comes."""

    def __init__(self, ctx: Any, config: ShardWorkerConfig, index: int) -> None:
        self.conn, theirs = ctx.Pipe(duplex=True)
        self.process = ctx.Process(
            target=_worker_main, args=(theirs, config), name=f"mafiabench-shard-worker-{index}", daemon=True
        )
        start_deaf(self.process)
        theirs.close()
        self.queued = 0  # shards handed to it and not answered yet (the pool's lock guards it)
        self.lost = False
        self._send_lock = threading.Lock()
        self._turn = threading.Condition()
        self._tickets = 0  # tickets handed out, in the order of sending
        self._serving = 0  # the ticket whose reply is read next

    def call(self, index: int, games: list[PlannedGame]) -> tuple[str, Any]:
        """Play a shard (blocking: run in a thread): ("ok", ShardPlayed) or ("error", the exception)."""
        error: BaseException | None = None
        with self._send_lock:
            ticket = self._tickets
            self._tickets += 1
            try:
                self.conn.send((index, games))  # waits in the pipe while the worker plays the shard before it
            except OSError as exc:
                error = exc
        with self._turn:
            while self._serving != ticket:
                self._turn.wait()
        try:
            if error is not None:
                raise error
            reply: tuple[str, Any] = self.conn.recv()
        except (EOFError, OSError) as exc:
            self.process.join(1.0)
            raise WorkerLost(
                f"{self.process.name} exited (code {self.process.exitcode}) while playing shard {index}"
            ) from exc
        finally:
            with self._turn:
                self._serving += 1
                self._turn.notify_all()
        return reply

    def close(self, timeout: float = 10.0) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


# Shards handed to one worker at a time: the next waits in its pipe while it plays the current one, so a worker
# never idles while the run reads its reply and sends another (about 7% of its time on a loaded machine).
QUEUE_PER_WORKER = 2


class ShardWorkerPool:
    """`processes` spawned workers; `play(index, games)` queues a shard to the least busy one (started on first
    use), up to `QUEUE_PER_WORKER` each."""

    def __init__(self, config: ShardWorkerConfig, processes: int) -> None:
        self.config = config
        self.processes = processes
        self._ctx = multiprocessing.get_context("spawn")
        self._live: list[_Worker] = []
        self.started: list[_Worker] = []  # every worker started, live or not (for tests and diagnostics)
        self._lock = threading.Lock()
        self._free: dict[int, asyncio.Semaphore] = {}  # per event loop (a semaphore is loop-bound)
        self._closed = False

    def _take(self) -> _Worker:
        with self._lock:
            worker = min(self._live, key=lambda w: w.queued, default=None)
            if worker is None or (worker.queued and len(self._live) < self.processes):
                worker = _Worker(self._ctx, self.config, len(self.started))
                self.started.append(worker)
                self._live.append(worker)
            worker.queued += 1
            return worker

    def _give_back(self, worker: _Worker, ok: bool) -> None:
        with self._lock:
            worker.queued -= 1
            if not ok and not worker.lost:  # it died: no more shards for it (those queued fail with WorkerLost)
                worker.lost = True
                self._live.remove(worker)
            if not (worker.lost or self._closed) or worker.queued:
                return
            if worker in self._live:
                self._live.remove(worker)
        worker.close(timeout=1.0)

    def _run(self, index: int, games: list[PlannedGame]) -> ShardPlayed:
        worker = self._take()
        try:
            kind, payload = worker.call(index, games)
        except BaseException:
            self._give_back(worker, False)
            raise
        self._give_back(worker, True)
        if kind == "ok":
            return payload  # type: ignore[no-any-return]
        raise payload

    async def play(self, index: int, games: list[PlannedGame]) -> ShardPlayed:
        free = self._free.setdefault(
            id(asyncio.get_running_loop()), asyncio.Semaphore(QUEUE_PER_WORKER * self.processes)
        )
        async with free:
            # Not cancellable half way: a cancelled shard's worker finishes it (well under a second), and the file
            # it writes is landed by the next run, idempotently.
            return await asyncio.shield(asyncio.to_thread(self._run, index, games))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [w for w in self._live if not w.queued]
            self._live = [w for w in self._live if w.queued]
        for w in idle:
            w.close()
