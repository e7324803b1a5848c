"""The DuckDB warehouse: raw tables, one per grain, loaded only from game records.

DuckDB allows one writer process per file, so only the landing step writes here; concurrent game tasks hand
records to it. Loading is idempotent by game id: a game already landed (and not failed) is skipped, a failed game
is replaced by a later successful play, and everything happens in one transaction so a crash loses nothing landed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from mafiabench.errors import UserError
from mafiabench.record import GameRecord
from mafiabench.redact import scrub_json, scrub_obj

DEFAULT_WAREHOUSE = Path("warehouse") / "mafiabench.duckdb"

RAW_SCHEMA: dict[str, str] = {
    "raw_games": """
        game_id VARCHAR PRIMARY KEY, record_version INTEGER, variant VARCHAR, seed UBIGINT,
        experiment VARCHAR, cell VARCHAR, game_index INTEGER, capabilities VARCHAR[], target_model VARCHAR,
        background VARCHAR, status VARCHAR, winner VARCHAR, outcome_reason VARCHAR, tie_decided BOOLEAN,
        days INTEGER, n_players INTEGER, n_mafia INTEGER, valid BOOLEAN, invalid_reason VARCHAR, error VARCHAR,
        prompt_version VARCHAR, prompt_sha256 VARCHAR, package_version VARCHAR, git_commit VARCHAR,
        source VARCHAR, source_file VARCHAR, source_sha256 VARCHAR, rules_json VARCHAR, record_sha256 VARCHAR,
        landed_at TIMESTAMP, batch_id VARCHAR""",
    "raw_players": """
        game_id VARCHAR, seat INTEGER, name VARCHAR, role VARCHAR, team VARCHAR, agent VARCHAR,
        provider VARCHAR, model VARCHAR, model_raw VARCHAR""",
    "raw_events": """
        game_id VARCHAR, seq INTEGER, phase VARCHAR, round INTEGER, type VARCHAR, actor VARCHAR, target VARCHAR,
        text VARCHAR, visibility VARCHAR, format_failure BOOLEAN, random_fallback BOOLEAN, truncated BOOLEAN,
        tie_break BOOLEAN, data_json VARCHAR""",
    "raw_model_calls": """
        game_id VARCHAR, call_index INTEGER, player VARCHAR, action VARCHAR, phase VARCHAR, round INTEGER,
        provider VARCHAR, model VARCHAR, started_at VARCHAR, latency_ms DOUBLE, attempts INTEGER,
        input_tokens BIGINT, output_tokens BIGINT, cached_tokens BIGINT, error_class VARCHAR,
        finish_reason VARCHAR, format_failure BOOLEAN, prompt_chars INTEGER, prefix_reuse_chars INTEGER,
        response_text VARCHAR, request_json VARCHAR""",
    "raw_beliefs": """
        game_id VARCHAR, seq INTEGER, player VARCHAR, phase VARCHAR, round INTEGER, action VARCHAR,
        candidate VARCHAR, probability DOUBLE, uniform_fallback BOOLEAN""",
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
}

DETECTION_KEY = ("game_id", "cut", "detector", "prompt_sha256")

_GRAIN_TABLES = ("raw_games", "raw_players", "raw_events", "raw_model_calls", "raw_beliefs")

# The calls of a failed attempt that a replay replaced: the game's latest record is in the grain tables (and its raw
# file), but what the earlier attempts spent stays counted here (budget, costs), never lost.
REPLACED_CALLS = "raw_replaced_calls"
REPLACED_CALLS_COLUMNS = RAW_SCHEMA["raw_model_calls"] + ", replaced_at TIMESTAMP, replaced_record_sha256 VARCHAR"


class WarehouseBusyError(UserError):
    """Another process holds the warehouse file (DuckDB allows one writer per file)."""


def connect(path: Path | str = DEFAULT_WAREHOUSE, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; a clear error instead of DuckDB's lock message when another process has it."""
    path = Path(path)
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(path), read_only=read_only)
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
    "raw_games": (("batch_id", "VARCHAR"),),  # the source's own batch of an imported game (Mini-Mafia batches)
}


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    for table, columns in RAW_SCHEMA.items():
        con.execute(f"create table if not exists {table} ({columns})")
    for table, added in _ADDED_COLUMNS.items():
        for name, kind in added:
            con.execute(f"alter table {table} add column if not exists {name} {kind}")
    con.execute(f"create table if not exists {REPLACED_CALLS} ({REPLACED_CALLS_COLUMNS})")
    con.execute(f"create table if not exists {CELL_FINGERPRINTS} ({CELL_FINGERPRINTS_COLUMNS})")


