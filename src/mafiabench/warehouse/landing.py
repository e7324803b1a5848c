"""Landing: the raw folder of game records, loading it into DuckDB, the run ledger, and the warehouse lock.

Each shard's finished games are written together, once, atomically, as one JSON-lines file under
`<warehouse dir>/raw/<experiment>/`; only the run's one writer loads those records into DuckDB (idempotent by game
id). The raw folder is the source of truth between the two: after a crash, files that reached it but not the
warehouse are loaded on the next run instead of being replayed. A run holds an exclusive advisory lock on
`<warehouse>.lock` for its whole length, so a second run gets a clear error instead of a corrupted file.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import shutil
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson

from mafiabench.errors import UserError
from mafiabench.record import GameRecord, encode_record, record_from_line, write_bytes_atomic
from mafiabench.warehouse.raw import (
    GRAIN_TABLES,
    IMPORT_UNREADABLE,
    LANDED_FILES,
    RUNS,
    Encoded,
    FlatBatch,
    LoadResult,
    WarehouseBusyError,
    column_names,
    connect,
    load_flat,
    load_records,
    raw_columns,
    shard_bytes,
    shard_lines,
    table_ddl,
)
from mafiabench.warehouse.sidecar import Sidecar, check_sidecar

TMP_PREFIX = ".tmp-"


class WarehouseLockedError(UserError):
    """Another run holds the warehouse."""


# -- the lock ---------------------------------------------------------------------------------------------------


def lock_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name + ".lock")


_SHARED: dict[str, int] = {}  # locks this process holds for its nested steps -> nesting depth


@contextlib.contextmanager
def warehouse_lock(warehouse: Path, *, what: str = "run", share: bool = False) -> Iterator[Path]:
    """Hold `<warehouse>.lock` exclusively (fcntl.flock, released by the kernel even on kill -9).

    The file's content names the holder (pid, host, start time, what), for the error the next run prints.
    With `share=True` the holder lends it to the steps it runs in the same process: `mafiabench run` takes it before
    Prefect starts, and the flow's study then enters it. Any other second taker, in this process or another, is
    refused.
    """
    path = lock_path(warehouse)
    key = str(path.absolute())
    if key in _SHARED:
        _SHARED[key] += 1
        try:
            yield path
        finally:
            _SHARED[key] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            raise WarehouseLockedError(
                f"warehouse {warehouse} is in use by another run ({holder}); wait for it to finish or stop it. "
                f"Lock file: {path}"
            ) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "what": what,
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        if share:
            _SHARED[key] = 1
        try:
            yield path
        finally:
            _SHARED.pop(key, None)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


READER_WAIT_S = 30.0


def connect_reader(warehouse: Path, *, wait_s: float = READER_WAIT_S) -> duckdb.DuckDBPyConnection:
    """A read-only connection. A run opens the file only while it lands a shard (seconds), so a busy file is
    retried for `wait_s` before the error, which names the run and says what to do."""
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            return connect(warehouse, read_only=True)
        except WarehouseBusyError:
            if time.monotonic() > deadline:
                holder = _holder_of(warehouse)
                raise WarehouseBusyError(
                    f"warehouse {warehouse} stayed busy for {wait_s:.0f} s ({holder}): a run opens it only while it "
                    "lands a shard, so try again in a few seconds; a build (`mafiabench build`) holds it until it "
                    "ends"
                ) from None
            time.sleep(delay)
            delay = min(0.5, delay * 2)


def _holder_of(warehouse: Path) -> str:
    path = lock_path(warehouse)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return "no run holds its lock"
    try:
        return "held by " + _read_holder(fd) if os.fstat(fd).st_size else "no run holds its lock"
    finally:
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        raw = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        info = json.loads(raw)
        return f"pid {info.get('pid')} on {info.get('host')}, {info.get('what')} since {info.get('since')}"
    except (OSError, ValueError):
        return "holder unknown"


# -- the raw folder ---------------------------------------------------------------------------------------------
#
# A shard's records are written together, once, as one JSON-lines file `<raw>/<experiment>/<name>.jsonl` (one
# compact record per line, `record.encode_record`), atomically: a temp file, fsync, rename. Names sort in the order
# they were written (nanosecond clock, pid, shard index), so a game played again (a failed game replayed) has its
# latest record in the last file that holds it, and its earlier attempts stay on disk in the older files (their calls
# were spent). Which files reached DuckDB is recorded in `raw_landed_files`, in the same transaction as their
# records: a resume lands exactly the files that were written but not landed, without reading the others.
# Folders written before shard files hold one `<game_id>.json` per game; they are still read.
#
# Next to each shard file, its writer puts a columnar sidecar, `<name>.cols/` (`warehouse.sidecar`): the same
# records as the raw tables' rows in Parquet, with a manifest tying it to the lines (size, CRC-32, format version).
# A backlog is landed from the sidecars, many shards per statement; a shard whose sidecar is missing or does not
# match is landed from its lines, as before.

SHARD_SUFFIX = ".jsonl"
REPLACED_DIR = "replaced"  # legacy per-game folders kept a replayed game's earlier record here


def raw_dir(warehouse: Path, experiment: str) -> Path:
    return warehouse.parent / "raw" / experiment


def write_shard(lines: Sequence[bytes], folder: Path, index: int) -> Path:
    """Write a shard's record lines as one file, atomically (a crash leaves the whole file or none)."""
    path = folder / f"{time.time_ns():020d}-{os.getpid()}-{index:06d}{SHARD_SUFFIX}"
    write_bytes_atomic(shard_bytes(lines), path)
    return path


