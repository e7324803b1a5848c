"""The warehouse's record of builds: `build_runs` (one row per build) and `validation_results` (one row per
expectation per build), and the question every publishing step asks of them: did the latest build pass its gate,
and is it still current? Also when DuckDB's vacuum is due (`VACUUM_EVERY`, `compact`), which a build's publish and a
run's lander both ask.

The build writes these tables and the quality gate fills `validation_results`; the dashboards only read them, so
they live here, in the warehouse, which every later stage may import.
"""

from __future__ import annotations

import time
from typing import Any

import duckdb

BUILD_RUNS_SCHEMA = """
    build_id VARCHAR PRIMARY KEY, started_at TIMESTAMP, finished_at TIMESTAMP, status VARCHAR,
    published BOOLEAN, n_models INTEGER, n_expectations INTEGER, n_failed INTEGER, n_games BIGINT,
    max_landed_at TIMESTAMP, message VARCHAR"""

VALIDATION_RESULTS_SCHEMA = """
    build_id VARCHAR, suite VARCHAR, expectation VARCHAR, rule VARCHAR, kwargs_json VARCHAR, success BOOLEAN,
    element_count BIGINT, unexpected_count BIGINT, failing_rows_json VARCHAR, run_at TIMESTAMP"""


# What the published build's gate vouched for: each table a game record lands in (`raw.GRAIN_TABLES`) and its rows
# when the build read it, with the build's id and the gate code's digest (`quality.delta`). Written when a build is
# published (`transform.build.increment.record`, in the publish transaction); the next build's gate runs the suites
# over those tables on the rows an increment added only when each table still holds these rows and the added ones.
GRAIN_ROWS_TABLE = "build_grain_rows"
GRAIN_ROWS_SCHEMA = "build_id VARCHAR, gate VARCHAR, source VARCHAR, n_rows BIGINT"

# The tables whose every row, when the published build read them, the published gate's `orphan_rows` suite found to
# belong to a game raw_games held (its SQL is raw_games.yml's, pinned in `quality.delta.FORMS`); raw_games itself, whose
# every game the published fct_games holds. `increment_tails` reads only these from their tails.
TAIL_TABLES = ("raw_games", "raw_players", "raw_events", "raw_model_calls", "raw_beliefs")