# What each study cell's games are (design.cell_fingerprint), recorded when its first games are planned and checked
# on every resume; `id_prefix` is the part of game ids shared by the cell's games.
CELL_FINGERPRINTS = "raw_cell_fingerprints"
CELL_FINGERPRINTS_COLUMNS = """
    experiment VARCHAR, cell VARCHAR, id_prefix VARCHAR PRIMARY KEY, fingerprint VARCHAR, content_json VARCHAR,
    recorded_at TIMESTAMP"""


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


def landed_ids(con: duckdb.DuckDBPyConnection, *, include_failed: bool = False) -> set[str]:
    """Game ids already landed; failed games count as not landed unless asked (a re-run replays them)."""
    where = "" if include_failed else "where status <> 'failed'"
    return {r[0] for r in con.execute(f"select game_id from raw_games {where}").fetchall()}


def load_records(
    con: duckdb.DuckDBPyConnection, records: Iterable[GameRecord], *, replace: bool = False
) -> LoadResult:
    """Land records in one transaction, idempotent by game id.

    A game already landed is skipped unless it was failed (or `replace` is set), in which case the newer record
    replaces it, whatever its status: the warehouse holds the same latest record as the raw file. The replaced
    attempt's model calls move to `raw_replaced_calls`, so its spend stays counted. The same record loaded twice
    changes nothing.
    """
    records = list(records)
    result = LoadResult()
    if not records:
        return result
    ids = [r.game_id for r in records]
    existing = {
        g: (status, sha)
        for g, status, sha in con.execute(
            "select game_id, status, record_sha256 from raw_games where game_id in (select unnest($ids))",
            {"ids": ids},
        ).fetchall()
    }
    seen: set[str] = set()
    to_load: list[GameRecord] = []
    replaced: list[str] = []
    for rec in records:
        if rec.game_id in seen:
            result.skipped += 1
            continue
        seen.add(rec.game_id)
        status, sha = existing.get(rec.game_id, (None, None))
        if status is None:
            result.inserted += 1
        elif (replace or status == "failed") and sha != record_sha256(rec):
            result.replaced += 1
            replaced.append(rec.game_id)
        else:
            result.skipped += 1
            continue
        to_load.append(rec)
    if not to_load:
        return result
    frames = flatten(to_load)
    load_ids = [r.game_id for r in to_load]
    con.execute("begin transaction")
    try:
        if replaced:
            con.execute(
                f"""insert into {REPLACED_CALLS}
                    select c.*, now()::timestamp, g.record_sha256
                    from raw_model_calls c join raw_games g using (game_id)
                    where c.game_id in (select unnest($ids))""",
                {"ids": replaced},
            )
        for table in _GRAIN_TABLES:
            con.execute(f"delete from {table} where game_id in (select unnest($ids))", {"ids": load_ids})
            frame = frames[table]
            if frame.height:
                con.register("_frame", frame.to_arrow())
                cols = ", ".join(frame.columns)
                con.execute(f"insert into {table} ({cols}) select {cols} from _frame")
                con.unregister("_frame")
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    return result


