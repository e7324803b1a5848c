"""dbt's `unique` test of a per-game model (fct_games.game_id) in an increment that only adds games reads the delta
and the published rows holding its values (macros/increment.sql `duckdb__test_unique`), not every game, and gives
dbt's own verdict, count and rows: the same as the whole build's, passing or failing."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import marts
from support.gate_increments import build, copy

TEST = "unique_fct_games_game_id"
NEW = "(select game_id from raw_games where game_id not in (select game_id from fct_games))"


def _unique_test(result: object) -> tuple[bool, int, list[object]]:
    (found,) = [r for r in result.validation if r.suite == "dbt_tests" and r.expectation == TEST]  # type: ignore[attr-defined]
    return found.success, found.unexpected_count, found.failing_rows


def _a_new_game_landed_twice(con: duckdb.DuckDBPyConnection) -> None:
    # raw_games' primary key would refuse the second row: drop it first, as an older or hand-made warehouse might
    con.execute("create table _g as select * from raw_games; drop table raw_games; alter table _g rename to raw_games")
    con.execute(f"insert into raw_games select * from raw_games where game_id = (select min(game_id) from {NEW})")


@pytest.mark.parametrize("twice", [False, True], ids=["clean", "a new game landed twice"])
def test_the_increments_unique_test_reads_the_delta_and_equals_the_whole_builds(
        landed_increment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, twice: bool) -> None:
    compiled: list[str] = []
    tests = marts.data_tests

    def heard(con: duckdb.DuckDBPyConnection, staged: marts.Staged, sample: int = 5) -> list:
        out = tests(con, staged, sample)
        compiled.extend(r.compiled_sql or "" for r, _ in out if r.name == TEST)
        return out

    monkeypatch.setattr("mafiabench.publish.data_tests", heard)
    results = []
    for whole in (False, True):
        con = copy(landed_increment, tmp_path)
        try:
            if twice:
                _a_new_game_landed_twice(con)
            results.append(build(con, full_refresh=whole) if whole else build(con))
        finally:
            con.close()
    increment, full = results
    assert any(m.materialized == "incremental" for m in increment.models)
    assert "__staged_fct_games__delta" in compiled[0] and "__delta" not in compiled[1]
    assert _unique_test(increment) == _unique_test(full)
    assert _unique_test(increment)[:2] == ((False, 1) if twice else (True, 0))


def test_a_replacing_increment_runs_dbts_own_unique_test(landed_increment: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    tests = marts.data_tests
    monkeypatch.setattr("mafiabench.publish.data_tests", lambda con, staged, sample=5: [
        *(compiled.append(r.compiled_sql or "") or (r, rows) for r, rows in tests(con, staged, sample)
          if r.name == TEST)])
    con = copy(landed_increment, tmp_path)
    try:
        con.execute("update raw_games set landed_at = landed_at + interval 1 second "
                    "where game_id = (select min(game_id) from fct_games)")  # a published game landed again
        assert build_warehouse(con).published
    finally:
        con.close()
    assert compiled and "__delta" not in compiled[0]
