"""Games played on a Dask cluster, for a study that outgrows one machine (`[cluster] dask = "tcp://host:8786"` in the
experiment, or `mafiabench run --dask tcp://host:8786`).

Prefect still runs the study as usual (shard tasks, landing, the summary); each game of a shard becomes one Dask task
(`distributed`: an existing scheduler and its workers, on this machine or many), played by `play_on_worker` with the
study's endpoints, limits and cache. The parent keeps everything that must be single: the plan, the games-in-flight
limit and the budget guard (it alone decides which game starts), the shard files and DuckDB (one writer), the
progress bar and the summary. A worker sends each record back as a dict.

Faults: a worker that dies (kill -9, a lost machine) has its games re-run by the scheduler on another worker, as
Dask does for any task of a lost worker (a game is a pure function of its spec and seed, so the re-run is the same
game; only its model calls are spent twice); the record still lands once, by game id. An exception inside a game's
task (an infrastructure fault) fails its shard, which is retried like any other.

Limits: `concurrency.games` stays one global limit, enforced in the parent. Each provider's call limit is split over
the workers present when the run starts (each gets at most ceil(limit / workers)), so the cluster never has much more
in flight to a provider than the experiment allows. A worker plays its games on one event loop of its own (the SDK
clients are loop-bound), so run workers with enough threads for the games they should carry
(`dask worker ADDRESS --nthreads 32`). The parent registers a worker plugin on every worker (`CLOSE_PLUGIN`) that
closes those loops' SDK clients when the worker closes, so their connections end cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from dataclasses import dataclass, replace
from typing import Any

from mafiabench.backends.endpoints import aclose_clients
from mafiabench.errors import UserError
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord
from mafiabench.study.workers import WorkerConfig

log = logging.getLogger(__name__)

# -- the worker's side ----------------------------------------------------------------------------------------------


@dataclass
class _Loop:
    loop: asyncio.AbstractEventLoop
    pool: BackendPool


_LOOPS: dict[int, _Loop] = {}
_LOOPS_LOCK = threading.Lock()


def _worker_loop(config: WorkerConfig) -> _Loop:
    """One event loop thread per worker process and configuration, with its backend pool (created once)."""
    key = hash((tuple(sorted(config.limits.items())), config.default_limit, config.cache_dir, config.processes))
    with _LOOPS_LOCK:
        if key not in _LOOPS:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="mafiabench-dask-games", daemon=True).start()
            _LOOPS[key] = _Loop(loop, config.pool(0))
        return _LOOPS[key]


def play_on_worker(spec: GameSpec, config: WorkerConfig) -> dict[str, Any]:
    """A Dask task: play one game on this worker's event loop and return its record as a dict."""
    runner = _worker_loop(config)
    future = asyncio.run_coroutine_threadsafe(play_game(spec, runner.pool, provenance=config.provenance), runner.loop)
    return future.result().to_dict()


def close_worker_loops(timeout_s: float = 10.0) -> int:
    """Close the SDK clients of this worker process's game loops and stop the loops; returns how many there were.

    Called when the worker closes (`CLOSE_PLUGIN`): its pooled connections then end with a goodbye to the provider
    instead of being dropped with the process."""
    with _LOOPS_LOCK:
        runners = list(_LOOPS.values())
        _LOOPS.clear()
    for runner in runners:
        try:
            asyncio.run_coroutine_threadsafe(aclose_clients(), runner.loop).result(timeout_s)
        except Exception as exc:  # a hung client must not keep the worker from closing
            log.warning("could not close the SDK clients of a game loop: %r", exc)
        finally:
            runner.loop.call_soon_threadsafe(runner.loop.stop)
    return len(runners)


CLOSE_PLUGIN = "mafiabench-close-game-loops"


def _close_plugin() -> Any:
    """The worker plugin (registered by the parent on every worker, present or joining later) whose teardown, when
    the worker closes, runs `close_worker_loops`. `distributed` is imported only for a cluster run."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class CloseGameLoops(WorkerPlugin):
        name = CLOSE_PLUGIN

        def teardown(self, worker: Any) -> None:
            close_worker_loops()

    return CloseGameLoops()


# -- the parent's side ----------------------------------------------------------------------------------------------


def check_scheduler(address: str, timeout_s: float = 5.0) -> None:
    """Fail before any game when the scheduler's port does not answer (a clear error, not a failed shard)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 8786), timeout=timeout_s):
            pass
    except OSError as exc:
        raise UserError(f"cannot reach the Dask scheduler at {address} ([cluster] dask / --dask): {exc}") from None


class DaskGames:
    """The parent's handle on the cluster: `play(spec)` runs one game as a Dask task and returns its record."""

    def __init__(self, address: str, config: WorkerConfig) -> None:
        self.address = address
        self.config = config
        self._client: Any = None
        self._worker_config: WorkerConfig | None = None
        self._lock = asyncio.Lock()
        self.workers = 0

    async def _connect(self) -> Any:
        async with self._lock:
            if self._client is None:
                from distributed import Client

                try:
                    client = await Client(self.address, asynchronous=True, timeout=20)  # type: ignore[misc]
                except OSError as exc:
                    raise UserError(f"cannot reach the Dask scheduler at {self.address}: {exc}") from None
                info = client.scheduler_info()
                self.workers = max(1, len(info.get("workers", {})))
                # Each worker's share of every provider limit, carried by every game's task (a few hundred bytes),
                # not scattered to the workers present now: a worker that joins later would not have it, and when
                # the workers holding it die, Dask forgets it and cancels every game still to play ("already
                # forgotten"; test_cluster_dask).
                self._worker_config = replace(self.config, processes=self.workers)
                await client.register_plugin(_close_plugin())
                self._client = client
            return self._client

    async def play(self, spec: GameSpec) -> GameRecord:
        client = await self._connect()
        future = client.submit(
            play_on_worker, spec, self._worker_config, key=f"mafiabench-game-{spec.game_id}-{uuid.uuid4().hex[:8]}",
            pure=False,
        )
        try:
            data = await future
        except asyncio.CancelledError:
            await future.cancel()
            raise
        return GameRecord.from_dict(data)

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
