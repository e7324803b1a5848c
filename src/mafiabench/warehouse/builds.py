"""The warehouse's record of builds: `build_runs` (one row per build) and `validation_results` (one row per
expectation per build), and the question every publishing step asks of them: did the latest build pass its gate,
and is it still current?

The build writes these tables and the quality gate fills `validation_results`; the dashboards only read them, so
they live here, in the warehouse, which every later stage may import.
"""

from __future__ import annotations

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
