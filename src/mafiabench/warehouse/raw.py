"""The DuckDB warehouse: raw tables, one per grain, loaded only from game records.

DuckDB allows one writer process per file, so only the landing step writes here; concurrent game tasks hand
records to it. Loading is idempotent by game id: a game already landed (and not failed) is skipped, a failed game
is replaced by a later successful play, and everything happens in one transaction so a crash loses nothing landed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import orjson

from mafiabench.errors import UserError
from mafiabench.record import GameRecord, dumps, encode_record, statement_truth
from mafiabench.redact import scrub_json, scrub_obj

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

# pyarrow (with numpy, about 0.15 s of CPU) is imported where rows are flattened or landed, not with this module: a
# run with nothing to play never loads it (issue 31 item 2).

DEFAULT_WAREHOUSE = Path("warehouse") / "mafiabench.duckdb"

REPLACED_CALLS = "raw_replaced_calls"
LANDED_FILES = "raw_landed_files"
CELL_FINGERPRINTS = "raw_cell_fingerprints"
PROTOCOL_CARDS = "raw_protocol_cards"
RUNS = "raw_runs"
IMPORT_UNREADABLE = "raw_import_unreadable"

_MODEL_CALLS = """
        game_id VARCHAR, call_index INTEGER, player VARCHAR, action VARCHAR, phase VARCHAR, round INTEGER,
        provider VARCHAR, model VARCHAR, started_at VARCHAR, latency_ms DOUBLE, attempts INTEGER,
        input_tokens BIGINT, output_tokens BIGINT, cached_tokens BIGINT, error_class VARCHAR,
        finish_reason VARCHAR, format_failure BOOLEAN, prompt_chars INTEGER, prefix_reuse_chars INTEGER,
        response_text VARCHAR, request_json VARCHAR, temperature DOUBLE, max_tokens INTEGER,
        reasoning_effort VARCHAR"""

# Every table the warehouse's writers fill, declared once (name -> columns): `ensure_schema` creates them, landing
# writes them, and they are the dbt project's sources (`transform/sql/models/staging/sources/<table>.yml`, which
# tests/warehouse/test_raw_tables.py compares with these, column for column). The build's own tables are
# `warehouse.builds`'.
RAW_SCHEMA: dict[str, str] = {
    "raw_games": """
        game_id VARCHAR PRIMARY KEY, record_version INTEGER, variant VARCHAR, seed UBIGINT,
        experiment VARCHAR, cell VARCHAR, game_index INTEGER, capabilities VARCHAR[], target_model VARCHAR,
        background VARCHAR, status VARCHAR, winner VARCHAR, outcome_reason VARCHAR, tie_decided BOOLEAN,
        days INTEGER, n_players INTEGER, n_mafia INTEGER, valid BOOLEAN, invalid_reason VARCHAR, error VARCHAR,
        prompt_version VARCHAR, prompt_sha256 VARCHAR, package_version VARCHAR, git_commit VARCHAR,
        source VARCHAR, source_file VARCHAR, source_sha256 VARCHAR, rules_json VARCHAR, record_sha256 VARCHAR,
        landed_at TIMESTAMP, batch_id VARCHAR, background_inferred BOOLEAN""",
    "raw_players": """
        game_id VARCHAR, seat INTEGER, name VARCHAR, role VARCHAR, team VARCHAR, agent VARCHAR,
        provider VARCHAR, model VARCHAR, model_raw VARCHAR, model_inferred BOOLEAN""",
    "raw_events": """
        game_id VARCHAR, seq INTEGER, phase VARCHAR, round INTEGER, type VARCHAR, actor VARCHAR, target VARCHAR,
        text VARCHAR, visibility VARCHAR, format_failure BOOLEAN, random_fallback BOOLEAN, truncated BOOLEAN,
        tie_break BOOLEAN, data_json VARCHAR""",
    "raw_model_calls": _MODEL_CALLS,
    "raw_beliefs": """
        game_id VARCHAR, seq INTEGER, player VARCHAR, phase VARCHAR, round INTEGER, action VARCHAR,
        candidate VARCHAR, probability DOUBLE, uniform_fallback BOOLEAN, mafia_probability DOUBLE""",
    # Statement labels (`[statements]`, agents/statements.py): one row per public message of a game played with
    # them, with the truth the game gives (the speaker's role and team, the claims it makes that the roles check)...
    "raw_statements": """
        game_id VARCHAR, seq INTEGER, phase VARCHAR, round INTEGER, speaker VARCHAR, speaker_role VARCHAR,
        speaker_team VARCHAR, text VARCHAR, listeners VARCHAR[], n_claims INTEGER, n_checkable_claims INTEGER,
        n_false_claims INTEGER, false_claim BOOLEAN, self_claim VARCHAR, self_claim_true BOOLEAN, accused VARCHAR[],
        accusations_true BOOLEAN, claims_json VARCHAR""",
    # ... and one row per (message, assessor): the speaker's own label and each living listener's.
    "raw_statement_labels": """
        game_id VARCHAR, seq INTEGER, assessor VARCHAR, kind VARCHAR, call_index INTEGER, is_deceptive BOOLEAN,
        confidence DOUBLE, deception_type VARCHAR, suspicion_level DOUBLE, reasoning VARCHAR,
        chain_of_thought VARCHAR, format_failure BOOLEAN, parse_error VARCHAR""",
    # The Mafia Detector's answers (mafiabench.detect): one row per (game, day cut, detector, prompt sha256).
    "raw_detections": """
        game_id VARCHAR, cut INTEGER, detector VARCHAR, prompt_sha256 VARCHAR, prompt_version VARCHAR,
        temperature DOUBLE, k INTEGER, n_candidates INTEGER, predicted VARCHAR[], format_failure BOOLEAN,
        random_fallback BOOLEAN, parse_error VARCHAR, response_text VARCHAR, transcript_sha256 VARCHAR,
        transcript_lines INTEGER, input_tokens BIGINT, output_tokens BIGINT, latency_ms DOUBLE, attempts INTEGER,
        detected_at TIMESTAMP""",
    # The cleansed transcript each detection read: one row per (game, cut, transcript sha256), for the dashboards.
    "raw_detection_transcripts": """
        game_id VARCHAR, cut INTEGER, transcript_sha256 VARCHAR, k INTEGER, players VARCHAR[], lines VARCHAR[]""",
    # The calls of a failed attempt that a replay replaced: the game's latest record is in the grain tables (and its
    # raw file), but what the earlier attempts spent stays counted here (budget, costs), never lost.
    REPLACED_CALLS: _MODEL_CALLS + ", replaced_at TIMESTAMP, replaced_record_sha256 VARCHAR",
    # Which shard files of a raw folder reached the warehouse (mafiabench.warehouse.landing), in the same
    # transaction as their records.
    LANDED_FILES: """
        experiment VARCHAR, file VARCHAR, games INTEGER, landed_at TIMESTAMP, PRIMARY KEY (experiment, file)""",
    # What each study cell's games are (design.cell_fingerprint), recorded when its first games are planned and
    # checked on every resume; `id_prefix` is the part of game ids shared by the cell's games.
    CELL_FINGERPRINTS: """
        experiment VARCHAR, cell VARCHAR, id_prefix VARCHAR PRIMARY KEY, fingerprint VARCHAR, content_json VARCHAR,
        recorded_at TIMESTAMP""",
    # The protocol card of each experiment that names a reference protocol (mafiabench.protocols): one row per
    # aspect, replaced whenever a run of the experiment starts, so it says what the experiment's latest run played.
    PROTOCOL_CARDS: """
        experiment VARCHAR, protocol VARCHAR, protocol_title VARCHAR, repository VARCHAR, reference_commit VARCHAR,
        position INTEGER, aspect VARCHAR, aspect_group VARCHAR, label VARCHAR, reference_value VARCHAR,
        experiment_value VARCHAR, matches BOOLEAN, source VARCHAR, note VARCHAR, recorded_at TIMESTAMP,
        PRIMARY KEY (experiment, aspect)""",
    # The games an import could not read (importers.run_import): one row per file left out, replaced by the next
    # import of the same source and path, so the pages can name what an import left out and why.
    IMPORT_UNREADABLE: """
        source VARCHAR, path VARCHAR, file VARCHAR, reason VARCHAR, imported_at TIMESTAMP""",
    # Each run of a study or an import (mafiabench.warehouse.landing.record_run): when, what it played and spent.
    RUNS: """
        run_id VARCHAR PRIMARY KEY, experiment VARCHAR, orchestrator VARCHAR, status VARCHAR,
        started_at TIMESTAMP, finished_at TIMESTAMP, wall_s DOUBLE, games_planned INTEGER,
        games_already_landed INTEGER, games_loaded_from_raw INTEGER, games_to_play INTEGER, games_played INTEGER,
        games_done INTEGER, games_failed INTEGER, games_not_started INTEGER, budget_stopped BOOLEAN, calls BIGINT,
        failed_calls BIGINT, format_failures BIGINT, input_tokens BIGINT, output_tokens BIGINT, cached_tokens BIGINT,
        cost_usd DOUBLE, unpriced_models VARCHAR[], price_version VARCHAR, games_concurrency DOUBLE,
        calls_concurrency DOUBLE, shard_errors INTEGER, summary_json VARCHAR""",
}


def column_names(table: str) -> list[str]:
    """The columns of a declared table, in order (its table constraints left out)."""
    return [c.split()[0] for c in RAW_SCHEMA[table].split("PRIMARY KEY (")[0].split(",") if c.strip()]

DETECTION_KEY = ("game_id", "cut", "detector", "prompt_sha256")

# The tables a game record lands in (and a shard's sidecar holds).
GRAIN_TABLES = (
    "raw_games", "raw_players", "raw_events", "raw_model_calls", "raw_beliefs", "raw_statements",
    "raw_statement_labels",
)

# The rows of the published build's that the lander deleted from each of those tables (a replaced game's earlier rows,
# when that record is the published fct_games' one: `load_flat`), one row per landing and table, since the published
# build: emptied by every publish, which records the rows it read (transform.build.increment.record). The gate then
# knows a raw table's rows now are the published build's, less these, plus the increment's (quality.delta); the rows
# of a record landed since and replaced again (a game replaced twice, a new game replaced) were never the published
# build's, and are not counted. Bookkeeping, not a declared raw table.
DELETED_ROWS = "build_deleted_rows"
DELETED_ROWS_SCHEMA = "source VARCHAR, n_rows BIGINT"


def deleted_rows(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """The published build's rows the lander deleted from each table a game record lands in since that build."""
    if not con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?",
                       [DELETED_ROWS]).fetchall():
        return {}
    return {str(t): int(n) for t, n in con.execute(
        f"select source, sum(n_rows) from main.{DELETED_ROWS} group by source").fetchall()}



