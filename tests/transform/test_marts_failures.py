"""Reasoning failures (Level 1 and 2), format failures by model x role x action, fallback-decided outcomes."""

from __future__ import annotations

import pytest

from support.records import TOWN_WIN_VOTES, landed, mini_record, one, rows

MODELS = {"mafioso": "M", "detective": "D", "villager": "V"}
# Bob (detective) knows Alice is the mafioso but votes Charlie: a Level-1 failure.
LEVEL1_FAIL = {"Alice": "Charlie", "Bob": "Charlie", "Charlie": "Alice"}
# Bob accused Alice in public; Alice votes Charlie instead of Bob: a Level-2 failure.
LEVEL2_FAIL = {"Alice": "Charlie", "Bob": "Alice", "Charlie": "Alice"}
ACCUSE = [("Bob", "I investigated alice: she is the mafioso."), ("Alice", "Not me."), ("Charlie", "Hmm.")]


# What the tests and the failures page read (and what those read): the rest of a build would only cost time.
READ = ["mart_reasoning_failures", "int_reasoning_opportunities", "mart_format_failures", "fct_games", "mart_win_rates"]


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
        ],
        only=READ,
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


# A prompt ablation: one variant played under two prompt versions in one warehouse. Each version is its own
# experiment; the failure rates are counted per version, never pooled.
ABLATION = {
    "v4.1-full": [
        ("full-l1", LEVEL1_FAIL, [], ()),
        ("full-ok", TOWN_WIN_VOTES, [], ()),
        ("full-ff", TOWN_WIN_VOTES, [("Charlie", None), ("Bob", "x"), ("Alice", "y"), ("Charlie", "z")], ["Charlie"]),
    ],
    "v4.1-condensed": [(f"condensed-ok{i}", TOWN_WIN_VOTES, [], ()) for i in range(3)],
}


@pytest.fixture(scope="module")
def ablation():
    return landed([
        mini_record(game_id, models=MODELS, votes=votes, messages=messages, fallback_voters=fallback,
                    prompt_version=version)
        for version, games in ABLATION.items()
        for game_id, votes, messages, fallback in games
    ], only=READ)


def test_reasoning_failures_per_prompt_version(ablation) -> None:
    """By hand: the detective model D failed Level 1 in 1 of 3 games under v4.1-full (Laplace 2/5) and in 0 of 3
    under v4.1-condensed (1/5); pooled, 1 of 6 (2/8)."""
    level1 = rows(ablation, "select * from mart_reasoning_failures where level = 1")
    assert sorted((r["n_opportunities"], r["n_failures"]) for r in level1) == [(3, 0), (3, 1)]  # not one (6, 1)
    got = {r["prompt_version"]: r for r in level1}
    assert (got["v4.1-full"]["n_failures"], got["v4.1-full"]["n_games"]) == (1, 3)
    assert got["v4.1-full"]["laplace_mean"] == pytest.approx(2 / 5)
    assert got["v4.1-condensed"]["n_failures"] == 0
    assert got["v4.1-condensed"]["laplace_mean"] == pytest.approx(1 / 5)


def test_format_failures_per_prompt_version(ablation) -> None:
    """By hand: the villager model V broke the vote format once in 3 votes under v4.1-full and never in 3 under
    v4.1-condensed (pooled: 1 in 6); its one failed message is in v4.1-full's 2 turns (the condensed games had no
    discussion messages)."""
    votes = rows(ablation, "select * from mart_format_failures where model = 'V' and action = 'vote'")
    assert sorted((r["n_decisions"], r["n_format_failures"]) for r in votes) == [(3, 0), (3, 1)]  # not one (6, 1)
    got = {(r["prompt_version"], r["action"]): (r["n_decisions"], r["n_format_failures"], r["rate"])
           for r in rows(ablation, "select * from mart_format_failures where model = 'V'")}
    assert got == {("v4.1-full", "vote"): (3, 1, pytest.approx(1 / 3)), ("v4.1-condensed", "vote"): (3, 0, 0),
                   ("v4.1-full", "message"): (2, 1, pytest.approx(1 / 2))}


def test_the_failures_page_names_the_version_beside_the_model(ablation, con) -> None:
    from mafiabench.dashboards.data import Marts
    from mafiabench.dashboards.html import render_page
    from mafiabench.dashboards.page_registry import Context
    from mafiabench.dashboards.pages.failures import build

    page = build(Context(marts=Marts(ablation), transcripts={}))
    labels = {r["model_label"] for r in page.data["reasoning"]}
    assert labels == {"D · v4.1-full", "D · v4.1-condensed"}
    assert {"V · v4.1-full", "V · v4.1-condensed"} <= {r["model_label"] for r in page.data["formats"]}
    html = render_page(page, nav=[])
    assert "<td>D · v4.1-full</td>" in html and "<td>D · v4.1-condensed</td>" in html
    # One prompt version: the model alone.
    single = build(Context(marts=Marts(con), transcripts={}))
    assert {r["model_label"] for r in single.data["reasoning"]} == {"D", "M"}