def record_sha256(rec: GameRecord) -> str:
    """The checksum stored in `raw_games.record_sha256`: of the record as written (secrets scrubbed)."""
    return hashlib.sha256(scrub_json(rec.to_json()).encode()).hexdigest()


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
    """Records → one DataFrame per raw table (bulk insert is ~1000× faster than row inserts in DuckDB)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    games: list[dict[str, Any]] = []
    players: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    beliefs: list[dict[str, Any]] = []
    for rec in records:
        text = rec.to_json()
        clean = scrub_json(text)
        if clean != text:  # safety net: a known secret inside a record never reaches a table
            rec, text = GameRecord.from_json(clean), clean
        d = rec.to_dict()
        design = rec.design or {}
        prompt = rec.prompt or {}
        prov = rec.provenance
        games.append(
            {
                "game_id": rec.game_id,
                "record_version": d["record_version"],
                "variant": rec.variant,
                "seed": rec.seed,
                "experiment": design.get("experiment"),
                "cell": design.get("cell"),
                "game_index": design.get("game_index"),
                "capabilities": list(design.get("capabilities") or []),
                "target_model": design.get("target"),
                "background": design.get("background"),
                "status": rec.outcome.get("status"),
                "winner": rec.outcome.get("winner"),
                "outcome_reason": rec.outcome.get("reason"),
                "tie_decided": bool(rec.outcome.get("tie_decided", False)),
                "days": rec.outcome.get("days"),
                "n_players": len(rec.players),
                "n_mafia": sum(1 for p in rec.players if p.team == "mafia"),
                "valid": bool(rec.validity.get("valid", True)),
                "invalid_reason": rec.validity.get("reason"),
                "error": rec.error,
                "prompt_version": prompt.get("version"),
                "prompt_sha256": prompt.get("sha256"),
                "package_version": prov.package_version,
                "git_commit": prov.git_commit,
                "source": prov.source,
                "source_file": prov.source_file,
                "source_sha256": prov.source_sha256,
                "rules_json": json.dumps(rec.rules, sort_keys=True),
                "record_sha256": hashlib.sha256(text.encode()).hexdigest(),
                "landed_at": now,
                "batch_id": design.get("batch_id"),
            }
        )
        for p in rec.players:
            players.append(
                {
                    "game_id": rec.game_id,
                    "seat": p.seat,
                    "name": p.name,
                    "role": p.role,
                    "team": p.team,
                    "agent": p.agent,
                    "provider": _provider(p.agent),
                    "model": p.model,
                    "model_raw": p.model_raw if p.model_raw is not None else p.model,
                }
            )
        for e in rec.events:
            events.append(
                {
                    "game_id": rec.game_id,
                    "seq": e.seq,
                    "phase": e.phase,
                    "round": e.round,
                    "type": e.type,
                    "actor": e.actor,
                    "target": e.target,
                    "text": e.text,
                    "visibility": e.visibility,
                    "format_failure": e.format_failure,
                    "random_fallback": e.random_fallback,
                    "truncated": e.truncated,
                    "tie_break": e.tie_break,
                    "data_json": json.dumps(e.data, sort_keys=True) if e.data else None,
                }
            )
            if e.type == "belief":
                for cand, prob in (e.data.get("probability") or {}).items():
                    beliefs.append(
                        {
                            "game_id": rec.game_id,
                            "seq": e.seq,
                            "player": e.actor,
                            "phase": e.phase,
                            "round": e.round,
                            "action": e.data.get("action"),
                            "candidate": cand,
                            "probability": float(prob),
                            "uniform_fallback": e.random_fallback,
                        }
                    )
        for c in rec.calls:
            calls.append(
                {
                    "game_id": rec.game_id,
                    "call_index": c.get("index"),
                    "player": c.get("player"),
                    "action": c.get("action"),
                    "phase": c.get("phase"),
                    "round": c.get("round"),
                    "provider": c.get("provider"),
                    "model": c.get("model"),
                    "started_at": c.get("started_at"),
                    "latency_ms": float(c.get("latency_ms") or 0.0),
                    "attempts": c.get("attempts"),
                    "input_tokens": c.get("input_tokens"),
                    "output_tokens": c.get("output_tokens"),
                    "cached_tokens": c.get("cached_tokens"),
                    "error_class": c.get("error_class"),
                    "finish_reason": c.get("finish_reason"),
                    "format_failure": bool((c.get("parse") or {}).get("format_failure", False)),
                    "prompt_chars": c.get("prompt_chars"),
                    "prefix_reuse_chars": c.get("prefix_reuse_chars"),
                    "response_text": c.get("response"),
                    "request_json": json.dumps(c.get("request"), sort_keys=True),
                }
            )
    return {
        "raw_games": _frame(games, "raw_games"),
        "raw_players": _frame(players, "raw_players"),
        "raw_events": _frame(events, "raw_events"),
        "raw_model_calls": _frame(calls, "raw_model_calls"),
        "raw_beliefs": _frame(beliefs, "raw_beliefs"),
    }


_POLARS_TYPES = {
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
        out[parts[0]] = _POLARS_TYPES[parts[1]]
    return out


def _frame(rows: list[dict[str, Any]], table: str) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_schema(table), orient="row") if rows else pl.DataFrame(schema=_schema(table))
