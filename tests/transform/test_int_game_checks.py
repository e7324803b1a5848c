"""int_game_checks.seq_defects on broken event logs, against the definition computed in Python.

The model counts a game's distinct seqs from the bits of one integer when they all lie in 0-63 and from a list
otherwise; these logs put duplicates, gaps and shifts on both sides of that line (and across it).
"""

from __future__ import annotations

from typing import Any

import pytest

from mafiabench.transform.build.marts import build_models
from support.records import landed, mini_record, rows

# game id -> SQL that breaks its log (on raw_events, where game_id = the game)
BREAKS = {
    "intact": None,
    "duplicate": "update raw_events set seq = 4 where seq = 5",
    "gap": "delete from raw_events where seq = 3",
    "long": "update raw_events set seq = seq + 100",
    "long-duplicate": "update raw_events set seq = case when seq = 6 then 105 else seq + 100 end",
    "straddling": "update raw_events set seq = seq + 50",
    "straddling-duplicate": "update raw_events set seq = case when seq = 15 then 64 else seq + 50 end",
    "negative": "update raw_events set seq = seq - 1",
    "a-null-seq": "update raw_events set seq = null where seq = 2",
}


def expected(seqs: list[int | None]) -> Any:
    """(n - distinct) + |min| + |max - (n - 1)|: 0 exactly when the seqs are 0..n-1."""
    known = [s for s in seqs if s is not None]
    if not known:
        return None
    n = len(seqs)
    return (n - len(set(known))) + abs(min(known)) + abs(max(known) - (n - 1))


@pytest.fixture(scope="module")
def con():
    c = landed([mini_record(g) for g in BREAKS], only=["int_game_checks"])
    for game, sql in BREAKS.items():
        if sql:
            c.execute(f"{sql} and game_id = ?" if " where " in sql else f"{sql} where game_id = ?", [game])
    build_models(c, only=["int_game_checks"])
    return c


@pytest.mark.parametrize("game", sorted(BREAKS))
def test_seq_defects_follow_the_definition(con, game: str) -> None:
    seqs = [r["seq"] for r in rows(con, "select seq from raw_events where game_id = ?", [game])]
    got = rows(con, "select seq_defects from int_game_checks where game_id = ?", [game])[0]["seq_defects"]
    assert got == expected(seqs)
    assert (got == 0) == (game == "intact")
