"""int_vote_rounds' counts on day votes of every shape, against their definitions computed in Python from the votes.

These rounds put ties, a vote without a target, an eliminated player who got no vote or is unknown, and fallback
votes beside the plain 2-1 arrest, so that a rewrite of the model's tallies (say, the best count among the others
from a round's two best tallies) is held to the same numbers.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from mafiabench.transform.build.marts import build_models
from support.records import MAFIA_WIN_VOTES, TIE_VOTES, TOWN_WIN_VOTES, landed, mini_record, rows

# game id -> (votes, eliminated, fallback voters, SQL that changes its log on raw_events, for that game)
ROUNDS: dict[str, tuple[dict[str, str], str | None, tuple[str, ...], str | None]] = {
    "clear": (TOWN_WIN_VOTES, None, (), None),
    "tie": (TIE_VOTES, "Charlie", (), None),
    "tie-fallback": (TIE_VOTES, "Bob", ("Charlie",), None),
    "one-target": ({"Alice": "Charlie", "Bob": "Charlie", "Charlie": "Charlie"}, None, (), None),
    "eliminated-without-votes": ({"Alice": "Charlie", "Bob": "Charlie", "Charlie": "Alice"}, "Bob", (), None),
    "eliminated-second": (MAFIA_WIN_VOTES, "Alice", ("Bob",), None),
    "fallback": (TOWN_WIN_VOTES, None, ("Bob", "Charlie"), None),
    "vote-without-target": (TOWN_WIN_VOTES, None, (), "update raw_events set target = null where type = 'vote' "
                            "and actor = 'Charlie'"),
    "unknown-eliminated": (MAFIA_WIN_VOTES, None, (), "update raw_events set target = null "
                           "where type = 'elimination'"),
}


def expected(votes: list[dict[str, Any]], eliminated: str | None) -> dict[str, Any]:
    """The definitions: a round's day votes, and the tallies of the named targets."""
    tally = Counter(v["target"] for v in votes if v["target"] is not None)
    fallback = Counter(v["target"] for v in votes if v["target"] is not None and v["random_fallback"])
    others = [n for t, n in tally.items() if t != eliminated] if eliminated is not None else []
    mine = tally.get(eliminated, 0) if eliminated is not None else 0
    mine_fallback = fallback.get(eliminated, 0) if eliminated is not None else 0
    best_other = max(others, default=0)
    return {
        "n_voters": len(votes),
        "n_targets": len(tally),
        "n_fallback_votes": sum(1 for v in votes if v["random_fallback"]),
        "votes_for_eliminated": mine,
        "fallback_votes_for_eliminated": mine_fallback,
        "max_votes_for_others": best_other,
        "eliminated_voted": eliminated is not None and any(v["voter"] == eliminated for v in votes),
        "fallback_decided": mine_fallback > 0 and mine - mine_fallback <= best_other,
    }


@pytest.fixture(scope="module")
def con():
    c = landed([mini_record(g, votes=v, eliminated=e, fallback_voters=f) for g, (v, e, f, _) in ROUNDS.items()],
               only=["stg_events"])
    for game, (*_, sql) in ROUNDS.items():
        if sql:
            c.execute(f"{sql} and game_id = ?", [game])
    build_models(c, only=["int_vote_rounds"])
    return c


@pytest.mark.parametrize("game", sorted(ROUNDS))
def test_round_counts_follow_the_definitions(con, game: str) -> None:
    votes = rows(con, "select actor as voter, target, random_fallback from raw_events "
                      "where game_id = ? and type = 'vote' and phase = 'day' order by seq", [game])
    (elimination,) = rows(con, "select target from raw_events where game_id = ? and type = 'elimination'", [game])
    (got,) = rows(con, "select * from int_vote_rounds where game_id = ?", [game])
    want = expected(votes, elimination["target"])
    assert {k: got[k] for k in want} == want
