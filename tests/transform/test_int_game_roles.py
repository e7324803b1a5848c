"""int_game_roles: the model in each role, on hand-built games where a role has one model or several.

The model finds a role's one model with min/max and lists the models only for games where they differ; these games
cover both paths (a role's list is its distinct models, sorted, joined with ' + ').
"""

from __future__ import annotations

import pytest

from support.records import MAFIA_WIN_VOTES, landed, mini_record, rows

TWO_MAFIA = (("Alice", "mafioso"), ("Bob", "mafioso"), ("Charlie", "detective"), ("Diana", "villager"))

# game id -> (mafioso_model, detective_model, villager_model, is_homogeneous, night_victim)
EXPECTED = {
    "one-model-each": ("M", "D", "V", False, "Diana"),
    "homogeneous": ("m", "m", "m", True, "Diana"),
    # The night victim's model does not count when a villager was still playing by day.
    "villagers-differ": ("M", "D", "V1", False, "Diana"),
    # No villager died (the detective did): both day villagers' models, sorted.
    "day-villagers-differ": ("M", "D", "V1 + V2", False, "Bob"),
    "two-mafiosi": ("Ma + Mb", "D", "V", False, "Diana"),
    "two-mafiosi-one-model": ("Ma", "D", "V", False, "Diana"),
}


@pytest.fixture(scope="module")
def con():
    role_models = {"mafioso": "M", "detective": "D", "villager": "V"}
    recs = [
        mini_record("one-model-each", models=role_models),
        mini_record("homogeneous", models="m"),
        mini_record("villagers-differ", models={**role_models, "Charlie": "V1", "Diana": "V2"}),
        mini_record("day-villagers-differ", models={**role_models, "Charlie": "V2", "Diana": "V1"}, victim="Bob",
                    votes=MAFIA_WIN_VOTES),
        mini_record("two-mafiosi", seats=TWO_MAFIA, models={"Alice": "Mb", "Bob": "Ma", "Charlie": "D", "Diana": "V"},
                    votes={"Alice": "Charlie", "Bob": "Charlie", "Charlie": "Alice"}),
        mini_record("two-mafiosi-one-model", seats=TWO_MAFIA,
                    models={"Alice": "Ma", "Bob": "Ma", "Charlie": "D", "Diana": "V"},
                    votes={"Alice": "Charlie", "Bob": "Charlie", "Charlie": "Alice"}),
    ]
    return landed(recs, only=["int_game_roles"])


@pytest.mark.parametrize("game_id", sorted(EXPECTED))
def test_models_per_role(con, game_id: str) -> None:
    got = rows(con, "select * from int_game_roles where game_id = ?", [game_id])
    assert len(got) == 1
    g = got[0]
    assert (g["mafioso_model"], g["detective_model"], g["villager_model"], g["is_homogeneous"], g["night_victim"]) \
        == EXPECTED[game_id]
    assert g["n_seats"] == 4


def test_every_game_once(con) -> None:
    assert sorted(r["game_id"] for r in rows(con, "select game_id from int_game_roles")) == sorted(EXPECTED)
