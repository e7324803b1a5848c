"""A rehearsal (transform.build.rehearsal) records the next build's dbt run and test on an empty copy of the warehouse:
the first increment after a whole build, which would pay dbt, replays them and publishes what dbt would, row for
row, also when the increment replaces published games (a run that replays failed games). It runs only when it can
help, and records nothing it found a record of."""

from __future__ import annotations

import dataclasses
import json
import zlib
from pathlib import Path

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import rehearsal, replay
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, games, published
from support.records import fresh_con, mini_record
from support.replays import copy, scheduled


@pytest.fixture
def machine_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine keeps dbt's records (the suite turns it off), in a folder of the test's own."""
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "1")
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MAFIABENCH_DBT_THREADS", raising=False)  # restored after: `rehearse` sets the warehouse's
    return tmp_path / "cache"


def _first_increment() -> duckdb.DuckDBPyConnection:
    """A warehouse built whole, then games landed: its next build is its first increment."""
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    assert build_warehouse(con).published
    load_records(con, games("b", 4, 1))
    con.execute("checkpoint")
    return con


@pytest.mark.slow
def test_a_rehearsed_first_increment_replays_and_publishes_what_dbt_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine_records: Path) -> None:
    con = _first_increment()
    by_dbt = copy(con, tmp_path)
    with monkeypatch.context() as m:
        m.setenv("MAFIABENCH_REPLAY_CACHE", "0")
        ran = build_warehouse(by_dbt)
    assert ran.published and ran.replayed == []  # no record at hand: dbt runs
    kept = set((machine_records / "dbt-replays").glob("*.json.z"))  # the whole build's
    before = published(con)
    tables = con.execute("select table_name, estimated_size from duckdb_tables() order by 1").fetchall()
    assert rehearsal.export(con, tmp_path / "rehearsal")
    done = rehearsal.rehearse(tmp_path / "rehearsal")
    assert done.recorded == ["run", "test"] and done.replayed == []
    assert sorted(p.name.split("-")[0] for p in set((machine_records / "dbt-replays").glob("*.json.z")) - kept) == \
        ["run", "test"]
    # The warehouse as it was: nothing staged, built or attached.
    assert con.execute("select table_name, estimated_size from duckdb_tables() order by 1").fetchall() == tables
    assert_same(published(con), before)
    assert [r[0] for r in con.execute("select database_name from duckdb_databases() where not internal")
            .fetchall()] == ["w"]
    # A rehearsal of a record at hand replays it and keeps nothing new.
    assert rehearsal.export(con, tmp_path / "again")
    again = rehearsal.rehearse(tmp_path / "again")
    assert again.recorded == [] and again.replayed == ["run", "test"]
    replayed = build_warehouse(con)
    assert replayed.published and replayed.replayed == ["run", "test"]
    assert_same(published(con), published(by_dbt))
    assert sorted((v.suite, v.expectation, v.success, v.unexpected_count) for v in replayed.validation) == \
        sorted((v.suite, v.expectation, v.success, v.unexpected_count) for v in ran.validation)


def _recorded_vars(folder: Path, kind: str) -> list[dict]:
    """The vars of the records of this kind kept on this machine."""
    return [json.loads(zlib.decompress(p.read_bytes()))["record"]["vars"]
            for p in sorted((folder / "dbt-replays").glob(f"{kind}-*.json.z"))]


@pytest.mark.slow
def test_a_rehearsed_increment_that_replaces_a_published_game_replays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine_records: Path) -> None:
    """Its key is not an adding increment's (`increment_replaces`): the copy holds the replaced game's published row,
    so its increment replaces it too. Without it the rehearsal records an adding increment, and dbt runs."""
    con = _first_increment()
    replaced = con.execute("select min(game_id) from raw_games").fetchall()[0][0]
    assert load_records(con, [mini_record(replaced, models="X")], replace=True).replaced == 1
    con.execute("checkpoint")
    by_dbt = copy(con, tmp_path)
    with monkeypatch.context() as m:
        m.setenv("MAFIABENCH_REPLAY_CACHE", "0")
        ran = build_warehouse(by_dbt)
    assert ran.published and ran.replayed == []
    assert rehearsal.export(con, tmp_path / "rehearsal")
    assert json.loads((tmp_path / "rehearsal" / rehearsal.SPEC).read_text())["replacing"] == [rehearsal.AS_LANDED]
    done = rehearsal.rehearse(tmp_path / "rehearsal")
    assert done.recorded == ["run", "test"]
    assert [v["increment_replaces"] for v in _recorded_vars(machine_records, "run") if v.get("increment")] == [True]
    replayed = build_warehouse(con)
    assert replayed.published and replayed.replayed == ["run", "test"]
    assert_same(published(con), published(by_dbt))
    assert sorted((v.suite, v.expectation, v.success, v.unexpected_count) for v in replayed.validation) == \
        sorted((v.suite, v.expectation, v.success, v.unexpected_count) for v in ran.validation)


def test_nothing_to_rehearse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine_records: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    assert not rehearsal.export(con, tmp_path / "rehearsal")  # no published build
    assert build_warehouse(con).published
    assert not rehearsal.export(con, tmp_path / "rehearsal")  # no game landed since
    load_records(con, games("b", 4, 1))
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "0")
    assert not rehearsal.export(con, tmp_path / "rehearsal")  # this machine keeps no records
    assert not (tmp_path / "rehearsal").exists()
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "1")
    assert rehearsal.export(con, tmp_path / "rehearsal")
    assert build_warehouse(con).replayed == []  # an increment, recorded in the warehouse
    load_records(con, games("c", 4, 2))
    assert not rehearsal.export(con, tmp_path / "next")  # the next increment replays the warehouse's record


def test_a_record_kept_before_its_vars_were_gains_them(machine_records: Path) -> None:
    """`due` reads whether the published build's dbt run was an increment's from its record's vars; a record kept
    before they were says nothing (a rehearsal is tried), until a build replays it and keeps them."""
    con = scheduled()  # the published build an increment, recorded; the next one landed
    assert not rehearsal.due(con)
    for kind, blob in con.execute(f"select kind, record from {replay.TABLE}").fetchall():
        record = json.loads(zlib.decompress(blob))
        record.pop("vars", None)
        con.execute(f"update {replay.TABLE} set record = ? where kind = ?",
                    [zlib.compress(json.dumps(record).encode()), kind])
    assert rehearsal.due(con)
    assert build_warehouse(con).replayed == ["run", "test"]
    assert not rehearsal.due(con)


def test_the_stand_in_is_the_last_game_landed_that_did_not_fail() -> None:
    """A failed game stops at its failing call, and may lack rows a finished one has (another key)."""
    con = fresh_con()
    records = games("a", 3, 0)
    last = records[-1]
    failed = dataclasses.replace(last, outcome={**last.outcome, "status": "failed", "winner": None}, error="injected")
    load_records(con, [*records[:-1], failed])
    assert rehearsal._stand_ins(con) == [[rehearsal.AS_LANDED, records[-2].game_id]]
    load_records(con, [last], replace=True)  # played again: the last row, finished
    assert rehearsal._stand_ins(con) == [[rehearsal.AS_LANDED, last.game_id]]