def increment_tails(con: duckdb.DuckDBPyConnection, games: str, *,
                    replaces: bool = False) -> dict[str, tuple[int, int]]:
    """For an incremental build (`games`: the table of the increment's ids): each raw table whose rows of those games
    all lie in its *tail*, the rows numbered (DuckDB's `rowid`) from P on, P being its rows when the published build
    read it (`GRAIN_ROWS_TABLE`), as (P, the increment's rows). A scan of the tail skips the row groups before it (a
    million games' raw_events: 1 ms for the 210,000 rows of 10,000 games, against 0.15-0.19 s by game id over every
    row group). When the increment only adds games, that needs no scan of the rows before P (below); when it replaces
    or removes published games (`replaces`), one scan of every row's game id checks it: none of the increment's games'
    rows is numbered below P (a replaced game's rows are deleted and landed again, after every row there is, unless
    a vacuum renumbered them since), which costs a tenth of what the tail saves the staging views' deltas (a million
    games' stg_events: 1.35 s read by game id).

    Why the tail holds every row of those games. DuckDB numbers a table's rows by position (a row group's start plus
    the row's offset in it): an insert appends after every row there is; a delete keeps the other rows' numbers
    until a checkpoint vacuums the table, which renumbers the rows left, in the same order. So rows keep their order,
    and a row's number is at least the count of rows before it. The landing step is the raw tables' only writer
    (`warehouse.raw.load_flat`, `warehouse.landing`): it writes a game's rows in every table, with its raw_games row,
    in one transaction, and deletes them only to replace the game (a new `landed_at`) or when the game is removed,
    either of which puts a published game in the increment (`Increment.replaces`). In an increment that only adds
    games, then, the P rows the published build read are all still there, first in order, and every row landed since
    comes after them: its number is at least P. And no row of the increment's games was among those P: the games are
    not in the published fct_games, which holds every game raw_games held when that build read it, and the published
    gate's `orphan_rows` found every row of the other `TAIL_TABLES` to belong to one of those games (so the tail is
    used only when that build's gate passed that suite; raw_statements and raw_statement_labels, which no suite
    checks so, are read whole).

    What is checked, each by a look at the tail or one row: the table's rows now are P plus the increment's rows in
    the tail (the gate's own sum, `quality.delta`: nothing added or removed outside the increment's games), and the
    row numbered P - 1, if any, is not one of the increment's games'. A row removed outside the landing step and a
    checkpoint since would have moved the increment's first rows below P: the sum would still hold, the row P - 1
    is then one of them. A table failing a check is read whole, as before."""
    present = {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary").fetchall()}
    if not {GRAIN_ROWS_TABLE, "build_runs", "validation_results", games} <= present:
        return {}
    latest = con.execute("select build_id from build_runs where published "
                         "order by started_at desc, finished_at desc limit 1").fetchall()
    recorded = con.execute(f"select build_id, source, n_rows from main.{GRAIN_ROWS_TABLE}").fetchall()
    if not latest or not recorded or {b for b, _, _ in recorded} != {latest[0][0]}:
        return {}
    orphans = con.execute("select count(*), bool_and(success) from validation_results "
                          "where build_id = ? and suite = 'orphan_rows'", [latest[0][0]]).fetchall()[0]
    if not replaces and (not orphans[0] or not orphans[1]):
        return {}
    out = {}
    for table, first in ((str(s), int(n)) for _, s, n in recorded if s in TAIL_TABLES and s in present):
        ids = f"(select game_id from main.{games})"
        if replaces:
            below, added = con.execute(
                f'select count(*) filter (where rowid < {first}), count(*) filter (where rowid >= {first}) '
                f'from main."{table}" where game_id in {ids}').fetchall()[0]
            if not below:
                out[table] = (first, int(added))
            continue
        # The bounds as literals: a constant filter on rowid is what DuckDB skips row groups by.
        now, added, below = con.execute(
            f'select (select count(*) from main."{table}"), '
            f'(select count(*) from main."{table}" where rowid >= {first} and game_id in {ids}), '
            f'(select count(*) from main."{table}" where rowid = {first - 1} and game_id in {ids})'
        ).fetchall()[0]
        if now == first + added and not below:
            out[table] = (first, int(added))
    return out


# DuckDB's checkpoint also vacuums: it merges runs of row groups it can fit into fewer, in every table of the file,
# changed since the last checkpoint or not, at any checkpoint that writes something (DuckDB 2.0.1: a checkpoint
# after a one-row change elsewhere merged a million games' per-game tables in 2.3 s). After an increment's append,
# that merge rewrites the per-game tables' last row groups with the new games' rows; so the warehouse's writers run
# without it (`raw.connect`), and an increment is published without it (`transform.build.marts.publish`), each
# table keeping the appended rows as a row group of their own, and a replacing increment's deleted rows as gaps in
# the row numbers (a replayed game's few rows; `transform.build.increment` reads raw_games' published rows below a
# recorded bound, not by their count). Every `VACUUM_EVERY`-th increment and a whole build are published with it,
# so a table holds at most that many row groups more than DuckDB would leave (small row groups cost: 1,000 appends
# of 1,000 rows made a file 8 times larger and scans 1.5 times slower), and the deletes are reclaimed. The merge
# is deferred, not saved: the build that vacuums pays the merge the ones before it skipped, unless a run compacted
# the file while its games played (`compact`). The checkpoint after 10,000 games added to a million
# (benchmarks/bench_vacuum.py, load 1.8): with the vacuum each time 0.19-2.21 s (mean 0.85 s), without it
# 0.17-0.18 s, the 8th with it 2.13 s, 0.42 s a build over the 8; every 24th paid 19.6 s at load 8 (the merge grows
# faster than the rows it merges).
VACUUM_EVERY = 8
UNVACUUMED_TABLE = "build_unvacuumed"  # increments published since the last vacuum (marts.publish, `compact`)


def unvacuumed(con: duckdb.DuckDBPyConnection) -> int:
    """The increments published without DuckDB's vacuum since it last ran (0 if none)."""
    if not con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?",
                       [UNVACUUMED_TABLE]).fetchall():
        return 0
    found = con.execute(f"select increments from main.{UNVACUUMED_TABLE}").fetchall()
    return int(found[0][0]) if found else 0