def remove_partial(folder: Path) -> int:
    """Delete temp files a killed writer left behind (call only while holding the warehouse lock)."""
    n = 0
    for d in (folder, folder / REPLACED_DIR):
        if d.is_dir():
            for p in d.glob(f"{TMP_PREFIX}*"):
                if p.is_dir():  # a sidecar being written
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
                n += 1
    return n


def shard_files(folder: Path) -> list[Path]:
    """Shard files in the order they were written, temp files excluded."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"*{SHARD_SUFFIX}") if not p.name.startswith(TMP_PREFIX))


def legacy_files(folder: Path) -> dict[str, Path]:
    """Game id → per-game file of a folder written before shard files."""
    if not folder.is_dir():
        return {}
    return {p.name[: -len(".json")]: p for p in folder.glob("*.json") if not p.name.startswith(TMP_PREFIX)}


def read_shard(path: Path) -> list[bytes]:
    return shard_lines(path)


def raw_history(folder: Path) -> Iterator[tuple[str, bytes]]:
    """Every record the raw folder holds, oldest first, as (game id, stored line): replayed games appear once per
    attempt. Legacy per-game files come first (they are older than any shard file)."""
    for gid, path in sorted(legacy_files(folder).items()):
        d = orjson.loads(path.read_bytes())
        yield gid, encode_dict(d)
    for path in shard_files(folder):
        for line in read_shard(path):
            yield orjson.loads(line)["game_id"], line


def encode_dict(d: dict[str, Any]) -> bytes:
    """A legacy file's record as a shard line."""
    return encode_record(GameRecord.from_dict(d))[1]


def raw_records(folder: Path) -> dict[str, bytes]:
    """Game id → its latest stored record line."""
    return dict(raw_history(folder))


def read_record(line: bytes) -> GameRecord:
    return record_from_line(line)


# -- loading ----------------------------------------------------------------------------------------------------


@dataclass
class LandingState:
    """What the warehouse already holds for a set of game ids."""

    finished: set[str]  # landed, not failed: never replayed
    failed: set[str]  # landed as failed: replayed by a later run


def landing_state(con: duckdb.DuckDBPyConnection, ids: Iterable[str] | None = None) -> LandingState:
    if ids is None:
        rows = con.execute("select game_id, status from raw_games").fetchall()
    else:
        rows = con.execute(
            "select game_id, status from raw_games where game_id in (select unnest($ids))", {"ids": list(ids)}
        ).fetchall()
    return LandingState({g for g, s in rows if s != "failed"}, {g for g, s in rows if s == "failed"})