class WarehouseBusyError(UserError):
    """Another process holds the warehouse file (DuckDB allows one writer per file)."""


# Row groups of the landing writer. Every landing ends in a checkpoint, which rewrites the table's last, partly
# filled row group; with DuckDB's default (122,880 rows) and ~30 KB prompts in `raw_model_calls.request_json`, that
# row group alone grows the checkpoint's peak towards 3.6 GB as a long run lands shard after shard. With 2,048 rows
# it stays flat (benchmarks/bench_checkpoint_memory.py, BENCHMARKS.md).
LANDING_ROW_GROUP_SIZE = 2048

# Names DuckDB keeps for itself: a warehouse file with such a stem is opened directly (default row groups).
_RESERVED_CATALOGS = frozenset({"memory", "system", "temp", "main"})


def connect(
    path: Path | str = DEFAULT_WAREHOUSE, *, read_only: bool = False, landing: bool = False
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; a clear error instead of DuckDB's lock message when another process has it.

    `landing=True` is for writers that append large texts step after step (runs with model calls, whose prompts
    are ~30 KB a call; the detector's transcripts): the file is attached under its usual catalog name with small
    row groups, which keeps each checkpoint's memory bounded. The price is for readers: the marts build takes about
    a quarter more CPU over such tables (benchmarks/bench_row_groups.py), so policy runs, imports and builds open the
    file directly (dbt does too, in the same process), without DuckDB's vacuum at their checkpoints: merging the
    row groups a build appended to its tables costs every checkpoint after it, a landing's too, until the build
    that compacts (warehouse.builds.VACUUM_EVERY)."""
    path = Path(path)
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if landing and not read_only and path.stem.lower() not in _RESERVED_CATALOGS:
            con = duckdb.connect()
            try:
                literal = str(path).replace("'", "''")
                alias = path.stem.replace('"', '""')
                con.execute(f"attach '{literal}' as \"{alias}\" (row_group_size {LANDING_ROW_GROUP_SIZE})")
                con.execute(f'use "{alias}"')
            except BaseException:
                con.close()
                raise
        else:
            con = duckdb.connect(str(path), read_only=read_only)
            if not read_only:  # the build's publish vacuums when it compacts (warehouse.builds.VACUUM_EVERY)
                con.execute("set global max_vacuum_tasks = 0")
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise WarehouseBusyError(
                f"warehouse {path} is in use by another process; wait for it to finish "
                f"(DuckDB allows one process per file). Details: {exc}"
            ) from exc
        raise
    if not read_only:
        ensure_schema(con)
    return con


# Columns added after a table's first version, added in place to warehouses created before them.
_ADDED_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    # The source's own batch of an imported game (Mini-Mafia batches); whether the background seats' models are an
    # importer's inference rather than the source's record (the Mini-Mafia web game's session labels).
    "raw_games": (("batch_id", "VARCHAR"), ("background_inferred", "BOOLEAN")),
    # Whether the seat's model is that inference (a model's seat in such a game: `design.inferred_players`).
    "raw_players": (("model_inferred", "BOOLEAN"),),
    # P(candidate is mafia) where the prompt elicited it (Strategema's belief state), beside the action distribution
    "raw_beliefs": (("mafia_probability", "DOUBLE"),),
    # The settings each call was sent with, typed (they are in request_json too): marts break results down by them.
    **{
        t: (("temperature", "DOUBLE"), ("max_tokens", "INTEGER"), ("reasoning_effort", "VARCHAR"))
        for t in ("raw_model_calls", "raw_replaced_calls")
    },
}


# How a column is stored, where DuckDB's default for strings (dictionary and FSST, chosen per segment) is the wrong
# one: storage, not schema (RAW_SCHEMA, whose text the sidecars and the build's state key are checked against, stays
# as it was). `request_json` holds every message a call sent, kilobytes each, and a game's calls repeat its growing
# transcript: 5,000 distinct Strategema games' 414 MB of prompts were written at 51-56 MB/s into 183 MB with the
# default, at 95-111 MB/s into 10 MB with zstd; a vacuum rewrites merged row groups at that rate (50,000 copies of the
# demo's games: 57 s against 3.3 s; BENCHMARKS.md). A table created before keeps its column as it was.
COLUMN_COMPRESSION: dict[str, dict[str, str]] = {
    t: {"request_json": "zstd"} for t in ("raw_model_calls", REPLACED_CALLS)
}


def table_ddl(table: str) -> str:
    """A raw table's column definitions as created: RAW_SCHEMA's, with `COLUMN_COMPRESSION`'s storage."""
    columns = RAW_SCHEMA[table]
    for column, method in COLUMN_COMPRESSION.get(table, {}).items():
        # The column's whole definition: its name alone (not the end of another's), VARCHAR, then a comma or the end.
        columns, found = re.subn(rf"(?<![\w])({re.escape(column)} VARCHAR)(?=\s*(,|$))",
                                 rf"\1 USING COMPRESSION {method}", columns)
        if found != 1:
            raise ValueError(f"COLUMN_COMPRESSION names {table}.{column}, which RAW_SCHEMA does not declare VARCHAR")
    return columns


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    for table in RAW_SCHEMA:
        con.execute(f"create table if not exists {table} ({table_ddl(table)})")
    for table, added in _ADDED_COLUMNS.items():
        for name, kind in added:
            con.execute(f"alter table {table} add column if not exists {name} {kind}")


def record_protocol_card(con: duckdb.DuckDBPyConnection, experiment: str, rows: Sequence[dict[str, Any]]) -> None:
    """Replace the experiment's protocol card with `rows` (mafiabench.protocols.rows_for_warehouse), in one
    transaction; no rows (the experiment names no reference now) removes an earlier card."""
    columns = column_names(PROTOCOL_CARDS)
    columns.remove("recorded_at")
    con.execute("begin transaction")
    try:
        con.execute(f"delete from {PROTOCOL_CARDS} where experiment = ?", [experiment])
        if rows:
            con.executemany(
                f"insert into {PROTOCOL_CARDS} ({', '.join(columns)}, recorded_at) "
                f"values ({', '.join('?' for _ in columns)}, now())",
                [[row[c] for c in columns] for row in rows],
            )
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise


@dataclass(frozen=True)
class CellFingerprint:
    experiment: str
    cell: str
    id_prefix: str
    content: dict[str, Any]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def check_cell_fingerprints(
    con: duckdb.DuckDBPyConnection, cells: Iterable[CellFingerprint], *, source: str = ""
) -> None:
    """Record each cell's fingerprint, or refuse (naming every changed setting) a cell whose games already in the
    warehouse were played under another one. Cells landed before fingerprints existed are recorded as they are now."""
    cells = list(cells)
    if not cells:
        return
    stored = {
        r[0]: (r[1], json.loads(r[2]))
        for r in con.execute(
            f"select id_prefix, fingerprint, content_json from {CELL_FINGERPRINTS} "
            "where id_prefix in (select unnest(?))",
            [[c.id_prefix for c in cells]],
        ).fetchall()
    }
    changed: list[str] = []
    replace: list[CellFingerprint] = []
    for c in cells:
        if c.id_prefix in stored and stored[c.id_prefix][0] != c.sha256:
            (landed,) = con.execute(
                "select count(*) from raw_games where starts_with(game_id, ?)", [c.id_prefix]
            ).fetchone() or (0,)
            if not landed:  # recorded, but no game of it landed: nothing was played the old way
                replace.append(c)
                continue
            diffs = _differences(stored[c.id_prefix][1], c.content)
            changed.append(f"cell {c.cell!r}: " + "; ".join(diffs[:8]) + (" …" if len(diffs) > 8 else ""))
    if changed:
        raise UserError(
            f"{source or 'experiment'}: {len(changed)} cell(s) changed since their games were landed, so a re-run "
            "would skip games played the old way: " + " | ".join(changed) + ". Give a changed cell (or the "
            "experiment) a new name, or set a new `seed`, to play it as new games."
        )
    if replace:
        con.execute(f"delete from {CELL_FINGERPRINTS} where id_prefix in (select unnest(?))",
                    [[c.id_prefix for c in replace]])
    new = [c for c in cells if c.id_prefix not in stored] + replace
    if new:
        con.executemany(
            f"insert into {CELL_FINGERPRINTS} values (?, ?, ?, ?, ?, now())",
            [(c.experiment, c.cell, c.id_prefix, c.sha256, json.dumps(c.content, sort_keys=True)) for c in new],
        )


def _differences(old: Any, new: Any, path: str = "") -> list[str]:
    """`rules.discussion_rounds: 2 → 3` for every leaf that differs."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if old == new else [f"{path or 'value'}: {old!r} → {new!r}"]


@dataclass
class LoadResult:
    inserted: int = 0
    replaced: int = 0
    skipped: int = 0
    files_from_sidecar: int = 0  # shard files landed from their columnar sidecar (`landing.land_pending`)
    files_from_lines: int = 0  # shard files landed by parsing their lines


def landed_ids(con: duckdb.DuckDBPyConnection, *, include_failed: bool = False) -> set[str]:
    """Game ids already landed; failed games count as not landed unless asked (a re-run replays them)."""
    where = "" if include_failed else "where status <> 'failed'"
    return {r[0] for r in con.execute(f"select game_id from raw_games {where}").fetchall()}


def load_records(
    con: duckdb.DuckDBPyConnection, records: Iterable[GameRecord], *, replace: bool = False
) -> LoadResult:
    """Land records in one transaction, idempotent by game id (see `load_encoded`)."""
    return load_encoded(con, [encode_record(r) for r in records], replace=replace)


Encoded = tuple[dict[str, Any], bytes]  # (record dict, its stored line): `record.encode_record`


def load_encoded(
    con: duckdb.DuckDBPyConnection,
    entries: Sequence[Encoded],
    *,
    replace: bool = False,
    after: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> LoadResult:
    """Land encoded records in one transaction, idempotent by game id (see `load_flat`)."""
    return load_flat(con, FlatBatch.of(entries), replace=replace, after=after)


class FlatBatch:
    """Records ready to land: per record its game id and line checksum, and the raw tables' rows of all of them as
    Arrow tables (`flatten_encoded`). Built where the records are written or read (a worker process, for policy
    games and for a backlog of shard files), so the lander only decides what to keep and inserts. The lines (or
    the shard file holding them) are kept for `legacy_sha`, needed only to recognise a failed game landed before
    shard files."""

    __slots__ = ("frames", "ids", "lines", "path", "shas")

    def __init__(
        self,
        ids: list[str],
        shas: list[str],
        frames: dict[str, pa.Table],
        *,
        lines: list[bytes] | None = None,
        path: Path | None = None,
    ) -> None:
        self.ids = ids
        self.shas = shas
        self.frames = frames
        self.lines = lines
        self.path = path

    @classmethod
    def of(cls, entries: Sequence[Encoded], *, path: Path | None = None, keep_lines: bool = True) -> FlatBatch:
        entries = list(entries)
        shas = [line_sha256(line) for _, line in entries]
        return cls(
            [d["game_id"] for d, _ in entries],
            shas,
            flatten_encoded(entries, shas) if entries else {},
            lines=[line for _, line in entries] if keep_lines else None,
            path=path,
        )

    @classmethod
    def read(cls, path: Path) -> FlatBatch:
        """A shard file's records, flattened (the lines stay in the file)."""
        return cls.of([(orjson.loads(line), line) for line in shard_lines(path)], path=path, keep_lines=False)

    def __len__(self) -> int:
        return len(self.ids)

    def legacy_sha(self, i: int) -> str | None:
        lines = self.lines if self.lines is not None else shard_lines(self.path) if self.path is not None else None
        return _legacy_sha256(orjson.loads(lines[i])) if lines is not None else None


def shard_lines(path: Path) -> list[bytes]:
    """The record lines of a shard file (JSON lines, `landing.write_shard`)."""
    return [line for line in path.read_bytes().split(b"\n") if line]


def shard_bytes(lines: Sequence[bytes]) -> bytes:
    """A shard file's content: its record lines, each ending in a newline."""
    return b"\n".join([*lines, b""]) if lines else b"\n"  # one copy of the bytes, not two


def load_flat(
    con: duckdb.DuckDBPyConnection,
    batch: FlatBatch,
    *,
    replace: bool = False,
    after: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> LoadResult:
    """Land a batch of records in one transaction, idempotent by game id.

    A game already landed is skipped unless it was failed (or `replace` is set), in which case the newer record
    replaces it, whatever its status: the warehouse holds the same latest record as the raw file. The replaced
    attempt's model calls move to `raw_replaced_calls`, so its spend stays counted. The same record loaded twice
    changes nothing. `after(con)` runs inside the same transaction (the lander marks a shard file landed there).
    """
    result = LoadResult()
    if not len(batch):
        if after is not None:
            after(con)
        return result
    existing = {
        g: (status, sha)
        for g, status, sha in con.execute(
            "select game_id, status, record_sha256 from raw_games where game_id in (select unnest($ids))",
            {"ids": batch.ids},
        ).fetchall()
    }
    seen: set[str] = set()
    load_ids: list[str] = []
    keep: list[int] = []
    replaced: list[str] = []
    for i, (gid, line_sha) in enumerate(zip(batch.ids, batch.shas, strict=True)):
        if gid in seen:
            result.skipped += 1
            continue
        seen.add(gid)
        status, sha = existing.get(gid, (None, None))
        if status is None:
            result.inserted += 1
        elif (replace or status == "failed") and sha != line_sha and sha != batch.legacy_sha(i):
            result.replaced += 1
            replaced.append(gid)
        else:
            result.skipped += 1
            continue
        load_ids.append(gid)
        keep.append(i)
    if not load_ids:
        if after is not None:
            after(con)
        return result
    frames = batch.frames
    if len(keep) < len(batch):  # some skipped, or a game twice (its first record is the one landed)
        frames = _keep(frames, keep)
    import pyarrow as pa

    now = pa.array([datetime.now(UTC).replace(tzinfo=None)], pa.timestamp("us"))
    games = frames["raw_games"]
    games = games.set_column(
        games.schema.get_field_index("landed_at"), "landed_at", pa.repeat(now[0], games.num_rows)
    )
    frames = {**frames, "raw_games": games}
    con.execute("begin transaction")
    try:
        if replaced:
            con.execute(
                f"""insert into {REPLACED_CALLS} by name  -- by name: older files have the added columns last
                    select c.*, now()::timestamp as replaced_at, g.record_sha256 as replaced_record_sha256
                    from raw_model_calls c join raw_games g using (game_id)
                    where c.game_id in (select unnest($ids))""",
                {"ids": replaced},
            )
        fresh = not existing
        published = _published_records(con, replaced) if replaced else []
        others = sorted(set(load_ids) - set(published)) if published else load_ids
        deleted: list[tuple[str, int]] = []
        for table in GRAIN_TABLES:
            if not fresh:
                if published:  # the published build's rows: counted (DELETED_ROWS)
                    n = con.execute(f"delete from {table} where game_id in (select unnest($ids))",
                                    {"ids": published}).fetchall()[0][0]
                    if n:
                        deleted.append((table, int(n)))
                con.execute(f"delete from {table} where game_id in (select unnest($ids))", {"ids": others})
            frame = frames[table]
            if frame.num_rows:
                con.register("_frame", frame)
                cols = ", ".join(_columns(table))
                con.execute(f"insert into {table} ({cols}) select {cols} from _frame")
                con.unregister("_frame")
        if deleted:
            con.execute(f"create table if not exists {DELETED_ROWS} ({DELETED_ROWS_SCHEMA})")
            con.executemany(f"insert into {DELETED_ROWS} values (?, ?)", deleted)
        if after is not None:
            after(con)
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    return result


def _published_records(con: duckdb.DuckDBPyConnection, games: list[str]) -> list[str]:
    """Those of `games` whose landed record is the published build's (the published fct_games holds it: the same
    landed mark and checksum, as the build's plan compares them), so their rows now are rows that build read; none
    when nothing is published."""
    if not con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = 'fct_games' "
                       "and not temporary").fetchall():
        return []
    return [str(g) for (g,) in con.execute(
        "select r.game_id from main.raw_games r join main.fct_games f using (game_id) "
        "where r.game_id in (select unnest($ids)) and f.landed_at is not distinct from r.landed_at "
        "and f.record_sha256 is not distinct from r.record_sha256", {"ids": games}).fetchall()]


def _keep(frames: dict[str, pa.Table], records: list[int]) -> dict[str, pa.Table]:
    """The rows of the given records only (by the `_record` column `flatten_encoded` adds)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pa.array(records, pa.int32())
    return {t: f.filter(pc.is_in(f.column(RECORD_COLUMN), value_set=wanted)) for t, f in frames.items()}


def line_sha256(line: bytes) -> str:
    """`raw_games.record_sha256`: the sha256 of the record's line as stored in its shard file."""
    return hashlib.sha256(line).hexdigest()


def _legacy_sha256(d: dict[str, Any]) -> str:
    """What `record_sha256` was before shard files (of the indented record): a failed game landed then, re-read
    now, is recognised as the same record instead of replacing itself."""
    return hashlib.sha256(scrub_json(dumps(d)).encode()).hexdigest()


def record_sha256(rec: GameRecord) -> str:
    """The checksum stored in `raw_games.record_sha256`: of the record's line as written (secrets scrubbed)."""
    return line_sha256(encode_record(rec)[1])


def detection_keys(con: duckdb.DuckDBPyConnection) -> set[tuple[str, int, str, str]]:
    """(game, cut, detector, prompt sha256) of every detection landed."""
    return {(g, int(c), d, p) for g, c, d, p in con.execute(
        "select game_id, cut, detector, prompt_sha256 from raw_detections").fetchall()}


def load_detections(
    con: duckdb.DuckDBPyConnection,
    rows: Sequence[dict[str, Any]],
    transcripts: Sequence[dict[str, Any]] = (),
) -> LoadResult:
    """Land detector answers in one transaction, idempotent by (game, cut, detector, prompt sha256): a key already
    landed is skipped, so a re-run (or a retried task) never duplicates or overwrites a detection. Every text is
    scrubbed of known secrets first (a hostile answer could echo a key). `transcripts` are the cleansed transcripts
    read, landed once per (game, cut, transcript sha256)."""
    rows = [scrub_obj(r) for r in rows]
    result = LoadResult()
    have = detection_keys(con)
    fresh: list[dict[str, Any]] = []
    for row in rows:
        key = tuple(row[c] for c in DETECTION_KEY)
        if key in have:
            result.skipped += 1
            continue
        have.add(key)  # type: ignore[arg-type]
        fresh.append(row)
    if not fresh:
        return result
    frame = _frame(fresh, "raw_detections")
    have_t = {(g, int(c), h) for g, c, h in con.execute(
        "select game_id, cut, transcript_sha256 from raw_detection_transcripts").fetchall()}
    new_t: dict[tuple[str, int, str], dict[str, Any]] = {}
    for t in transcripts:
        key_t = (t["game_id"], int(t["cut"]), t["transcript_sha256"])
        if key_t not in have_t:
            new_t[key_t] = scrub_obj(t)
    con.execute("begin transaction")
    try:
        for table, part in (("raw_detections", frame), ("raw_detection_transcripts",
                                                        _frame(list(new_t.values()), "raw_detection_transcripts"))):
            if part.height == 0:
                continue
            con.register("_frame", part.to_arrow())
            cols = ", ".join(part.columns)
            con.execute(f"insert into {table} ({cols}) select {cols} from _frame")
            con.unregister("_frame")
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    result.inserted = len(fresh)
    return result


def _provider(agent: str) -> str:
    return agent.split("/", 1)[0] if "/" in agent else agent


def flatten(records: Sequence[GameRecord]) -> dict[str, pl.DataFrame]:
    """Records → one DataFrame per raw table (what `load_records` inserts)."""
    frames = flatten_encoded([encode_record(r) for r in records])
    import polars as pl

    return {t: pl.from_arrow(f.drop_columns([RECORD_COLUMN])) for t, f in frames.items()}  # type: ignore[misc]


def flatten_encoded(entries: Sequence[Encoded], shas: Sequence[str] | None = None) -> dict[str, pa.Table]:
    """Encoded records → one Arrow table per raw table (bulk insert is ~1000× faster than row inserts in DuckDB).
    Built as row tuples transposed once per table, events' fields taken with one `itemgetter` call each: at
    thousands of games a second, a list append per field and row was a fifth of a scripted game's CPU. `shas`:
    the lines' `line_sha256`, when the caller has them already."""
    now = datetime.now(UTC).replace(tzinfo=None)
    rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in GRAIN_TABLES}
    g, pl_, _, ca, be, st, sl = (rows[t] for t in GRAIN_TABLES)  # events: column-wise, below
    dumps_sorted = _SORTED.encode
    records: dict[str, list[int]] = {t: [] for t in GRAIN_TABLES}
    evs: list[dict[str, Any]] = []  # every event of the batch, and the record each came from: taken column-wise
    ev_rec: list[int] = []
    gids: list[str] = []
    for i, (d, line) in enumerate(entries):
        gid = d["game_id"]
        design = d.get("design") or {}
        prompt = d.get("prompt") or {}
        prov = d.get("provenance") or {}
        outcome = d["outcome"]
        validity = d.get("validity") or {}
        players = d["players"]
        g.append((  # in RAW_SCHEMA["raw_games"]'s order
            gid,
            d["record_version"],
            d["variant"],
            d.get("seed"),
            design.get("experiment"),
            design.get("cell"),
            design.get("game_index"),
            list(design.get("capabilities") or []),
            design.get("target"),
            design.get("background"),
            outcome.get("status"),
            outcome.get("winner"),
            outcome.get("reason"),
            bool(outcome.get("tie_decided", False)),
            outcome.get("days"),
            len(players),
            sum(1 for p in players if p["team"] == "mafia"),
            bool(validity.get("valid", True)),
            validity.get("reason"),
            d.get("error"),
            prompt.get("version"),
            prompt.get("sha256"),
            prov.get("package_version"),
            prov.get("git_commit"),
            prov.get("source"),
            prov.get("source_file"),
            prov.get("source_sha256"),
            _sorted_json(d.get("rules") or {}),
            shas[i] if shas is not None else line_sha256(line),
            now,
            design.get("batch_id"),
            bool(design.get("background_inferred", False)),
        ))
        # The players whose models an importer inferred (`design.inferred_players`: the web game's model seats).
        inferred = (design.get("inferred_players") or ()) if design.get("background_inferred") else ()
        for p in players:
            pl_.append((
                gid, p.get("seat"), p["name"], p["role"], p["team"], p["agent"], _provider(p["agent"]), p["model"],
                p["model_raw"] if p.get("model_raw") is not None else p["model"],
                p["name"] in inferred,
            ))
        events = [e if type(e) is dict else vars(e) for e in d.get("events") or ()]  # `Event`s: their fields
        evs += events
        ev_rec += [i] * len(events)
        gids.append(gid)
        for c in d.get("calls") or ():
            request = c.get("request")
            sent = (request.get("settings") if type(request) is dict else None) or {}
            ca.append((  # in RAW_SCHEMA["raw_model_calls"]'s order
                gid,
                c.get("index"),
                c.get("player"),
                c.get("action"),
                c.get("phase"),
                c.get("round"),
                c.get("provider"),
                c.get("model"),
                c.get("started_at"),
                float(c.get("latency_ms") or 0.0),
                c.get("attempts"),
                c.get("input_tokens"),
                c.get("output_tokens"),
                c.get("cached_tokens"),
                c.get("error_class"),
                c.get("finish_reason"),
                bool((c.get("parse") or {}).get("format_failure", False)),
                c.get("prompt_chars"),
                c.get("prefix_reuse_chars"),
                c.get("response"),
                dumps_sorted(request),
                sent.get("temperature"),
                sent.get("max_tokens"),
                sent.get("reasoning_effort"),
            ))
        if d.get("statements"):
            _statement_rows(gid, d, events, st, sl)
        for t in GRAIN_TABLES:
            rec = records[t]
            rec.extend([i] * (len(rows[t]) - len(rec)))
    columns: dict[str, list[Any]] = {t: [] for t in GRAIN_TABLES}
    columns["raw_events"], records["raw_events"] = _event_columns(evs, ev_rec, gids)
    for k in (k for k, e in enumerate(evs) if e["type"] == "belief"):
        e = evs[k]
        data = e.get("data") or {}
        suspected = data.get("mafia_probability") or {}
        for cand, prob in (data.get("probability") or {}).items():
            p_mafia = suspected.get(cand)
            be.append((
                gids[ev_rec[k]], e["seq"], e.get("actor"), e["phase"], e["round"], data.get("action"), cand,
                float(prob), e.get("random_fallback"), None if p_mafia is None else float(p_mafia),
            ))
            records["raw_beliefs"].append(ev_rec[k])
    import pyarrow as pa

    out = {}
    for t in GRAIN_TABLES:
        names = _columns(t)
        cols = columns[t] or (list(zip(*rows[t], strict=True)) if rows[t] else [() for _ in names])
        out[t] = pa.Table.from_pydict(
            {**dict(zip(names, cols, strict=True)), RECORD_COLUMN: records[t]}, schema=_arrow_schema(t)
        )
    return out


def _statement_rows(
    gid: str, d: dict[str, Any], events: list[dict[str, Any]], st: list[tuple[Any, ...]], sl: list[tuple[Any, ...]]
) -> None:
    """`raw_statements` and `raw_statement_labels` rows of a record played with `[statements]`."""
    roles = {p["name"]: p["role"] for p in d["players"]}
    teams = {p["name"]: p["team"] for p in d["players"]}
    texts = {e["seq"]: e.get("text") for e in events if e["type"] == "message"}
    for entry in d["statements"]:
        truth = statement_truth(entry, roles)
        speaker = entry.get("speaker")
        st.append((  # in RAW_SCHEMA["raw_statements"]'s order
            gid, entry["seq"], entry.get("phase"), entry.get("round"), speaker, roles.get(speaker),
            teams.get(speaker), texts.get(entry["seq"]), list(entry.get("listeners") or []), truth["n_claims"],
            truth["n_checkable_claims"], truth["n_false_claims"], truth["false_claim"], truth["self_claim"],
            truth["self_claim_true"], truth["accused"], truth["accusations_true"],
            _sorted_json(entry.get("claims") or []),
        ))
        for lb in entry.get("labels") or ():
            sl.append((
                gid, entry["seq"], lb.get("assessor"), lb.get("kind"), lb.get("call"), lb.get("is_deceptive"),
                lb.get("confidence"), lb.get("deception_type"), lb.get("suspicion_level"), lb.get("reasoning"),
                lb.get("chain_of_thought"), bool(lb.get("format_failure")), lb.get("error"),
            ))


def _event_columns(
    evs: list[dict[str, Any]], ev_rec: list[int], gids: list[str]
) -> tuple[list[Any], list[int]]:
    """`raw_events`' columns of a batch's events, taken a column at a time (one `itemgetter` call an event, one
    transposition; no row tuple built an event)."""
    if not evs:
        return [], []
    try:
        fields = list(map(_EVENT_GET, evs))
    except KeyError:  # a record missing optional event keys: one at a time
        fields = [tuple(e.get(k) for k in _EVENT_FIELDS) for e in evs]
    data_json = [_sorted_json(data) if (data := e.get("data")) else None for e in evs]
    return [[gids[i] for i in ev_rec], *zip(*fields, strict=True), data_json], ev_rec


# json.dumps(x, sort_keys=True), as the columns have always held it (C encoder, compiled once).
_SORTED = json.JSONEncoder(sort_keys=True)
_SORTED_CACHE: dict[bytes, str] = {}
_SORTED_CACHE_MAX = 100_000


def _sorted_json(value: Any) -> str:
    """`json.dumps(value, sort_keys=True)`, remembered by the value's orjson bytes: events' data repeat a lot
    (a scripted game's twenty are drawn from a few thousand distinct ones), and orjson's bytes cost a tenth of the
    standard encoder's sorted text. Equal bytes mean equal values, so the text is the same as computing it."""
    try:
        key = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):  # non-string keys, an integer past 64 bits: no shortcut
        return _SORTED.encode(value)
    text = _SORTED_CACHE.get(key)
    if text is None:
        if len(_SORTED_CACHE) >= _SORTED_CACHE_MAX:
            _SORTED_CACHE.clear()
        text = _SORTED_CACHE[key] = _SORTED.encode(value)
    return text
