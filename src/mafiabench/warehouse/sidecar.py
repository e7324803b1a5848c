"""Columnar sidecars of shard files: the raw tables' rows of a shard, as Parquet, next to its JSON lines.

A shard file's lines are the record of truth; landing them means parsing every line (about 0.1 ms a game) and
flattening it into rows (another 0.1 ms). The writer of a shard already holds those rows (`FlatBatch.frames`), so it
also writes them once as a sidecar: `<name>.cols/` next to `<name>.jsonl`, one `<table>.parquet` per raw table
(with the `_record` column saying which line a row came from) and a `manifest.json`. A backlog is then landed with
DuckDB's `read_parquet` over many shards at once (`landing.land_pending`), without a line parsed.

A sidecar is used only when it matches its lines: the manifest names its format version, a checksum of the raw
tables' column definitions (a schema change retires every older sidecar by itself), and the lines file's name, size,
CRC-32 and modification time as its writer saw it (a file with that size and time is taken as untouched and not read
again; a copied or touched one is checked by its CRC-32; only an edit that also put the time back would go unseen),
and it holds each table file's size and CRC-32 (a truncated or damaged Parquet file, or one from another sidecar, is
refused before DuckDB reads it). CRC-32 rather than sha256: it detects accidental change just as
well (this guards against a stale or damaged sidecar, not against an adversary who could as well edit the lines) at a
seventh of the CPU, which matters when a million games' 6.8 GB of lines are checked. Anything that does not match
(missing, stale, corrupt, another version) makes the lander parse the lines as before; nothing is lost or landed
twice either way.

Written without fsync, on purpose: the directory appears whole (renamed from a temp name) and the checksums catch
what a power cut could leave half-written; the lines, written first, are fsync'ed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mafiabench.warehouse.raw import GRAIN_TABLES, RAW_SCHEMA, FlatBatch, arrow_schema

log = logging.getLogger(__name__)

FORMAT = "mafiabench-shard-sidecar"
VERSION = 1
SUFFIX = ".cols"
MANIFEST = "manifest.json"
TMP_PREFIX = ".tmp-"  # as landing.TMP_PREFIX: a killed writer's leftovers are removed with the lines' temp files
COMPRESSION = "snappy"  # zstd: 30% smaller files, 60% more of the writer's CPU (BENCHMARKS.md)
_CHUNK = 1 << 20


def schema_sha256() -> str:
    """Checksum of the raw tables' column definitions the sidecar's rows follow."""
    text = json.dumps({t: " ".join(RAW_SCHEMA[t].split()) for t in GRAIN_TABLES}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def sidecar_path(lines_path: Path) -> Path:
    """`<folder>/<name>.cols` for `<folder>/<name>.jsonl`."""
    return lines_path.with_suffix(SUFFIX)


def _crc32_bytes(data: bytes | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def crc32_file(path: Path) -> tuple[int, int]:
    """(size, CRC-32) of a file, read in 1 MB pieces."""
    crc = 0
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc & 0xFFFFFFFF


def lines_crc32(lines: Sequence[bytes]) -> tuple[int, int]:
    """(size, CRC-32) of the shard file holding `lines` (`raw.shard_bytes`), without joining them."""
    if not lines:
        return 1, _crc32_bytes(b"\n")
    crc = 0
    for line in lines:
        crc = zlib.crc32(b"\n", zlib.crc32(line, crc))
    return sum(map(len, lines)) + len(lines), crc & 0xFFFFFFFF


def import_beside() -> threading.Thread:
    """Start importing what writing a run's first shard imports, on a thread of its own: pyarrow, pyarrow.parquet and
    pandas, which pyarrow imports at its first array made from a Python list, to check that the list is not a
    pandas object (about 0.4 s of CPU in all). A run whose games play in worker processes calls it as play begins,
    while it only waits for their records: its first shard is then written with them done, instead of holding the
    GIL for them when the first games finish and others wait to start (issue 37 item 5). Only the time changes: an
    import that fails here fails again, with its error, where the shard is written."""

    def load() -> None:
        try:
            import pyarrow as pa
            import pyarrow.parquet

            pa.array([0])
        except Exception:  # the shard's own imports raise it where it is written
            return

    thread = threading.Thread(target=load, name="mafiabench-import-writers", daemon=True)
    thread.start()
    return thread


def write_sidecar(lines_path: Path, lines: Sequence[bytes], batch: FlatBatch) -> Path | None:
    """Write the sidecar of the shard file `lines_path`, which holds `lines`, whose rows `batch` holds (built from the
    same lines). Returns its path, or None when it could not be written (a full disk, say): a sidecar is only a
    shortcut for the lander, so the shard does not fail for it."""
    if len(batch) != len(lines):
        raise ValueError(f"{lines_path}: {len(lines)} lines but {len(batch)} flattened records")
    size, crc = lines_crc32(lines)
    final = sidecar_path(lines_path)
    tmp: Path | None = None
    try:
        tmp = Path(tempfile.mkdtemp(dir=lines_path.parent, prefix=TMP_PREFIX, suffix=SUFFIX))
        written = lines_path.stat()  # its modification time vouches for the lines later (`check_sidecar`)
        if written.st_size != size:
            raise OSError(f"{written.st_size} bytes on disk but {size} in the lines given")
        meta = {"format": FORMAT, "version": VERSION, "schema_sha256": schema_sha256(),
                "lines": {"name": lines_path.name, "size": size, "crc32": crc, "mtime_ns": written.st_mtime_ns}}
        tables: dict[str, Any] = {}
        for table in GRAIN_TABLES:
            frame = batch.frames.get(table) if batch.frames else None
            if frame is None:
                frame = arrow_schema(table).empty_table()
            frame = frame.replace_schema_metadata({"mafiabench": json.dumps({**meta, "table": table})})
            name = f"{table}.parquet"
            import pyarrow as pa  # imported by the first shard written, not by a run with nothing to play
            import pyarrow.parquet as pq

            sink = pa.BufferOutputStream()
            pq.write_table(frame, sink, compression=COMPRESSION, write_statistics=False)  # nothing filters on them
            buf = sink.getvalue()
            (tmp / name).write_bytes(buf)
            tables[table] = {"file": name, "rows": frame.num_rows, "size": buf.size, "crc32": _crc32_bytes(buf)}
        manifest = {**meta, "games": len(batch), "tables": tables}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        if final.exists():  # names are unique (clock, pid, index): only a leftover of the same name
            shutil.rmtree(final)
        os.rename(tmp, final)
        return final
    except OSError as exc:
        log.warning("could not write the sidecar of %s (the lines are landed instead): %s", lines_path, exc)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return None


class Sidecar:
    """A checked sidecar: its table files, their rows, and how many games (lines) it holds."""

    __slots__ = ("games", "lines_path", "rows", "size", "tables")

    def __init__(self, lines_path: Path, tables: dict[str, Path], games: int, size: int, rows: dict[str, int]) -> None:
        self.lines_path = lines_path
        self.tables = tables
        self.games = games
        self.size = size  # bytes of its table files: how much a group of sidecars reads
        self.rows = rows  # rows per table file, as the writer counted them

    def has_rows(self, table: str) -> bool:
        """False when the writer counted no rows in the table's file: the lander need not open it."""
        return self.rows[table] > 0

    def read(self) -> FlatBatch:
        """The shard's records as a FlatBatch (for the lander's one-file path), read with pyarrow."""
        import pyarrow.parquet as pq

        frames = {}
        for table, path in self.tables.items():
            frame = pq.read_table(path)
            frame = frame.replace_schema_metadata(None)
            if frame.schema != arrow_schema(table):
                raise ValueError(f"{path}: columns {frame.schema.names} are not the raw table's")
            frames[table] = frame
        games = frames["raw_games"]
        if games.column("_record").to_pylist() != list(range(self.games)):
            raise ValueError(f"{self.tables['raw_games']}: not one row per line")
        return FlatBatch(games.column("game_id").to_pylist(), games.column("record_sha256").to_pylist(), frames,
                         path=self.lines_path)