def finished_indices(con: duckdb.DuckDBPyConnection, prefix: str) -> Iterator[int]:
    """Indices of the finished (not failed) games whose id is `prefix` + a number: one cell's landed games,
    streamed (a million-game cell is never held as a set of ids)."""
    cur = con.execute(
        "select game_id from raw_games where starts_with(game_id, $p) and status <> 'failed'", {"p": prefix}
    )
    n = len(prefix)
    while rows := cur.fetchmany(50_000):
        for (gid,) in rows:
            tail = gid[n:]
            if tail.isdigit():
                yield int(tail)


def land(con: duckdb.DuckDBPyConnection, records: Iterable[GameRecord]) -> LoadResult:
    """Load records (one transaction; a landed finished game is never duplicated or downgraded)."""
    return load_records(con, records)


def ensure_landed_files_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"create table if not exists {LANDED_FILES} ({table_ddl(LANDED_FILES)})")


def land_shard(
    con: duckdb.DuckDBPyConnection, records: FlatBatch | Sequence[Encoded], path: Path, experiment: str
) -> LoadResult:
    """Load a shard file's records (flattened already, or encoded) and mark the file landed, in one transaction
    (idempotent by game id)."""
    ensure_landed_files_table(con)
    batch = records if isinstance(records, FlatBatch) else FlatBatch.of(records)

    def mark(c: duckdb.DuckDBPyConnection) -> None:
        c.execute(
            f"insert or replace into {LANDED_FILES} values ($e, $f, $n, now()::timestamp)",
            {"e": experiment, "f": path.name, "n": len(batch)},
        )

    return load_flat(con, batch, after=mark)


def land_pending(
    con: duckdb.DuckDBPyConnection, folder: Path, experiment: str, *, group_files: int | None = None
) -> LoadResult:
    """Land what reached the raw folder but not DuckDB (a crash between the two; a shard shipped from elsewhere):
    shard files not marked landed, oldest first, and legacy per-game files of games not landed as finished.

    Shards with a matching sidecar (`warehouse.sidecar`) are landed in groups of at most `group_files` shards or
    `SIDECAR_GROUP_BYTES` of Parquet, straight from their Parquet files (`_land_group`); the others one by one from
    their lines, each in its own transaction with its mark. Either way a file's records and its mark in
    `raw_landed_files` commit together, and the rows are the same. (Reading a backlog's lines in worker processes
    was tried: on 2 shared cores it cost 20% more CPU and no wall time, BENCHMARKS.md.)"""
    total = LoadResult()
    ensure_landed_files_table(con)
    rows = con.execute(f"select file from {LANDED_FILES} where experiment = $e", {"e": experiment}).fetchall()
    landed = {f for (f,) in rows}
    legacy = legacy_files(folder)
    if legacy:
        done = landing_state(con, list(legacy)).finished
        _add(total, land_files(con, [p for g, p in sorted(legacy.items()) if g not in done]))
    most = group_files or SIDECAR_GROUP_FILES
    previous = gc.get_threshold()
    batch_gc()  # a backlog is read and flattened in bulk: see BATCH_GC_THRESHOLDS
    try:
        group: list[Sidecar] = []
        group_bytes = 0
        for path in shard_files(folder):
            if path.name in landed:
                continue
            side, _ = check_sidecar(path)
            if side is not None:
                group.append(side)
                group_bytes += side.size
                if len(group) >= most or group_bytes >= SIDECAR_GROUP_BYTES:
                    _add(total, _land_group(con, group, experiment))
                    group, group_bytes = [], 0
                continue
            if group:  # keep the files' order: what was written before this file lands before it
                _add(total, _land_group(con, group, experiment))
                group, group_bytes = [], 0
            _add(total, land_shard(con, FlatBatch.read(path), path, experiment))
            total.files_from_lines += 1
        if group:
            _add(total, _land_group(con, group, experiment))
    finally:
        gc.set_threshold(*previous)
    return total


# Shards landed from their sidecars per transaction, up to whichever bound comes first. Each commit rewrites the
# tables' last, partly filled row groups, so few large transactions are cheaper: a million policy games (2,000
# shards, 219 MB of Parquet) land in 11.3 s in one, 21.7 s in groups of 100 shards (BENCHMARKS.md). The byte bound
# keeps a group of games with long prompts (model calls) to a size whose failure, redone file by file, costs little.
SIDECAR_GROUP_FILES = 2_000
SIDECAR_GROUP_BYTES = 256 * 1024 * 1024


