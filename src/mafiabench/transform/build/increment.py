"""Incremental builds: which games a build recomputes, and whether it may build incrementally at all.

The models keyed by game (`materialized: per_game` in the dbt project; macros/increment.sql) are computed by a build
for the *increment* only: the games landed, replaced (a resumed or re-imported game gets a new `landed_at`) or removed
since the published build, found by comparing `raw_games` with the published `fct_games` (id, landed mark and record
checksum), never by a clock; or, when raw_games' rows below a bound are the published games with those marks
(`_added_only`: a count, a sum of hashes and the bound, which the publish keeps in `GAMES_TABLE`), as the rows after
them. Each such model's staged
relation is then a view (the published table without those games, and the delta), the marts and Python models are
rebuilt from those, and the quality gate reads the same; only when the gate passed does `marts.publish` apply each
delta to its published table, in the publish transaction. A refused build drops the deltas: the published tables
stay as they were, and the next build's increment is again everything since the published build.

A build is incremental only when the published per-game tables were built by the same logic: the published build's
`state_key` (the project's digest, the dbt, dbt-duckdb and DuckDB versions, the build's vars, the raw tables' declared
schema) is kept in `build_increment_state` and must equal this build's, and every per-game table must be published.
Otherwise, and with `--full-refresh`, every model is built whole. The *summed* models (`materialized: summed`: counts
by key, a sum over games) are each its published table, plus its SQL over the increment's games' new rows, minus its
SQL over the replaced or removed games' published rows, summed by key, a key no game holds any more left out
(macros/increment.sql), and so must be published for a build to be incremental. A build of some models only (`only=`)
is never incremental and clears the state, since it publishes some per-game tables and not others.

An incremental build also *keeps* the SQL models whose inputs did not change (`kept_models`): a model that reads the
same rows gives the same rows, so its published relation stays, dbt builds nothing for it, and the rest of the build
(refs, the Python models, the gate, dbt's data tests) reads the published relation (`var('kept')`, macros/naming.sql).
Which sources changed is decided from data (`changed_sources`): a table a game record lands in (`GRAIN_TABLES`)
changed when it holds rows of the increment's games, or, when the increment replaces or removes published games,
when its rows are not as many as the published build read (`GRAIN_ROWS_TABLE`; without that record every source
counts as changed); any other source (runs, protocol cards, detections, `ref_prices` ...) when its content fingerprint
(`fingerprints`: rows and a sum of row hashes, kept in `SOURCES_TABLE` by the published build) differs. A change
reaches every model downstream through the parsed project's `depends_on`; a model whose SQL or macros read a clock,
a random generator, the environment or files (`VOLATILE`) is always rebuilt. The Python models are always rebuilt:
what they compute also depends on the process (their code, `MAFIABENCH_LATENT_METHOD`, whether the coherence extra is
installed), which no state here covers.

What every incremental step rests on (the kept models, the deltas, the gate's suites over the raw tables): the rows of
a game outside the increment are the rows the published build read. The landing step is the raw tables' only writer,
and it replaces a game's rows whole, under a new `landed_at`, which puts the game in the increment. The gate checks
what it can of this (`quality.delta`): each raw table's rows now are its rows at the published build (`grain_rows`,
kept by `record`), less those of them the lander deleted since (`warehouse.raw.DELETED_ROWS`: a replaced game's
published rows; none in an increment that only adds games), plus the increment's, so no row was added or removed
outside the increment's games; that none was edited in place is assumed, here as in the rest of the
build (`--full-refresh` builds and gates everything whole). In an increment that only adds games the same facts put
every row of its games in each raw table's *tail*, the rows numbered from the published build's count on
(`warehouse.builds.increment_tails`, which says why and checks what it can cheaply; in one that replaces games, one
scan of the game ids checks it): the staging views' deltas (macros/increment.sql), `increment_rows` and the gate read
those tables' increment rows there (`INCREMENT_TAILS`), not by game id over every row."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.transform.build import dbt_runner
from mafiabench.warehouse.builds import GRAIN_ROWS_SCHEMA, GRAIN_ROWS_TABLE, increment_tails
from mafiabench.warehouse.raw import DELETED_ROWS, DELETED_ROWS_SCHEMA, GRAIN_TABLES, RAW_SCHEMA

INCREMENT_GAMES = "__staged__increment_games"  # the increment's game ids (macros/increment.sql reads it)
# The raw tables an increment reads from their tails (`warehouse.builds.increment_tails`): the first row of each tail
# and the increment's rows in it (macros/increment.sql, `increment_rows` and the gate read it).
INCREMENT_TAILS = "__staged__increment_tails"
STATE_TABLE = "build_increment_state"
SOURCES_TABLE = "build_source_fingerprints"  # the published build's fingerprint of each source not keyed by game
# The published fct_games' games: their rows, the sum of their marks' hashes (`MARKS`) and raw_games' row number
# after the last of them (`bound`: the rows below it are theirs, with the gaps a replaced or removed game's deleted row
# leaves until a vacuum), kept by the publish (`record_games`) for the next plan's look at raw_games' first rows
# (`_added_only`); a vacuum since may have moved later rows below the bound (`first_rows_bound`).
GAMES_TABLE = "build_published_games"
GAMES_SCHEMA = "n_rows BIGINT, marks HUGEINT, bound BIGINT"
MARKS = "hash(game_id, landed_at, record_sha256)::HUGEINT"  # a game's id, landed mark and record checksum
PRICES = "ref_prices"  # written by every build (marts.ref_prices) before its models: a source like the raw tables
FORMAT = 1  # of the increment machinery itself: raise it when a change to it must not mix with older builds


@dataclass(frozen=True)
class Increment:
    """An incremental build's increment: its games, and whether any of them is published (replaced or removed);
    `published_games`: the published fct_games' `GAMES_TABLE` record, when the plan found raw_games' first rows to be
    those games (the increment then the rows after them), which the publish adds the increment's games to, its bound
    then the row number after the increment's last."""

    games: int
    replaces: bool
    published_games: tuple[int, int, int] | None = None


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