def record_unvacuumed(con: duckdb.DuckDBPyConnection, increments: int) -> None:
    con.execute(f"create or replace table main.{UNVACUUMED_TABLE} as select ?::INTEGER as increments", [increments])


def vacuums_next(since: int) -> bool:
    """Whether the next build that only adds games, after `since` published without DuckDB's vacuum, is published
    with it (`VACUUM_EVERY`): the one rule the publish and the run's vacuum (`vacuum_due`) both follow."""
    return since + 1 >= VACUUM_EVERY


def vacuum_due(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the next build that only adds games would vacuum, with something to merge (an increment since the
    last vacuum)."""
    since = unvacuumed(con)
    return since > 0 and vacuums_next(since)


def compact(con: duckdb.DuckDBPyConnection) -> float | None:
    """Run DuckDB's vacuum now when the next build's publish would (`vacuum_due`): a run does it while its games
    play (`study.lander`), so the build after it publishes without paying the merge. Returns its seconds, or None
    when it was not due or could not run (another write transaction was open: DuckDB refuses the checkpoint, and
    the next publish vacuums as before). The count goes back to 0 once the checkpoint is done: a process killed
    during it leaves the count, so the next publish vacuums."""
    since = unvacuumed(con)
    if since == 0 or not vacuums_next(since):
        return None
    t0 = time.perf_counter()
    tasks, bar = con.execute(
        "select current_setting('max_vacuum_tasks'), current_setting('enable_progress_bar')").fetchall()[0]
    con.execute("reset global max_vacuum_tasks")
    con.execute("set enable_progress_bar = false")  # DuckDB's own bar, over a run's lines, past 2 s
    try:
        record_unvacuumed(con, since)  # a change: DuckDB skips a checkpoint with nothing to write
        try:
            con.execute("checkpoint")
        except duckdb.Error:
            return None
        record_unvacuumed(con, 0)
    finally:
        con.execute(f"set global max_vacuum_tasks = {int(tasks)}")
        con.execute(f"set enable_progress_bar = {'true' if bar else 'false'}")
    return time.perf_counter() - t0


# What `validation_results`' counts mean.
DBT_SUITE = "dbt_tests"  # the dbt data tests as gate results (publish.dbt_test_results): counts of failing rows only
# Expectations that check each row of their table (GX's column and multi-column ones): over no rows one passes having
# checked nothing. A table-level one (a table of violations that must be empty) checks the table, empty or not.
ROW_EXPECTATIONS = ("expect_column_", "expect_compound_columns_", "expect_multicolumn_", "expect_select_column_")


def checked_nothing(suite: str, expectation: str, success: bool, element_count: int | None) -> bool:
    """Whether a result passed having checked no row: a per-row expectation over an empty table (the build's summary
    and the data-quality page say so rather than "passed"). A dbt test's count is of failing rows, so never."""
    return (success and suite != DBT_SUITE and expectation.startswith(ROW_EXPECTATIONS)
            and not element_count)


def ensure_build_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create `build_runs` and `validation_results` if missing: their one declaration, for the build, the gate and
    the catalogue."""
    con.execute(f"create table if not exists build_runs ({BUILD_RUNS_SCHEMA})")
    con.execute(f"create table if not exists validation_results ({VALIDATION_RESULTS_SCHEMA})")


def latest_build(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The most recent build's row of `build_runs`, or None if the warehouse was never built."""
    exists = con.execute("select 1 from duckdb_tables() where table_name = 'build_runs'").fetchall()
    if not exists:
        return None
    cur = con.execute("select * from build_runs order by started_at desc, finished_at desc limit 1")
    rows = cur.fetchall()
    if not rows:
        return None
    row = rows[0]
    cols = [d[0] for d in cur.description]
    return dict(zip(cols, row, strict=True))


def gate_passed(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the latest build passed its quality gate and no game was landed or removed since it ran.

    The dashboard step publishes only then: a failed gate, or marts older than the raw data, block publishing.
    """
    build = latest_build(con)
    if build is None or not build["published"]:
        return False
    n_games, max_landed = con.execute("select count(*), max(landed_at) from raw_games").fetchall()[0]
    return bool(n_games == build["n_games"] and max_landed == build["max_landed_at"])
