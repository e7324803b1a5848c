"""Incremental builds: which games a build recomputes, and whether it may build incrementally at all.

The models keyed by game (`materialized: per_game` in the dbt project; macros/increment.sql) are computed by a build
for the *increment* only: the games landed, replaced (a resumed or re-imported game gets a new `landed_at`) or removed
since the published build, found by comparing `raw_games` with the published `fct_games` (id, landed mark and record
checksum), never by a clock. Each such model's staged relation is then a view (the published table without those
games, and the delta), the marts and Python models are rebuilt from those, and the quality gate reads the same; only
when the gate passed does `marts.publish` apply each delta to its published table, in the publish transaction. A
refused build drops the deltas: the published tables stay as they were, and the next build's increment is again
everything since the published build.

A build is incremental only when the published per-game tables were built by the same logic: the published build's
`state_key` (the project's digest, the dbt, dbt-duckdb and DuckDB versions, the build's vars, the raw tables' declared
schema) is kept in `build_increment_state` and must equal this build's, and every per-game table must be published.
Otherwise, and with `--full-refresh`, every model is built whole. A build of some models only (`only=`) is never
incremental and clears the state, since it publishes some per-game tables and not others.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.transform.build import dbt_runner
from mafiabench.warehouse.raw import RAW_SCHEMA

INCREMENT_GAMES = "__staged__increment_games"  # the increment's game ids (macros/increment.sql reads it)
STATE_TABLE = "build_increment_state"
FORMAT = 1  # of the increment machinery itself: raise it when a change to it must not mix with older builds


@dataclass(frozen=True)
class Increment:
    """An incremental build's increment: its games, and whether any of them is published (replaced or removed)."""

    games: int
    replaces: bool


def state_key(project: Path, variables: dict[str, Any]) -> str:
    """What the published per-game tables must have been built with for a build to add to them."""
    parts = [
        f"format {FORMAT}",
        dbt_runner._project_digest(project),  # every project file: the digest the manifest cache is keyed on
        *(f"{p} {version(p)}" for p in ("dbt-core", "dbt-duckdb", "duckdb")),
        json.dumps(variables, sort_keys=True),
        json.dumps(RAW_SCHEMA, sort_keys=True),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def per_game_models(parsed: Any) -> list[str]:
    """The per-game models of a parsed project (`dbt_runner.manifest`)."""
    return sorted(n.name for n in parsed.nodes.values()
                  if n.resource_type == "model" and n.config.materialized == "per_game")


def published_key(con: duckdb.DuckDBPyConnection) -> str | None:
    if not con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?",
                       [STATE_TABLE]).fetchall():
        return None
    found = con.execute(f"select key from main.{STATE_TABLE}").fetchall()
    return str(found[0][0]) if found else None


def plan(con: duckdb.DuckDBPyConnection, key: str, parsed: Callable[[], Any]) -> Increment | None:
    """The increment since the published build (written to `INCREMENT_GAMES`), or None when the build must be whole.
    `parsed()` gives the parsed project (`dbt_runner.manifest`); it is asked for only after the increment's query,
    so that a caller can have dbt imported and the project parsed on another thread meanwhile."""
    if published_key(con) != key:
        return None
    tables = {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary").fetchall()}
    if "fct_games" not in tables:
        return None
    con.execute(f"""
        create or replace table main.{INCREMENT_GAMES} as
        select game_id from main.raw_games as r
        where not exists (
            select 1 from main.fct_games as f
            where f.game_id = r.game_id and f.landed_at is not distinct from r.landed_at
                and f.record_sha256 is not distinct from r.record_sha256
        )
        union all
        select game_id from main.fct_games as f
        where not exists (select 1 from main.raw_games as r where r.game_id = f.game_id)
    """)
    games, replaces = con.execute(
        f"select count(*), count(*) filter (where game_id in (select game_id from main.fct_games)) "
        f"from main.{INCREMENT_GAMES}"
    ).fetchall()[0]
    if not set(per_game_models(parsed())) <= tables:
        con.execute(f"drop table main.{INCREMENT_GAMES}")
        return None
    return Increment(games=int(games), replaces=bool(replaces))


def record(con: duckdb.DuckDBPyConnection, key: str | None) -> None:
    """Keep the published build's state key (in the publish transaction); None: the next build is whole."""
    con.execute(f"create table if not exists main.{STATE_TABLE} (key VARCHAR)")
    con.execute(f"delete from main.{STATE_TABLE}")
    if key is not None:
        con.execute(f"insert into main.{STATE_TABLE} values (?)", [key])