def check_sidecar(lines_path: Path) -> tuple[Sidecar | None, str]:
    """The sidecar of a shard file if it matches the file, else (None, why not)."""
    folder = sidecar_path(lines_path)
    try:
        manifest = json.loads((folder / MANIFEST).read_bytes())
    except FileNotFoundError:
        return None, "no sidecar"
    except (OSError, ValueError) as exc:
        return None, f"unreadable manifest: {exc}"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        return None, "another format or version"
    if manifest.get("schema_sha256") != schema_sha256():
        return None, "written for other raw table columns"
    try:
        lines = manifest["lines"]
        on_disk = lines_path.stat()
        if lines["name"] != lines_path.name or on_disk.st_size != lines["size"]:
            return None, "made from another lines file"
        # The file the writer stat'ed after writing it, untouched since (same size and modification time), is not
        # read again: CRC-32 over a million games' 6.4 GB of lines was a quarter of their landing (BENCHMARKS.md).
        # A copied or touched file is checked by its content.
        if on_disk.st_mtime_ns != lines.get("mtime_ns") and crc32_file(lines_path) != (lines["size"], lines["crc32"]):
            return None, "made from another lines file"
        tables: dict[str, Path] = {}
        rows: dict[str, int] = {}
        size = 0
        for table in GRAIN_TABLES:
            entry = manifest["tables"][table]
            path = folder / entry["file"]
            if path.parent != folder:
                return None, f"table file outside the sidecar: {entry['file']!r}"
            if crc32_file(path) != (entry["size"], entry["crc32"]):
                return None, f"{table} file damaged or replaced"
            tables[table] = path
            rows[table] = int(entry["rows"])
            size += int(entry["size"])
        games = int(manifest["games"])
        if manifest["tables"]["raw_games"]["rows"] != games:
            return None, "raw_games rows do not match the games"
    except FileNotFoundError as exc:
        return None, f"missing file: {exc.filename}"
    except (OSError, KeyError, TypeError, ValueError) as exc:
        return None, f"bad manifest: {exc!r}"
    return Sidecar(lines_path, tables, games, size, rows), ""
