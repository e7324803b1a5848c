"""Reasoning failures (Level 1 and 2), format failures by model x role x action, fallback-decided outcomes."""

from __future__ import annotations

import pytest

from test_marts_common import TOWN_WIN_VOTES, landed, mini_record, one, rows

MODELS = {"mafioso": "M", "detective": "D", "villager": "V"}
# Bob (detective) knows Alice is the mafioso but votes Charlie: a Level-1 failure.
LEVEL1_FAIL = {"Alice": "Charlie", "Bob": "Charlie", "Charlie": "Alice"}
# Bob accused Alice in public; Alice votes Charlie instead of Bob: a Level-2 failure.
LEVEL2_FAIL = {"Alice": "Charlie", "Bob": "Alice", "Charlie": "Alice"}
ACCUSE = [("Bob", "I investigated alice: she is the mafioso."), ("Alice", "Not me."), ("Charlie", "Hmm.")]


@pytest.fixture(scope="module")
def con():
    return landed(
        [
            mini_record("l1", models=MODELS, votes=LEVEL1_FAIL),
            mini_record("ok1", models=MODELS, votes=TOWN_WIN_VOTES),
            mini_record("l2", models=MODELS, votes=LEVEL2_FAIL, messages=ACCUSE),
            mini_record("ok2", models=MODELS, votes=TOWN_WIN_VOTES, messages=ACCUSE),
            # Not accused and not told: no Level-2 test for the mafioso.
            mini_record("na", models=MODELS, votes=LEVEL2_FAIL),
            # Told by the older protocol that the detective knows: a Level-2 test without an accusation.
            mini_record("told", models=MODELS, votes=LEVEL2_FAIL, mafioso_knows_detective=True),
            mini_record("ff", models=MODELS, votes=TOWN_WIN_VOTES, fallback_voters=["Charlie"],
                        messages=[("Charlie", None), ("Bob", "x"), ("Alice", "y"), ("Charlie", "z")]),
        ]
    )


def test_level1_per_detective_model(con) -> None:
    r = one(con, "select * from mart_reasoning_failures where level = 1")
    assert (r["model"], r["role"], r["n_opportunities"], r["n_failures"]) == ("D", "detective", 7, 1)
    assert r["rate"] == pytest.approx(1 / 7) and r["laplace_mean"] == pytest.approx(2 / 9)


def test_level2_needs_an_accusation_or_the_protocol_hint(con) -> None:
    r = one(con, "select * from mart_reasoning_failures where level = 2")
    assert (r["model"], r["role"], r["n_opportunities"], r["n_failures"]) == ("M", "mafioso", 3, 2)
    games = {x["game_id"] for x in rows(con, "select game_id from int_reasoning_opportunities where level = 2")}
    assert games == {"l2", "ok2", "told"}


def test_format_failures_by_model_role_action(con) -> None:
    got = {(r["model"], r["role"], r["action"]): (r["n_decisions"], r["n_format_failures"])
           for r in rows(con, "select * from mart_format_failures")}
    assert got[("V", "villager", "message")] == (4, 1)  # two turns in "ff", one each in "l2" and "ok2"
    assert got[("V", "villager", "vote")] == (7, 1)
    assert got[("M", "mafioso", "vote")] == (7, 0)
    # The scripted night is not an agent decision.
    assert not any(action == "night" for _, _, action in got)


def test_fallback_vote_that_did_not_decide(con) -> None:
    # Charlie's random vote went to Alice, who also had Bob's vote: 2-1 without it would be 1-1, so it decided.
    assert one(con, "select fallback_decided from fct_games where game_id = 'ff'")["fallback_decided"] is True
    assert one(con, "select n_format_failures from fct_games where game_id = 'ff'")["n_format_failures"] == 2
