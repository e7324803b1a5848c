"""mart_win_rates splits a model's `model_as_<role>` rows by settings only where its study played it under several
(fct_player_games.settings_varied), and counts a game once per row either way: two villagers of one model with two
settings in one game count once under each setting where the study varies them, and once where it does not (a seat
without model calls has no settings, '', which is no other setting)."""

from __future__ import annotations

from support.increments import two_agents
from support.records import landed, rows


def test_a_model_with_two_settings_in_one_game_counts_once_per_row() -> None:
    con = landed([two_agents("a-0", (0.7, None), "exp-a"), two_agents("b-0", (0.7, 0.2), "exp-b")],
                 only=["mart_win_rates", "fct_player_games"])
    varied = rows(con, "select distinct study, settings_varied from fct_player_games where model = 'X'")
    assert {(r["study"], r["settings_varied"]) for r in varied} == {("exp-a", False), ("exp-b", True)}
    villagers = rows(con, "select model_settings, n, k from mart_win_rates "
                          "where dimension = 'model_as_villager' and value = 'X'")
    # The town won both games: exp-a's once (not once for '' and once for its one temperature), exp-b's once per
    # temperature.
    assert {r["model_settings"]: (r["n"], r["k"]) for r in villagers} == {
        "": (1, 1), "temperature 0.7": (1, 1), "temperature 0.2": (1, 1)}
