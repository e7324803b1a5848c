"""An increment is published without DuckDB's vacuum (`marts.checkpointed`): each per-game table keeps the appended
rows as one more row group instead of rewriting its last ones, and an increment replacing games its deleted rows as
gaps; every `VACUUM_EVERY`-th increment and a whole build are published with it, which merges them again and
reclaims the gaps. The connection's own `max_vacuum_tasks` comes back, and the warehouse's writers (a landing) do not
vacuum either."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from mafiabench.warehouse import builds
from mafiabench.warehouse.raw import connect, load_records
from support.gate_increments import build, copy, file_of
from support.increments import games
from support.records import mini_record


def _row_groups(con: duckdb.DuckDBPyConnection, table: str = "fct_player_games") -> int:
    return int(con.execute(f"select count(distinct row_group_id) from pragma_storage_info('{table}')")
               .fetchall()[0][0])


def _vacuum_tasks(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("select current_setting('max_vacuum_tasks')").fetchall()[0][0])


def _published_increment(con: duckdb.DuckDBPyConnection, **options: object) -> None:
    result = build(con, **options)
    assert result.published and any(m.materialized == "incremental" for m in result.models)


def _opened(landed: Path, tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """A copy of the warehouse opened as the commands open it (`warehouse.raw.connect`: no vacuum)."""
    con = copy(landed, tmp_path)
    path = file_of(con)
    con.close()
    return connect(path)


def test_an_added_increment_keeps_its_rows_apart_until_every_nth(landed_increment: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builds, "VACUUM_EVERY", 3)
    con = _opened(landed_increment, tmp_path)
    try:
        whole = _row_groups(con)
        _published_increment(con)
        assert (builds.unvacuumed(con), _row_groups(con)) == (1, whole + 1)
        path = file_of(con)
        con.close()
        con = connect(path)  # a landing, as the scheduled run's: its checkpoint merges nothing
        load_records(con, games("c", 3, 2))
        con.close()
        con = connect(path)
        assert _row_groups(con) == whole + 1
        _published_increment(con)
        assert (builds.unvacuumed(con), _row_groups(con)) == (2, whole + 2)
        load_records(con, games("d", 3, 3))
        _published_increment(con)  # the third: vacuumed, the small row groups merged
        assert (builds.unvacuumed(con), _row_groups(con)) == (0, whole)
        assert _vacuum_tasks(con) == 0  # the connection's own, back
    finally:
        con.close()


def test_with_the_vacuum_each_time_the_row_groups_merge(landed_increment: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: what DuckDB does to the same increment with its vacuum on; a connection's own setting (7) comes
    back after the publish's."""
    monkeypatch.setattr(builds, "VACUUM_EVERY", 1)
    con = copy(landed_increment, tmp_path)
    try:
        con.execute("set global max_vacuum_tasks = 7")
        whole = _row_groups(con)
        _published_increment(con)
        assert (builds.unvacuumed(con), _row_groups(con)) == (0, whole)
        assert _vacuum_tasks(con) == 7
    finally:
        con.close()


def test_a_replacing_increment_counts_as_one_and_a_whole_build_vacuums(landed_increment: Path, tmp_path: Path) -> None:
    con = _opened(landed_increment, tmp_path)
    try:
        whole = _row_groups(con)
        _published_increment(con)
        assert (builds.unvacuumed(con), _row_groups(con)) == (1, whole + 1)
        game = con.execute("select min(game_id) from fct_games where game_id like 'e%'").fetchall()[0][0]
        load_records(con, [mini_record(game, models="X")], replace=True)
        _published_increment(con)  # its deletes kept as gaps, its appended rows a row group of their own
        assert builds.unvacuumed(con) == 2 and _row_groups(con) == whole + 2
        assert con.execute("select max(rowid) + 1 > count(*) from raw_games").fetchall()[0][0]
        assert build(con, full_refresh=True).published
        assert builds.unvacuumed(con) == 0 and _row_groups(con) == whole
        assert con.execute("select max(rowid) + 1 = count(*) from raw_games").fetchall()[0][0]  # reclaimed
    finally:
        con.close()
