"""Where an increment's rows of a raw table are its tail (warehouse.builds.increment_tails), on a table large enough for
DuckDB's own vacuum (row groups of 122,880 rows): the rows landed since the published build, numbered from its count
on, are found there; a published row removed is seen, with or without a checkpoint since, though the vacuum moves the
increment's first rows below the count and the rows still add up; and nothing is read from a tail unless the published
gate passed `orphan_rows`."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from mafiabench.warehouse.builds import GRAIN_ROWS_SCHEMA, GRAIN_ROWS_TABLE, ensure_build_tables, increment_tails
from mafiabench.warehouse.raw import ensure_schema

GROUP = 122_880  # DuckDB's rows per row group
PUBLISHED = 2 * GROUP  # raw_events' rows when the published build read it: two full row groups
ADDED = 1_000  # the increment's: 100 games of 10 events


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """A published build's warehouse (its count of raw_events recorded, its gate passed) and 100 games landed since,
    the increment's ids in `inc`."""
    c = duckdb.connect(str(tmp_path / "w.duckdb"))
    ensure_schema(c)
    ensure_build_tables(c)
    c.execute(f"insert into raw_events (game_id, seq) select 'p-' || (i // 30), i % 30 from range({PUBLISHED}) t(i)")
    c.execute("checkpoint")
    c.execute("insert into build_runs (build_id, started_at, status, published) values ('b1', now(), 'passed', true)")
    c.execute("insert into validation_results (build_id, suite, success) values ('b1', 'orphan_rows', true)")
    c.execute(f"create table {GRAIN_ROWS_TABLE} ({GRAIN_ROWS_SCHEMA})")
    c.execute(f"insert into {GRAIN_ROWS_TABLE} values ('b1', 'gate', 'raw_events', {PUBLISHED})")
    c.execute("create table inc as select 'n-' || i as game_id from range(100) t(i)")
    c.execute(f"insert into raw_events (game_id, seq) select 'n-' || (i // 10), i % 10 from range({ADDED}) t(i)")
    return c


def test_the_rows_landed_since_are_the_tail(con: duckdb.DuckDBPyConnection) -> None:
    assert increment_tails(con, "inc") == {"raw_events": (PUBLISHED, ADDED)}
    con.execute("checkpoint")
    assert increment_tails(con, "inc") == {"raw_events": (PUBLISHED, ADDED)}


def test_a_published_row_removed_is_seen(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"delete from raw_events where rowid = {GROUP}")
    assert increment_tails(con, "inc") == {}  # the rows do not add up


def test_a_published_row_removed_then_vacuumed_is_seen(con: duckdb.DuckDBPyConnection) -> None:
    # As many published rows removed as the increment landed, in the row group before its rows: the checkpoint
    # merges the two, and the increment's rows are renumbered below the published count, which the rows now equal.
    con.execute(f"delete from raw_events where rowid >= {GROUP + 10} and rowid < {GROUP + 10 + ADDED}")
    con.execute("checkpoint")
    first, rows = con.execute("select min(rowid), count(*) from raw_events where game_id in (select game_id from inc)"
                              ).fetchall()[0]
    assert first == PUBLISHED - ADDED and rows == ADDED  # DuckDB's vacuum, as the docstring says
    assert con.execute("select count(*) from raw_events").fetchall()[0][0] == PUBLISHED
    assert increment_tails(con, "inc") == {}  # the row before the tail is the increment's


def test_nothing_from_a_tail_unless_the_published_gate_found_no_orphan_rows(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("update validation_results set success = false where suite = 'orphan_rows'")
    assert increment_tails(con, "inc") == {}
    con.execute("delete from validation_results where suite = 'orphan_rows'")
    assert increment_tails(con, "inc") == {}
