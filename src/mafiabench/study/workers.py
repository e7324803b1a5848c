"""Games played in worker processes (`concurrency.processes > 1`), for when one event loop's CPU is the limit.

Over HTTP, the model SDK costs about 0.8-1 ms of CPU per call (its request path over aiohttp;
benchmarks/bench_client_cpu.py), plus our own work per call (about as much again in a whole study), so one event loop
tops out at a few hundred calls/s whatever the concurrency
(`concurrency.processes = "auto"` sizes the workers to the cores when many games are in flight over HTTP).
With `processes = N` the study spawns N workers, each with its own event loop and its own
`BackendPool` (SDK clients are loop-bound), and hands them games one at a time. The parent keeps everything else:
the plan, the games-in-flight limit and the budget guard (so it alone decides which game starts), the raw files and
DuckDB (one writer), the progress bar and the summary. A worker sends each record back as a dict.

How the limits are shared: `concurrency.games` stays one global limit, enforced in the parent, and each game goes
to the worker with the fewest in flight, so each carries about games / N. Each provider's call limit (and
`default_provider`) is split evenly: a limit of 64 over 3 workers gives 22, 21 and 21 (at least 1 each), so the
run never has more calls in flight to a provider than the experiment allows.

A run starts its workers before its first game (`WorkerPool.start`) and waits until each has imported our modules and
the provider modules of the study's models (about 0.3 s of CPU each), so the games do not queue behind them; the SDK
itself (openai or anthropic with its aiohttp transport, about 0.4 s more) is imported at a worker's first call, as
the SDKs are imported lazily (issue 31 item 2): importing it before the worker says it is ready was measured no
faster once the first games start ahead (below; issue 37 item 5: 0.6 s slower in four balanced pairs at load 3-5);
`mafiabench run` spawns them (`WorkerPool.spawn`) before it imports Prefect, so that both start at once, and none
for a plan with nothing to play; it also hands them its first games then (`WorkerPool.head_start`: a thread sends
them once the workers are ready), so that they play while Prefect is imported and the flow starts, and the flow's
shards wait for those games' records instead of starting them. The SDKs are imported by the workers only: the
run's own process checks the specs without them. Closing the pool tells every worker to stop, then waits for them
together; a worker exits with `os._exit` once its replies are sent and its clients closed (the interpreter's teardown
of the SDKs' modules took about half a second a worker).

A worker that dies fails the games it had in flight with `WorkerLost`, a `ConnectionError`, so their shard is
retried like any infrastructure fault; the dead worker is replaced on the next game. A failing shard cancels its other
games and waits for each one's reply; a worker answers every game it was handed, one cancelled before its task first
ran included (`_serve`'s `unstarted`: a run once waited for ever there). A worker exits when the parent
closes its pipe, or when the parent dies (the kernel closes it), so a killed run leaves no worker behind.

Workers are started with "spawn", which re-imports the main module: a script that runs a study with
`processes > 1` needs the usual `if __name__ == "__main__":` guard (the `mafiabench` command has it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import gc
import itertools
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from mafiabench.backends.endpoints import EndpointConfig, aclose_clients, check_backend
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord, Provenance

# What a request's reply settles: the future of the event loop that waits for it, or a thread-safe one for a game
# handed out before any loop waits (`WorkerPool.head_start`).
_Waiter = asyncio.Future[tuple[str, Any]] | concurrent.futures.Future[tuple[str, Any]]


class WorkerLost(ConnectionError):
    """A worker process died with games in flight (an infrastructure fault: the shard is retried)."""


GC_GEN0_THRESHOLD = 20_000  # Python's default is 700


@contextlib.contextmanager
def lean_gc() -> Iterator[None]:
    """While games are played over HTTP: what is alive now (modules, SDK classes) frozen out of the collector's
    sight, and a young generation about 30 times larger. Every call allocates thousands of short-lived objects (the
    SDK's options, headers, requests, responses); with the defaults the collector ran every 700 allocations and its
    full passes walked every imported object: about 14% of the client's CPU per call (bench_client_cpu.py). Cyclic
    garbage waits a little longer to be freed; the settings are restored afterwards. No full collection first: in a
    run's process, with Prefect imported, it cost 0.1-0.16 s before the first game for a few hundred objects of
    garbage, which stay frozen with the rest (issue 31 item 2)."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def split_limit(total: int, workers: int, index: int) -> int:
    """Worker `index`'s share of a limit: `total` split as evenly as possible, at least 1."""
    return max(1, total // workers + (1 if index < total % workers else 0))


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs to play games (pickled once, at spawn)."""

    endpoints: dict[str, EndpointConfig]
    limits: dict[str, int]
    default_limit: int
    cache_dir: str | None
    provenance: Provenance
    processes: int
    warm: tuple[str, ...] = ()  # model specs whose provider modules a worker imports (and checks) before it is ready

    def pool(self, index: int) -> BackendPool:
        n = self.processes
        return BackendPool(
            endpoints=self.endpoints,
            limits={p: split_limit(k, n, index) for p, k in self.limits.items()},
            default_limit=split_limit(self.default_limit, n, index),
            cache_dir=self.cache_dir,
        )


# -- the worker's side ----------------------------------------------------------------------------------------------


READY = -1  # the request id of the message a worker sends once it can take games


def ignore_ctrl_c() -> None:
    """A worker's first step: Ctrl-C is the parent's to handle (it cancels the games, then stops the workers). A
    Ctrl-C held since the worker started (`start_deaf`) is dropped with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def start_deaf(process: Any) -> None:
    """Start a worker process with SIGINT held from its first instruction: a spawned child inherits the starting
    thread's signal mask through fork and exec, so a Ctrl-C sent to the run's process group while the worker still
    starts (Python's start-up and the imports before `ignore_ctrl_c`, about a second) waits there and is dropped,
    rather than printing a KeyboardInterrupt traceback from the middle of an import under the run's one-line hint.
    multiprocessing's resource tracker is started first: its own start (with the first process spawned) holds
    SIGINT the same way, then lets it go in the calling thread, whatever that thread held before."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _worker_main(inbox: Connection, outbox: Connection, config: WorkerConfig, index: int) -> None:
    ignore_ctrl_c()
    for spec in config.warm:
        with contextlib.suppress(Exception):  # the parent has checked the specs; a game reports any problem
            check_backend(spec, config.endpoints)  # imports the provider's module (not its SDK), makes no client
    with contextlib.suppress(OSError):
        outbox.send((READY, "ready", None))
    with lean_gc():
        asyncio.run(_serve(inbox, outbox, config.pool(index), config.provenance))
    # Every reply is sent (the pipe's writes are synchronous) and the clients are closed: exit without the
    # interpreter's teardown of the SDKs' modules, which made stopping each worker cost about half a second.
    outbox.close()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


async def _serve(inbox: Connection, outbox: Connection, pool: BackendPool, provenance: Provenance) -> None:
    loop = asyncio.get_running_loop()
    tasks: dict[int, asyncio.Task[None]] = {}
    closed = asyncio.Event()

    async def play(req: int, spec: GameSpec) -> None:
        try:
            rec = await play_game(spec, pool, provenance=provenance)
            reply: tuple[int, str, Any] = (req, "ok", rec.to_dict())
        except asyncio.CancelledError:
            reply = (req, "cancelled", None)
        except Exception as exc:  # not a failed game (those are records): the parent raises it in the shard
            reply = (req, "error", _picklable(exc))
        finally:
            tasks.pop(req, None)
        with contextlib.suppress(OSError):  # the parent is gone
            outbox.send(reply)

    def unstarted(req: int, task: asyncio.Task[None]) -> None:
        """A game's task cancelled before its first step never entered `play` (a coroutine cancelled before it
        starts raises at its first line, outside any `try`): it is still in `tasks`, so answer it here. The parent
        waits for every game's reply (a failing shard sends "play" and "cancel" together on a loaded machine)."""
        if tasks.pop(req, None) is task and task.cancelled():
            with contextlib.suppress(OSError):  # the parent is gone
                outbox.send((req, "cancelled", None))

    def receive(msg: tuple[str, int, Any]) -> None:
        kind, req, spec = msg
        if kind == "play":
            task = tasks[req] = loop.create_task(play(req, spec))
            task.add_done_callback(functools.partial(unstarted, req))
        elif kind == "cancel" and req in tasks:
            tasks[req].cancel()

    def read() -> None:
        try:
            while True:
                loop.call_soon_threadsafe(receive, inbox.recv())
        except (EOFError, OSError):  # the parent closed our pipe, or died
            loop.call_soon_threadsafe(closed.set)

    threading.Thread(target=read, name="mafiabench-worker-inbox", daemon=True).start()
    await closed.wait()
    for t in list(tasks.values()):
        t.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    await aclose_clients()


def _picklable(exc: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


# -- the parent's side ----------------------------------------------------------------------------------------------


class _Worker:
    def __init__(self, ctx: Any, config: WorkerConfig, index: int) -> None:
        their_inbox, self._outbox = ctx.Pipe(duplex=False)
        self._inbox, their_outbox = ctx.Pipe(duplex=False)
        self.process = ctx.Process(
            target=_worker_main,
            args=(their_inbox, their_outbox, config, index),
            name=f"mafiabench-worker-{index}",
            daemon=True,
        )
        start_deaf(self.process)
        their_inbox.close()
        their_outbox.close()
        self.pending: dict[int, _Waiter] = {}
        self.ready = threading.Event()  # set when the worker can take games, or has died or been stopped
        self.alive = True
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name=f"mafiabench-worker-{index}-replies", daemon=True)
        self._reader.start()

    def send(self, msg: tuple[str, int, Any], fut: _Waiter | None = None) -> None:
        """Send a request; with `fut` (an event loop's future, or a thread-safe one for a game handed out before any
        loop waits: `WorkerPool.head_start`), the reply (or `WorkerLost`) settles it."""
        req = msg[1]
        with self._lock:
            if not self.alive:
                raise WorkerLost(f"{self.process.name} is gone")
            if fut is not None:
                self.pending[req] = fut
            try:
                self._outbox.send(msg)
            except OSError as exc:
                self.pending.pop(req, None)
                raise WorkerLost(f"{self.process.name}: {exc}") from exc

    def _read(self) -> None:
        try:
            while True:
                req, kind, payload = self._inbox.recv()
                if req == READY:
                    self.ready.set()
                    continue
                with self._lock:
                    waiter = self.pending.pop(req, None)
                if waiter is not None:
                    _deliver(waiter, (kind, payload))
        except (EOFError, OSError):
            self.process.join(1.0)  # for its exit code
        with self._lock:
            self.alive = False
            orphans, self.pending = list(self.pending.values()), {}
        self.ready.set()
        lost = ("lost", WorkerLost(f"{self.process.name} exited (code {self.process.exitcode}) with games in flight"))
        for waiter in orphans:
            _deliver(waiter, lost)

    def stop(self) -> None:
        """Close our pipe: the worker cancels its games and exits (`close` waits for it). Whoever waits for it to
        be ready waits no longer."""
        with self._lock:
            self.alive = False
            with contextlib.suppress(OSError):
                self._outbox.close()
        self.ready.set()

    def close(self, timeout: float = 10.0) -> None:
        """Close our pipe (the worker cancels its games and exits), then wait for it."""
        self.stop()
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self._reader.join(timeout)
        self._inbox.close()


def _settle(fut: asyncio.Future[tuple[str, Any]], value: tuple[str, Any]) -> None:
    if not fut.done():
        fut.set_result(value)


def _deliver(waiter: _Waiter, value: tuple[str, Any]) -> None:
    """Settle a waiter from a reader thread: on its event loop, or at once for a thread-safe future."""
    if isinstance(waiter, asyncio.Future):
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            waiter.get_loop().call_soon_threadsafe(_settle, waiter, value)
    else:
        with contextlib.suppress(concurrent.futures.InvalidStateError):  # settled already
            waiter.set_result(value)


class _Early:
    """A game handed to a worker before any event loop waits for it (`WorkerPool.head_start`): its reply, and
    which worker has it under which request (for a cancel), once the sending thread has sent it."""

    __slots__ = ("reply", "req", "worker")

    def __init__(self) -> None:
        self.reply: concurrent.futures.Future[tuple[str, Any]] = concurrent.futures.Future()
        self.worker: _Worker | None = None
        self.req = -1


class WorkerPool:
    """`processes` spawned workers; `play(spec)` plays a game in the least busy one and returns its record."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self._ctx = multiprocessing.get_context("spawn")
        self._workers: list[_Worker | None] = [None] * config.processes
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        self._early: dict[str, _Early] = {}  # game id → a game handed out ahead (`head_start`), until played
        self._sender: threading.Thread | None = None

    def _spawn_missing(self) -> list[_Worker]:
        with self._lock:
            if self._closed:  # a closed pool spawns nothing more (a head start's thread may still be sending)
                raise WorkerLost("the worker pool is closed")
            for i, w in enumerate(self._workers):
                if w is None or not w.alive:
                    if w is not None:
                        w.close(timeout=1.0)
                    self._workers[i] = _Worker(self._ctx, self.config, i)
            return [w for w in self._workers if w is not None]

    def spawn(self) -> None:
        """Spawn every worker without waiting for it to be ready (`start` waits)."""
        self._spawn_missing()

    def start(self, timeout: float = 120.0) -> None:
        """Spawn every worker and wait until each is ready (its imports done) or dead, at most `timeout` seconds.
        Blocking: call it from a thread (`asyncio.to_thread`)."""
        deadline = time.monotonic() + timeout
        for w in self._spawn_missing():
            w.ready.wait(max(0.0, deadline - time.monotonic()))
        sender = self._sender
        if sender is not None and sender is not threading.current_thread():  # every game handed out ahead is sent
            sender.join(max(0.0, deadline - time.monotonic()))

    def head_start(self, specs: Sequence[GameSpec]) -> None:
        """Hand these games to the workers without waiting: a thread sends them as soon as the workers are ready
        (a pipe holds only some 60 of them before its worker reads), and `play` of one of them waits for its reply
        instead of sending it again. `mafiabench run` starts its first games so, before it imports Prefect."""
        early = {spec.game_id: _Early() for spec in specs}
        self._early.update(early)

        def send() -> None:
            with contextlib.suppress(WorkerLost):  # closed meanwhile: each game below says so
                self.start()
            for spec in specs:
                e = early[spec.game_id]
                try:
                    e.worker = self._pick()
                    e.req = next(self._ids)
                    e.worker.send(("play", e.req, spec), e.reply)
                except Exception as exc:  # raised where the game is awaited, as `play` raises it
                    _deliver(e.reply, ("error", exc))

        self._sender = threading.Thread(target=send, name="mafiabench-head-start", daemon=True)
        self._sender.start()

    def _pick(self) -> _Worker:
        return min(self._spawn_missing(), key=lambda w: len(w.pending))

    async def play(self, spec: GameSpec) -> GameRecord:
        early = self._early.pop(spec.game_id, None)
        worker: _Worker | None
        if early is None:
            worker = self._pick()
            req = next(self._ids)
            fut: asyncio.Future[tuple[str, Any]] = asyncio.get_running_loop().create_future()
            worker.send(("play", req, spec), fut)
        else:  # handed out ahead: once it is sent (`start` waits for that), wait for its reply
            if self._sender is not None and self._sender.is_alive():
                await asyncio.to_thread(self._sender.join)
            worker, req, fut = early.worker, early.req, asyncio.wrap_future(early.reply)
        try:
            kind, payload = await asyncio.shield(fut)
        except asyncio.CancelledError:
            # Wait for the worker to stop the game, so a retried shard never overlaps it.
            if worker is not None:
                with contextlib.suppress(WorkerLost):
                    worker.send(("cancel", req, None))
                    await asyncio.shield(fut)
            raise
        if kind == "ok":
            return GameRecord.from_dict(payload)
        if kind == "cancelled":
            raise asyncio.CancelledError
        raise payload

    def close(self) -> None:
        """Stop every worker at once, then wait for them: they wind down together, not one after the other. A game
        handed out ahead and not played yet is abandoned, as a game in flight is."""
        with self._lock:
            self._closed = True
            workers, self._workers = [w for w in self._workers if w is not None], [None] * self.config.processes
        for w in workers:
            w.stop()
        if self._sender is not None:  # its sends fail now: it ends
            self._sender.join(10.0)
        for w in workers:
            w.close()