_EVENT_FIELDS = (
    "seq", "phase", "round", "type", "actor", "target", "text", "visibility", "format_failure", "random_fallback",
    "truncated", "tie_break",
)
_EVENT_GET = operator.itemgetter(*_EVENT_FIELDS)


@functools.cache
def _arrow_types() -> dict[str, Any]:
    import pyarrow as pa

    return {
        "VARCHAR": pa.string(),
        "INTEGER": pa.int32(),
        "BIGINT": pa.int64(),
        "UBIGINT": pa.uint64(),
        "DOUBLE": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us"),
        "VARCHAR[]": pa.list_(pa.string()),
    }


def _columns(table: str) -> list[str]:
    return [col.split()[0] for col in RAW_SCHEMA[table].split(",")]


raw_columns = _columns


# Which record of the batch a row came from (not a warehouse column: it lets the lander drop skipped records' rows).
RECORD_COLUMN = "_record"


def arrow_schema(table: str) -> pa.Schema:
    """A raw table's rows as `flatten_encoded` builds them: its columns, then `_record`."""
    return _arrow_schema(table)


@functools.cache
def _arrow_schema(table: str) -> pa.Schema:
    import pyarrow as pa

    types = _arrow_types()
    fields = [(c.split()[0], types[c.split()[1]]) for c in RAW_SCHEMA[table].split(",")]
    return pa.schema([*fields, (RECORD_COLUMN, pa.int32())])


@functools.cache
def _polars_types() -> dict[str, Any]:
    """DuckDB's raw column types as polars types (polars is imported on first use: a run that lands nothing, or
    lands Arrow, never pays its 0.15-0.2 s import)."""
    import polars as pl

    return {
        "VARCHAR": pl.Utf8,
        "INTEGER": pl.Int32,
        "BIGINT": pl.Int64,
        "UBIGINT": pl.UInt64,
        "DOUBLE": pl.Float64,
        "BOOLEAN": pl.Boolean,
        "TIMESTAMP": pl.Datetime("us"),
        "VARCHAR[]": pl.List(pl.Utf8),
    }


def _schema(table: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in RAW_SCHEMA[table].split(","):
        parts = col.split()
        out[parts[0]] = _polars_types()[parts[1]]
    return out


def _frame(rows: list[dict[str, Any]], table: str) -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(rows, schema=_schema(table), orient="row") if rows else pl.DataFrame(schema=_schema(table))