def _arrow_error() -> type[Exception]:
    """pyarrow's error class (imported here: a run with nothing to land never loads pyarrow)."""
    import pyarrow as pa

    return pa.ArrowException


def _land_group(con: duckdb.DuckDBPyConnection, group: list[Sidecar], experiment: str) -> LoadResult:
    """Land consecutive shards from their checked sidecars: one `insert ... select from read_parquet([...])` per raw
    table for all shards whose games are new (in no other shard of the group and not in the warehouse), in one
    transaction with their marks; then, one by one in their order, the shards that share a game with another shard
    or the warehouse (a replayed game, a retried shard), through `load_flat`, which decides per game what to keep.
    The new shards' games are in no other file of the group, so landing them first changes nothing."""
    total = LoadResult()
    files = [str(s.tables["raw_games"]) for s in group]
    try:
        if any(c in f for f in files for c in "*?[{"):  # DuckDB would read such a name as a pattern
            raise duckdb.InvalidInputException("a file name with glob characters")
        shared = {
            f
            for (f,) in con.execute(
                """with ids as (select game_id, filename from read_parquet($files, filename = true)),
                        again as (select game_id from ids group by game_id having count(*) > 1
                                  union all select game_id from ids semi join raw_games using (game_id))
                   select distinct filename from ids semi join again using (game_id)""",
                {"files": files},
            ).fetchall()
        }
    except duckdb.Error:  # a damaged file the checksums missed
        shared = set(files)
    fresh = [s for s in group if str(s.tables["raw_games"]) not in shared]
    one_by_one = [s for s in group if str(s.tables["raw_games"]) in shared]
    if fresh:
        try:
            total.inserted += _insert_sidecars(con, fresh, experiment)
            total.files_from_sidecar += len(fresh)
        except duckdb.Error:  # a damaged file the checksums missed: each shard alone, from its lines if need be
            one_by_one = group
    for side in one_by_one:
        try:
            batch = side.read()
            via_sidecar = True
        except (OSError, ValueError, KeyError, _arrow_error()):
            batch = FlatBatch.read(side.lines_path)
            via_sidecar = False
        try:
            r = land_shard(con, batch, side.lines_path, experiment)
        except duckdb.Error:
            if not via_sidecar:
                raise
            batch = FlatBatch.read(side.lines_path)
            via_sidecar = False
            r = land_shard(con, batch, side.lines_path, experiment)
        _add(total, r)
        if via_sidecar:
            total.files_from_sidecar += 1
        else:
            total.files_from_lines += 1
    return total


