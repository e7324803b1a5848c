"""A raw table whose rows are not the published build's plus the increment's (a row landed or removed outside the
increment's games) is not proven from the increment: the suites reading it run whole (quality.delta), and fail or
pass as they would."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.gate_increments import assert_same_gate, gate_twice

PUBLISHED = "(select min(game_id) from fct_games)"

CASES = {
    # a published game's seat landed again: the increment's rows hold no duplicate, the table does
    "a published seat landed twice": (
        f"insert into raw_players select * from raw_players where game_id = {PUBLISHED} limit 1",
        {"raw_players", "orphan_rows", "copied_games"}, "raw_players"),
    "an orphan event": (
        f"insert into raw_events select * replace ('ghost-game' as game_id) from raw_events "
        f"where game_id = {PUBLISHED} limit 1",
        {"orphan_rows", "copied_games"}, "orphan_rows"),
    "a published game's event removed": (
        f"delete from raw_events where game_id = {PUBLISHED} and seq = 0",
        {"orphan_rows", "copied_games"}, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_outside_the_increment_run_the_suites_whole(case: str, landed_increment: Path, tmp_path: Path) -> None:
    sql, whole_suites, failing = CASES[case]
    got, whole = gate_twice(landed_increment, tmp_path, lambda con: con.execute(sql))
    assert any(m.materialized == "incremental" for m in got.models)
    assert not whole_suites & set(got.proven_suites) and "raw_games" in got.proven_suites
    if failing is not None:
        assert not got.published and failing in {r.suite for r in got.failures}
    assert_same_gate(got, whole)
