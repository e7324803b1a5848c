"""A published build's dbt records are also kept on the machine (transform.build.replay `keep`): the first
incremental build of another warehouse of the same name and project replays them instead of paying dbt, and
publishes what dbt would, row for row; a record the machine cannot read, or the cache turned off, costs dbt's run
only."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import replay
from mafiabench.transform.build.dbt_runner import PACKAGED_PROJECT
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, games, published
from support.records import fresh_con
from support.replays import copy

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py), not last


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The machine's cache, empty and on."""
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "1")
    return tmp_path / "cache" / replay.CACHE


def _first_increment_landed() -> duckdb.DuckDBPyConnection:
    """A new warehouse (named w.duckdb, as every fresh_con), built whole, with an increment landed."""
    con = fresh_con()
    load_records(con, games("a", 8, 0))
    assert build_warehouse(con).published
    load_records(con, games("b", 4, 1))
    return con


def _replays_and_equals_dbt(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """`con` built replays the machine's records, and publishes and gates what dbt does on a copy (no records)."""
    by_dbt = copy(con, tmp_path)
    if by_dbt.execute("select 1 from duckdb_tables() where table_name = ?", [replay.TABLE]).fetchall():
        by_dbt.execute(f"delete from {replay.TABLE}")  # a published build's own records: dbt runs all the same
    replayed = build_warehouse(con)
    assert replayed.published and replayed.replayed == ["run", "test"]
    with pytest.MonkeyPatch.context() as off:
        off.setenv("MAFIABENCH_REPLAY_CACHE", "0")
        ran = build_warehouse(by_dbt)
    assert ran.published and ran.replayed == []
    assert_same(published(con), published(by_dbt))
    assert sorted((v.suite, v.rule, v.success, v.element_count, v.unexpected_count) for v in replayed.validation) \
        == sorted((v.suite, v.rule, v.success, v.element_count, v.unexpected_count) for v in ran.validation)


def test_a_first_increment_replays_another_warehouses_record(tmp_path: Path, machine: Path) -> None:
    first = _first_increment_landed()
    recorded = build_warehouse(first)
    assert recorded.published and recorded.replayed == []
    assert sorted(p.name.split("-")[0] for p in machine.glob("*.json.z")) == ["run", "run", "test", "test"]

    second = _first_increment_landed()  # its whole build replayed the first's whole build: checked below too
    _replays_and_equals_dbt(second, tmp_path)


def test_a_whole_build_replays_the_machines_whole_build_and_equals_dbts(tmp_path: Path, machine: Path) -> None:
    first = fresh_con()
    load_records(first, games("a", 8, 0))
    assert build_warehouse(first).replayed == []
    second = fresh_con()
    load_records(second, games("z", 6, 3))  # other games: the record holds statements, not rows
    _replays_and_equals_dbt(second, tmp_path)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A machine's cache holding a whole build's records and its first increment's, made once for the damages below
    (each damages a copy: `machine`)."""
    folder = tmp_path_factory.mktemp("recorded") / "cache"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MAFIABENCH_CACHE_DIR", str(folder))
        env.setenv("MAFIABENCH_REPLAY_CACHE", "1")
        first = _first_increment_landed()
        assert build_warehouse(first).published
        first.close()
    return folder


@pytest.mark.parametrize("damage", ["garbage", "another key", "off"])
def test_an_unreadable_record_or_the_cache_off_runs_dbt(machine: Path, recorded: Path, damage: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(recorded, machine.parent, dirs_exist_ok=True)
    files = sorted(machine.glob("*.json.z"))
    assert len(files) == 4
    for file in files:
        kind = file.name.split("-", 1)[0]
        if damage == "garbage":
            file.write_bytes(b"not a record")
        elif damage == "another key":  # a record whose own key is not its file's is not trusted
            record = replay.kept(kind, file.name.split("-", 1)[1].removesuffix(".json.z"))
            file.write_bytes(replay._packed({"kind": kind, "key": "0" * 32, "record": record}))
    if damage == "off":
        monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "0")
    result = build_warehouse(_first_increment_landed())
    assert result.published and result.replayed == []


@pytest.mark.parametrize("over", ["full refresh", "another project"])
def test_a_whole_build_over_published_relations_leaves_the_machines_first_build_record(
        tmp_path: Path, machine: Path, over: str) -> None:
    """A whole build over published relations (`--full-refresh`; a changed project's first build) has a fresh first
    build's key, or a new one, but dbt lists other relations: kept, its record would replace or stand beside the one
    a fresh warehouse's first build replays, and a replay of it would stop at dbt's first look-up."""
    first = fresh_con()
    load_records(first, games("a", 8, 0))
    assert build_warehouse(first).replayed == []
    kept_before = {p.name: p.read_bytes() for p in machine.glob("*.json.z")}
    assert sorted(name.split("-")[0] for name in kept_before) == ["run", "test"]
    if over == "full refresh":
        whole = build_warehouse(first, full_refresh=True)
    else:
        project = tmp_path / "sql"
        shutil.copytree(PACKAGED_PROJECT, project)
        model = project / "models" / "marts" / "mart_win_rates.sql"
        model.write_text(model.read_text() + "\n-- an edit\n")
        whole = build_warehouse(first, sql_dir=project)
    assert whole.published and whole.replayed == []
    assert {p.name: p.read_bytes() for p in machine.glob("*.json.z")} == kept_before

    second = fresh_con()
    load_records(second, games("z", 6, 3))
    assert build_warehouse(second).replayed == ["run", "test"]
