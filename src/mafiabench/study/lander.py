"""The run's one writer: DuckDB opened for a step (plan, land a shard, look at a cell, summarise) and closed after
it, so `mafiabench query` and other readers get in between landings; a reader holding the file makes the lander
wait for it (`LAND_WAIT_S`), never fail. The lifecycle (`study/run.py`) owns it and opens it under the warehouse
lock; the scheduler reaches it only through the `land` and `tally` callables it is given."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mafiabench.study.plan import ShardResult
from mafiabench.warehouse import builds, landing
from mafiabench.warehouse.raw import LoadResult, WarehouseBusyError, connect

# How long the lander keeps the warehouse open across landings at most: opening the file, checking its schema and
# closing it (the checkpoint that writes the rows into the file) cost about 0.15 s, which a run landing several
# shards a second (scripted games) paid for every shard. Readers still get in between, once a second.
LAND_HOLD_S = 1.0

# How long the lander waits for a reader (`mafiabench query`, a notebook) to release the warehouse file.
LAND_WAIT_S = 300.0


class Lander:
    """DuckDB for one step at a time, for one experiment's raw folder. `small_groups`: records with model calls
    carry their prompts, so small row groups keep each landing's checkpoint bounded; policy games have none and
    keep DuckDB's default groups, which the marts scan faster."""

    def __init__(self, warehouse: Path, experiment: str, *, small_groups: bool) -> None:
        self.warehouse = warehouse
        self.experiment = experiment
        self.small_groups = small_groups
        self.open = False  # set by the lifecycle while it holds the warehouse lock
        self._con: Any = None
        self._con_lock = threading.RLock()  # the landing thread and the event loop's share the connection
        self._con_depth = 0
        self._con_opened = 0.0
        self._release_timer: threading.Timer | None = None
        self._land_lock: asyncio.Lock | None = None
        self.landed_games: asyncio.Event | None = None  # set once a landing inserted or replaced games (`rehearse`)

    @contextlib.contextmanager
    def connection(self, *, hold: bool = False) -> Iterator[Any]:
        """DuckDB for one step, closed after it so readers get in between. Nested uses share one connection. A
        reader holding the file is waited for, up to `LAND_WAIT_S`.

        `hold` (the lander's): keep the file open after the step for up to `LAND_HOLD_S` from its opening, so
        shards landing in quick succession share one open and one closing checkpoint; a timer closes it when no
        landing comes, and `release()` at the end of the shards."""
        if not self.open:
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

    def _connect(self, *, direct: bool = False) -> Any:
        deadline = time.monotonic() + LAND_WAIT_S
        delay = 0.05
        while True:
            try:
                return connect(self.warehouse, landing=self.small_groups and not direct)
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

    def close(self) -> None:
        """Close the connection whatever holds it (the lifecycle's end)."""
        with self._con_lock:
            self._close_con()

    @property
    def con(self) -> Any:
        """The open connection of the current step (inside `with lander.connection()`)."""
        if self._con is None:
            raise RuntimeError("no warehouse connection open: use `with study.connection() as con:`")
        return self._con

    async def land(self, result: ShardResult) -> LoadResult:
        """Load a shard's records into DuckDB off the event loop, one shard at a time (one writer)."""
        if self._land_lock is None:
            self._land_lock = asyncio.Lock()
        async with self._land_lock:
            loaded = await asyncio.to_thread(self._land_sync, result)
        if (loaded.inserted or loaded.replaced) and self.landed_games is not None:  # a replay of failed games too
            self.landed_games.set()
        return loaded

    async def compact(self) -> float | None:
        """DuckDB's vacuum, when the next build's publish would run it (`warehouse.builds.compact`), off the event
        loop and before any shard lands (a landing waits for it): a run starts it as its games start, so the merge
        the build after it would pay runs while they play. Its seconds, or None (not due, or it could not run)."""
        if self._land_lock is None:
            self._land_lock = asyncio.Lock()
        async with self._land_lock:
            return await asyncio.to_thread(self._compact_sync)

    def _compact_sync(self) -> float | None:
        with self._con_lock:
            if self._con is not None and not self.small_groups:  # the plan's, still held: the file opened directly
                return builds.compact(self._con)
            self._close_con()  # the file opened directly: the vacuum's row groups are the file's own size
            con = self._connect(direct=True)
            try:
                return builds.compact(con)
            finally:
                con.close()

    async def rehearse(self, folder: Path) -> bool:
        """Copy what a rehearsal of the next build's dbt needs into `folder` (`transform.build.rehearsal.export`),
        off the event loop and between two landings; False when there is nothing to rehearse."""
        from mafiabench.transform.build import rehearsal

        if self._land_lock is None:
            self._land_lock = asyncio.Lock()
        async with self._land_lock:
            return await asyncio.to_thread(self._export_sync, folder, rehearsal.export)

    def _export_sync(self, folder: Path, export: Any) -> bool:
        with self.connection() as con:
            return bool(export(con, folder))

    def _land_sync(self, result: ShardResult) -> LoadResult:
        if result.path is None or result.batch is None:  # nothing played (budget)
            return LoadResult()
        with self.connection(hold=True) as con:
            return landing.land_shard(con, result.batch, result.path, self.experiment)

    def tally(self, looks: list[tuple[str, int]]) -> list[tuple[int, int]]:
        """For each (cell's game-id prefix, n): of the cell's first n games, how many finished valid with a winner
        and how many of those the mafia won (what a look of `[stopping]` reads), through one connection."""
        out = []
        with self.connection() as con:
            for prefix, games in looks:
                row = con.execute(
                    """select count(*) filter (where status = 'finished' and valid and winner is not null),
                              count(*) filter (where status = 'finished' and valid and winner = 'mafia')
                       from raw_games where starts_with(game_id, $p) and game_index < $n""",
                    {"p": prefix, "n": games},
                ).fetchone()
                out.append((int(row[0]), int(row[1])) if row else (0, 0))
        return out
