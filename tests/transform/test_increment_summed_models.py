"""The summed models (`materialized: summed`, macros/increment.sql: counts by key, each a sum over games) in an
incremental build: one that only adds games adds the increment's counts to the published ones, one that replaces or
removes published games also takes those games' published counts away (a key left with no game leaves the table),
and a warehouse published without them builds whole; each time the marts published equal a full rebuild's, row
for row. The increment's games change a study's settings_varied (read
across games) and mix two settings of one model in one role within a game, the cases a count could get wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, games, model_call, published, remove_game, two_agents
from support.records import design, fresh_con, mini_record

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py), not last

# Every summed model of the project (a build lists each as "summed" when it added an increment's counts).
SUMMED = {"int_game_outcome_counts", "int_role_outcome_counts", "int_line_up_counts", "int_player_outcome_counts",
          "int_model_counts", "int_decision_counts", "int_reasoning_counts", "int_listing_counts",
          "int_last_speaker_game_patterns", "int_profile_counts"}
X_CELL = design("homogeneous|X", None, "X", "X")


def _listed(result: object, how: str) -> set[str]:
    return {m.name for m in result.models if m.materialized == how}  # type: ignore[attr-defined]


def test_an_increment_adds_its_games_counts(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 12, 0))
    assert build_warehouse(con).published

    # New games only: model X at another temperature (its study's settings_varied turns true, published rows of X
    # are rewritten), and games mixing two settings, or a setting and none, of X among the villagers.
    load_records(con, [*games("b", 6, 1, temperature=0.2), two_agents("mix-0", (0.7, 0.2)),
                       two_agents("mix-1", (0.2, None))])
    result = build_warehouse(con)
    assert result.published and _listed(result, "summed") == SUMMED
    assert_same(published(con), full_rebuild(con, tmp_path))
    split = con.execute("select distinct model_settings from mart_win_rates where dimension = 'model_as_villager' "
                        "and value = 'X'").fetchall()
    assert {s for (s,) in split} >= {"temperature 0.7", "temperature 0.2", ""}  # the study's flip is counted

    # Then more of them, on the counts the increment published.
    load_records(con, [*games("c", 4, 2, temperature=0.7), two_agents("mix-2", (0.7, None))])
    result = build_warehouse(con)
    assert result.published and _listed(result, "summed") == SUMMED
    assert_same(published(con), full_rebuild(con, tmp_path))


def test_replaced_or_removed_games_take_their_counts_away(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, [*games("a", 8, 0), two_agents("mix-0", (0.7, 0.2))])
    assert build_warehouse(con).published

    # A published game replaced by another record of itself (another outcome and temperature), one removed, one new:
    # the removed game was its key's only game (the mixed settings), so its rows leave the counts.
    load_records(con, [mini_record("a-0", models="X", votes={"Alice": "Bob", "Bob": "Alice", "Charlie": "Bob"},
                                   design=X_CELL, calls=[model_call(0, 0.2)])], replace=True)
    remove_game(con, "mix-0")
    load_records(con, [two_agents("mix-1", (0.2, None))])
    result = build_warehouse(con)
    assert result.published and _listed(result, "summed") == SUMMED
    assert_same(published(con), full_rebuild(con, tmp_path))

    # Every game of the cell removed but one, which is replaced, and the mixed game: keys fall to no game and leave.
    for (game,) in con.execute("select game_id from raw_games where game_id like 'a-%' and game_id <> 'a-0' "
                               "or game_id = 'mix-1'").fetchall():
        remove_game(con, game)
    load_records(con, [mini_record("a-0", models="Y", design=design("homogeneous|Y", None, "Y", "Y"))], replace=True)
    result = build_warehouse(con)
    assert result.published and _listed(result, "summed") == SUMMED
    assert_same(published(con), full_rebuild(con, tmp_path))


def test_a_warehouse_published_without_them_builds_whole(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, games("a", 4, 0))
    assert build_warehouse(con).published
    con.execute("drop table int_role_outcome_counts")  # as published by a build before the model was written
    load_records(con, games("b", 2, 1))
    result = build_warehouse(con)
    assert result.published and not _listed(result, "incremental") and not _listed(result, "summed")
    assert_same(published(con), full_rebuild(con, tmp_path))