def summed_models(parsed: Any) -> list[str]:
    """The summed models of a parsed project: counts by key that an increment adding games adds its games' counts to
    (macros/increment.sql)."""
    return sorted(n.name for n in parsed.nodes.values()
                  if n.resource_type == "model" and n.config.materialized == "summed")


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
    # Made when missing before dbt lists the relations (as replay.TABLE): the build that records dbt's run and the
    # next one, which replays it, then see the same relations.
    _games_table(con)
    if published_key(con) != key:
        return None
    tables = {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary").fetchall()}
    if "fct_games" not in tables:
        return None
    published_games = _added_only(con)
    if published_games is not None:
        games, replaces = con.execute(f"select count(*), 0 from main.{INCREMENT_GAMES}").fetchall()[0]
    else:
        games, replaces = _compared(con)
    con.execute(f"create or replace table main.{INCREMENT_TAILS} (source VARCHAR, first_row BIGINT, n_rows BIGINT)")
    tails = increment_tails(con, INCREMENT_GAMES, replaces=bool(replaces))
    if tails:
        con.executemany(f"insert into main.{INCREMENT_TAILS} values (?, ?, ?)",
                        [(t, first, n) for t, (first, n) in sorted(tails.items())])
    project = parsed()
    if not set(per_game_models(project)) | set(summed_models(project)) <= tables:
        con.execute(f"drop table main.{INCREMENT_GAMES}")
        con.execute(f"drop table main.{INCREMENT_TAILS}")
        return None
    return Increment(games=int(games), replaces=bool(replaces), published_games=published_games)


def _games_table(con: duckdb.DuckDBPyConnection) -> None:
    """`GAMES_TABLE` with its columns; one with others (kept by an older version) is made again, empty: the next
    plan then compares, and its publish records."""
    columns = [str(c) for (c,) in con.execute(
        "select column_name from duckdb_columns() where schema_name = 'main' and table_name = ? order by column_index",
        [GAMES_TABLE]).fetchall()]
    if columns and columns != [c.split()[0] for c in GAMES_SCHEMA.split(", ")]:
        con.execute(f"drop table main.{GAMES_TABLE}")
    con.execute(f"create table if not exists main.{GAMES_TABLE} ({GAMES_SCHEMA})")


def _added_only(con: duckdb.DuckDBPyConnection) -> tuple[int, int, int] | None:
    """When raw_games' rows numbered (`rowid`) below the record's bound are the published fct_games' games with the
    same marks (their rows and sum of `MARKS` are `GAMES_TABLE`'s): the increment is the rows after them, none of
    them published (raw_games' primary key), which is what `_compared` would find (a sum of 64-bit hashes matching
    by chance aside). Written to `INCREMENT_GAMES`; returns the record, with the bound after the increment's rows.
    None otherwise: a game replaced or removed (its row deleted, or, after a vacuum renumbered the rows, a later one
    in its place), a mark changed in place, a record from another fct_games. One scan of three columns (a million
    games: 0.05-0.07 s, against the join's 0.28-0.41 s)."""
    found = con.execute(f"select n_rows, marks, bound from main.{GAMES_TABLE}").fetchall()
    if len(found) != 1 or found[0][2] is None:
        return None
    n, marks, bound = int(found[0][0]), int(found[0][1]), int(found[0][2])
    now = _below(con, bound)
    if now[0] > n:  # a vacuum moved later rows below the bound: those after raw_games' first n rows
        bound = first_rows_bound(con, n, bound, now[0])
        now = _below(con, bound)
    if now != (n, marks):
        return None
    con.execute(f"create or replace table main.{INCREMENT_GAMES} as select game_id from main.raw_games "
                f"where rowid >= {bound}")
    after = con.execute(f"select coalesce(max(rowid) + 1, {bound}) from main.raw_games "
                        f"where rowid >= {bound}").fetchall()[0][0]
    return n, marks, int(after)


def _below(con: duckdb.DuckDBPyConnection, bound: int) -> tuple[int, int]:
    """raw_games' rows numbered below `bound` (a literal: a constant filter on rowid is what DuckDB skips row groups
    by): their count and sum of `MARKS`."""
    now = con.execute(f"select count(*), coalesce(sum({MARKS}), 0) from main.raw_games "
                      f"where rowid < {bound}").fetchall()[0]
    return int(now[0]), int(now[1])


def first_rows_bound(con: duckdb.DuckDBPyConnection, n: int, bound: int, below: int | None = None) -> int:
    """The recorded `bound`, or, when more than `n` (the published games) of raw_games' rows lie below it (`below`,
    when the caller counted them), the row number after raw_games' first n rows. The publish records the bound
    before its checkpoint; a vacuum (that checkpoint's, every `VACUUM_EVERY`-th increment's, a run's, a landing
    connection's, which runs DuckDB's own) renumbers the rows around a replaced or removed game's deleted row, whole
    or in part (it merges only row groups that fit in fewer), and moves later rows below the bound. Rows keep their
    order, so the published games, if still raw_games' first rows, end at the n-th row, numbered n - 1 or more: the
    rows from there to the bound (the rows over n, and as many more as gaps are left) are all it reads (a million
    games and 10,000 over: 2-42 ms, against 37-250 ms over every row, beside CI's tests). Any bound is safe:
    `_added_only` checks the rows below it."""
    if below is None:
        below = int(con.execute(f"select count(*) from main.raw_games where rowid < {bound}").fetchall()[0][0])
    if below <= n:
        return bound
    if n == 0:
        return 0
    # Counted from the bound down: the rows over n come first, whatever lies below n - 1.
    return int(con.execute(f"select rowid + 1 from main.raw_games where rowid >= {n - 1} and rowid < {bound} "
                           f"order by rowid desc limit 1 offset {below - n}").fetchall()[0][0])


def _compared(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """The increment found by comparing raw_games with the published fct_games (written to `INCREMENT_GAMES`): its
    games, and those of them published."""
    # One full outer join of the two tables' ids (a game landed, replaced or removed is on one side only or differs),
    # rather than two anti-joins each hashing a million ids: at a million games, 0.47-0.50 s cold against 0.63-0.94.
    con.execute("""
        create or replace temporary table increment_plan as
        select coalesce(r.game_id, f.game_id) as game_id, f.game_id is not null as published
        from main.raw_games as r
        full outer join main.fct_games as f on f.game_id = r.game_id
        where r.game_id is null or f.game_id is null
            or f.landed_at is distinct from r.landed_at or f.record_sha256 is distinct from r.record_sha256
    """)
    con.execute(f"create or replace table main.{INCREMENT_GAMES} as select game_id from increment_plan")
    games, replaces = con.execute(
        "select count(*), count(*) filter (where published) from increment_plan").fetchall()[0]
    con.execute("drop table increment_plan")
    return int(games), int(replaces)


def record(con: duckdb.DuckDBPyConnection, key: str | None, sources: dict[str, str] | None = None,
           rows: dict[str, int] | None = None, gated: tuple[str, str] | None = None) -> None:
    """Keep the published build's state key and its sources' fingerprints (in the publish transaction); None: the
    next build is whole. With `gated` (the build's id and its gate's code digest: `quality.delta`), also the rows of
    each table a game record lands in when the build read them (`grain_rows`), which the gate vouched for."""
    con.execute(f"create table if not exists main.{STATE_TABLE} (key VARCHAR)")
    con.execute(f"delete from main.{STATE_TABLE}")
    con.execute(f"create table if not exists main.{SOURCES_TABLE} (source VARCHAR, fingerprint VARCHAR)")
    con.execute(f"delete from main.{SOURCES_TABLE}")
    con.execute(f"create table if not exists main.{GRAIN_ROWS_TABLE} ({GRAIN_ROWS_SCHEMA})")
    con.execute(f"delete from main.{GRAIN_ROWS_TABLE}")
    # The lander's deletes so far are the build's to account for (it read the tables after them): none since.
    con.execute(f"create table if not exists main.{DELETED_ROWS} ({DELETED_ROWS_SCHEMA})")
    con.execute(f"delete from main.{DELETED_ROWS}")
    if key is not None:
        con.execute(f"insert into main.{STATE_TABLE} values (?)", [key])
        if sources:
            con.executemany(f"insert into main.{SOURCES_TABLE} values (?, ?)", sorted(sources.items()))
        if rows and gated is not None:
            con.executemany(f"insert into main.{GRAIN_ROWS_TABLE} values (?, ?, ?, ?)",
                            [(*gated, table, n) for table, n in sorted(rows.items())])


def record_games(con: duckdb.DuckDBPyConnection, key: str | None, base: tuple[int, int, int] | None,
                 added: str | None) -> None:
    """Keep the published fct_games' `GAMES_TABLE` record (in the publish transaction, its relations in place): the
    plan's record (`base`, `Increment.published_games`, with the bound after the increment) and the games of `added`
    (fct_games' delta, which only adds games; None: fct_games kept), or without a base counted over fct_games, the
    bound after raw_games' last row (a million games: 0.05-0.07 s, in a whole build, a replacing increment, the first
    increment after a build that kept none: the next plan finds whether raw_games' rows below it are these games).
    None key: none."""
    _games_table(con)
    con.execute(f"delete from main.{GAMES_TABLE}")
    if key is None:
        return
    if base is None:
        n, marks = con.execute(f"select count(*), coalesce(sum({MARKS}), 0) from main.fct_games").fetchall()[0]
        bound = con.execute("select coalesce(max(rowid) + 1, 0) from main.raw_games").fetchall()[0][0]
        values = (int(n), int(marks), int(bound))
    elif added is None:
        values = base
    else:
        n, marks = con.execute(f'select count(*), coalesce(sum({MARKS}), 0) from main."{added}"').fetchall()[0]
        values = (base[0] + int(n), base[1] + int(marks), base[2])
    con.execute(f"insert into main.{GAMES_TABLE} values (?, ?, ?)", list(values))


def grain_rows(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """The rows of each table a game record lands in (DuckDB keeps a table's count: no scan)."""
    return {t: int(con.execute(f'select count(*) from main."{t}"').fetchall()[0][0]) for t in GRAIN_TABLES}


def unchanged_sources(con: duckdb.DuckDBPyConnection, now: dict[str, str]) -> set[str]:
    """The `FINGERPRINTED` sources whose fingerprint now (`now`: `fingerprints`) is the published build's."""
    if not con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?",
                       [SOURCES_TABLE]).fetchall():
        return set()
    recorded = dict(con.execute(f"select source, fingerprint from main.{SOURCES_TABLE}").fetchall())
    return {t for t, fingerprint in now.items() if recorded.get(t) == fingerprint}


# The sources fingerprinted by content: every declared table a game record does not land in, and the price table.
# They stay small (a row per run, card, look, unreadable file, landed shard; per detection at most), and a build reads
# them whole anyway.
FINGERPRINTED = (*sorted(set(RAW_SCHEMA) - set(GRAIN_TABLES)), PRICES)


def fingerprints(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each `FINGERPRINTED` table's content as text: its rows and the sum of its rows' hashes (in any order; a
    duplicated row counts twice); "missing" for a table that is not there."""
    present = {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary").fetchall()}
    out = {}
    for table in FINGERPRINTED:
        if table not in present:
            out[table] = "missing"
            continue
        rows, total = con.execute(f'select count(*), sum(hash(t)::hugeint) from main."{table}" as t').fetchall()[0]
        out[table] = f"{rows} {total}"
    return out


def increment_rows(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables a game record lands in that hold rows of the increment's games (`INCREMENT_GAMES`): counted in
    `INCREMENT_TAILS` for the tables read from their tails, else looked for."""
    tails: dict[str, int] = {}
    if con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?",
                   [INCREMENT_TAILS]).fetchall():
        tails = dict(con.execute(f"select source, n_rows from main.{INCREMENT_TAILS}").fetchall())
    return {t for t in GRAIN_TABLES if (tails[t] > 0 if t in tails else _holds_increment(con, t))}


def changed_sources(con: duckdb.DuckDBPyConnection, inc: Increment, now: dict[str, str],
                    landed: set[str], rows: dict[str, int] | None = None) -> set[str] | None:
    """The sources whose rows differ from the published build's, by data alone (module docstring), given the
    fingerprints of this build's (`now`), the tables holding rows of the increment's games (`increment_rows`) and,
    when the increment replaces or removes published games, each such table's rows now (`rows`: `grain_rows`): a
    table that holds none of the increment's games' rows and as many rows as the published build read held none of
    the replaced or removed games' either (its other games' rows being those it read). None when that cannot be told
    (the published build's rows not recorded), and every source counts as changed."""
    changed = set(landed) if inc.games else set()
    if inc.replaces:
        read = published_grain_rows(con)
        if read is None or rows is None or set(read) != set(GRAIN_TABLES):
            return None
        changed |= {t for t in GRAIN_TABLES if rows.get(t) != read[t]}
    recorded: dict[str, str] = {}
    if con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?",
                   [SOURCES_TABLE]).fetchall():
        recorded = dict(con.execute(f"select source, fingerprint from main.{SOURCES_TABLE}").fetchall())
    return changed | {t for t, fingerprint in now.items() if recorded.get(t) != fingerprint}


def published_grain_rows(con: duckdb.DuckDBPyConnection) -> dict[str, int] | None:
    """The rows of each table a game record lands in when the published build read them (`GRAIN_ROWS_TABLE`, kept
    by `record` when its gate passed), or None."""
    if not con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?",
                       [GRAIN_ROWS_TABLE]).fetchall():
        return None
    found = con.execute(f"select source, n_rows from main.{GRAIN_ROWS_TABLE}").fetchall()
    return {str(t): int(n) for t, n in found} or None