def _insert_sidecars(con: duckdb.DuckDBPyConnection, group: list[Sidecar], experiment: str) -> int:
    """All rows of the given sidecars and their files' marks, in one transaction (their games are all new)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    # The rows of many shards need no particular order (readers order by game and seq): unordered, DuckDB inserts
    # them with a quarter less CPU and a third less wall time (BENCHMARKS.md).
    (ordered,) = con.execute("select current_setting('preserve_insertion_order')").fetchone() or (True,)
    con.execute("set preserve_insertion_order = false")
    con.execute("begin transaction")
    try:
        for table in GRAIN_TABLES:
            # Files of tables the writers counted empty are not opened: policy games have no model calls nor
            # beliefs, and opening 2,000 empty Parquet files costs 0.2-0.3 s a table (BENCHMARKS.md).
            files = [str(s.tables[table]) for s in group if s.has_rows(table)]
            if not files:
                continue
            cols = raw_columns(table)
            select = ", ".join("$now" if c == "landed_at" else c for c in cols)
            params: dict[str, Any] = {"files": files}
            if "landed_at" in cols:
                params["now"] = now
            con.execute(
                f"insert into {table} ({', '.join(cols)}) select {select} from read_parquet($files)", params
            )
        con.execute(
            f"""insert or replace into {LANDED_FILES} (experiment, file, games, landed_at)
                select $e, unnest($f), unnest($n), now()::timestamp""",
            {"e": experiment, "f": [s.lines_path.name for s in group], "n": [s.games for s in group]},
        )
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    finally:
        con.execute(f"set preserve_insertion_order = {'true' if ordered else 'false'}")
    return sum(s.games for s in group)


# The garbage collector's thresholds in a worker process that builds or reads records by the thousand: a shard
# makes millions of short-lived objects (none in cycles), and at the default threshold (700) the collector's passes
# over the process's heap (the imported libraries) cost about a fifth of a policy game's CPU (BENCHMARKS.md).
BATCH_GC_THRESHOLDS = (20_000, 20, 100)


def batch_gc() -> None:
    """Collect garbage less often in a worker process that only plays, writes or reads records in bulk."""
    gc.set_threshold(*BATCH_GC_THRESHOLDS)




def _add(total: LoadResult, r: LoadResult) -> None:
    total.inserted += r.inserted
    total.replaced += r.replaced
    total.skipped += r.skipped
    total.files_from_sidecar += r.files_from_sidecar
    total.files_from_lines += r.files_from_lines


def land_files(con: duckdb.DuckDBPyConnection, paths: Iterable[Path], *, batch: int = 500) -> LoadResult:
    """Load legacy per-game files in batches (bounded memory for large backlogs). Unreadable files raise: they are
    a bug, since files are only ever renamed into place whole."""
    total = LoadResult()
    chunk: list[GameRecord] = []

    def flush() -> None:
        _add(total, load_records(con, chunk))
        chunk.clear()

    for p in paths:
        chunk.append(GameRecord.from_json(p.read_text(encoding="utf-8")))
        if len(chunk) >= batch:
            flush()
    if chunk:
        flush()
    return total


# -- the run ledger ---------------------------------------------------------------------------------------------


def ensure_runs_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"create table if not exists {RUNS} ({table_ddl(RUNS)})")


def record_run(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    """Insert or replace one run's row (a run is recorded when it starts and again when it ends)."""
    ensure_runs_table(con)
    cols = column_names(RUNS)
    values = {c: row.get(c) for c in cols}
    con.execute("delete from raw_runs where run_id = $run_id", {"run_id": values["run_id"]})
    con.execute(
        f"insert into raw_runs ({', '.join(cols)}) values ({', '.join('$' + c for c in cols)})",
        values,
    )


def record_unreadable(con: duckdb.DuckDBPyConnection, source: str, path: str,
                      games: Sequence[tuple[str, str]]) -> None:
    """What an import of `source` from `path` could not read, (file, reason) each: the rows of the last import of
    that source and path replaced in one transaction (a game fixed since then is no longer listed)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    con.execute(f"create table if not exists {IMPORT_UNREADABLE} ({table_ddl(IMPORT_UNREADABLE)})")
    con.execute("begin")
    try:
        con.execute(f"delete from {IMPORT_UNREADABLE} where source = ? and path = ?", [source, path])
        if games:
            con.executemany(f"insert into {IMPORT_UNREADABLE} values (?, ?, ?, ?, ?)",
                            [[source, path, file, reason, now] for file, reason in games])
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise


def usage_by_model(con: duckdb.DuckDBPyConnection, experiment: str) -> list[tuple[str, str, int, int, int, int]]:
    """(provider, model, calls, input, output, cached tokens) landed so far for an experiment: what its budget has
    already consumed, replaced failed attempts included."""
    rows = con.execute(
        """select c.provider, c.model, count(*), coalesce(sum(c.input_tokens), 0),
                  coalesce(sum(c.output_tokens), 0), coalesce(sum(c.cached_tokens), 0)
           from (select game_id, provider, model, input_tokens, output_tokens, cached_tokens from raw_model_calls
                 union all
                 select game_id, provider, model, input_tokens, output_tokens, cached_tokens
                 from raw_replaced_calls) c
           join raw_games g using (game_id)
           where g.experiment = $e
           group by all order by all""",
        {"e": experiment},
    ).fetchall()
    return [(str(p), str(m), int(n), int(i), int(o), int(c)) for p, m, n, i, o, c in rows]