def _holds_increment(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether a table keyed by game has rows of the increment's games: first for one of them (a constant the scan
    skips row groups by), which new games' rows answer at once; else for any of them (a whole scan)."""
    probe = con.execute(f"select min(game_id) from main.{INCREMENT_GAMES}").fetchall()[0][0]
    if probe is None:
        return False
    return bool(con.execute(f'select exists (select 1 from main."{table}" where game_id = ?)', [probe]).fetchall()[0][0]
                or con.execute(f'select exists (select 1 from main."{table}" '
                               f'where game_id in (select game_id from main.{INCREMENT_GAMES}))').fetchall()[0][0])


# What makes a model's rows other than a function of its inputs: a clock, a random generator, the environment, files
# read outside the sources (DuckDB's functions; dbt's context). A false alarm only rebuilds the model.
VOLATILE = re.compile(
    r"\b(?:now|today|random|uuid|gen_random_uuid|setseed|get_current_timestamp|transaction_timestamp|env_var|"
    r"getenv|read_(?:csv|csv_auto|parquet|json|json_auto|ndjson|text|blob)|glob)\s*\("
    r"|\b(?:current_timestamp|current_date|current_time|localtimestamp|localtime|run_started_at|invocation_id|"
    r"modules\.datetime|modules\.time)\b",
    re.IGNORECASE,
)


def volatile(parsed: Any, node: Any, known: dict[str, bool] | None = None) -> bool:
    """Whether a model's SQL, or a macro of the project it calls (and so on), matches `VOLATILE`; `known` keeps
    each macro's answer for the next model's (every model calls `ref`)."""
    known = {} if known is None else known

    def reads(uid: str, item: Any) -> bool:
        if uid not in known:
            known[uid] = False  # a macro calling itself is settled by its other calls
            known[uid] = bool(VOLATILE.search(getattr(item, "raw_code", None) or getattr(item, "macro_sql", "") or "")
                              or any(reads(m, parsed.macros[m]) for m in item.depends_on.macros
                                     if m in parsed.macros and parsed.macros[m].package_name == node.package_name))
        return known[uid]

    return reads(node.unique_id, node)


def volatile_models(parsed: Any) -> set[str]:
    """The models of a parsed project that are `volatile` (a scan of all their SQL: 20-90 ms, so the build runs it
    beside the increment's queries)."""
    known: dict[str, bool] = {}
    return {n.name for n in parsed.nodes.values() if n.resource_type == "model" and volatile(parsed, n, known)}


def kept_models(parsed: Any, changed: set[str] | None, published: Iterable[str], volatile: set[str]) -> set[str]:
    """The SQL models an incremental build keeps: published, not `volatile` (`volatile_models`), and reading only
    sources not in `changed` and models it keeps (dbt's `depends_on`). `changed` None: none."""
    if changed is None:
        return set()
    models = {uid: n for uid, n in parsed.nodes.items() if n.resource_type == "model"}
    have = set(published)
    verdict: dict[str, bool] = {}

    def keeps(uid: str) -> bool:
        if uid not in verdict:
            node = models[uid]
            verdict[uid] = False  # a cycle (dbt refuses one) would read as changed
            verdict[uid] = node.name in have and node.name not in volatile and all(
                keeps(dep) if dep in models
                else dep in parsed.sources and parsed.sources[dep].identifier not in changed
                and parsed.sources[dep].identifier in (*GRAIN_TABLES, *FINGERPRINTED)
                for dep in node.depends_on.nodes
            )
        return verdict[uid]

    return {models[uid].name for uid in models if keeps(uid)}


def summed_reads(parsed: Any, kept: set[str]) -> set[str]:
    """The per-game models a rebuilt summed model reads: in an increment that replaces or removes published games,
    each needs those games' published rows (macros/increment.sql), which the build takes once for every reader."""
    models = {uid: n for uid, n in parsed.nodes.items() if n.resource_type == "model"}
    return {models[dep].name for n in models.values() if n.config.materialized == "summed" and n.name not in kept
            for dep in n.depends_on.nodes if dep in models}


def narrowed_reads(parsed: Any, kept: set[str]) -> set[str]:
    """The kept models a rebuilt per-game or summed model reads in an incremental build: each needs its delta, the
    rows of the increment's games (macros/increment.sql), which the build takes from the published relation."""
    models = {uid: n for uid, n in parsed.nodes.items() if n.resource_type == "model"}
    return {models[dep].name for n in models.values()
            if n.config.materialized in ("per_game", "summed") and n.name not in kept
            for dep in n.depends_on.nodes if dep in models and models[dep].name in kept}
