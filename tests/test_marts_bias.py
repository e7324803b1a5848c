"""Last-speaker advantage and name / seat bias."""

from __future__ import annotations

import pytest

from test_marts_common import MAFIA_WIN_VOTES, TOWN_WIN_VOTES, landed, mini_record, one, rows


@pytest.fixture(scope="module")
def con():
    recs = []
    # Alice (mafioso) speaks last in 3 games and wins 2; not last in 2 games and wins 0.
    for i, won in enumerate([True, True, False]):
        recs.append(mini_record(f"last{i}", votes=MAFIA_WIN_VOTES if won else TOWN_WIN_VOTES,
                                messages=[("Bob", "a"), ("Charlie", "b"), ("Alice", "c")]))
    for i in range(2):
        recs.append(mini_record(f"first{i}", votes=TOWN_WIN_VOTES,
                                messages=[("Alice", "a"), ("Charlie", "b"), ("Bob", "c")]))
    # No communication: no last speaker, counted in the no-communication setting.
    recs.append(mini_record("silent", votes=MAFIA_WIN_VOTES, discussion_rounds=0))
    return landed(recs)


def test_last_speaker_rates(con) -> None:
    t = one(con, "select * from mart_last_speaker_bias where role = 'mafioso' and spoke_last")
    f = one(con, "select * from mart_last_speaker_bias where role = 'mafioso' and not spoke_last")
    assert (t["n"], t["k"], f["n"], f["k"]) == (3, 2, 2, 0)
    assert t["advantage"] == pytest.approx(3 / 5 - 1 / 4)
    assert f["advantage"] is None
    # The game without discussion has no last speaker and is left out.
    assert one(con, "select sum(n) as n from mart_last_speaker_bias where role = 'detective'")["n"] == 5
    # Only players of the final discussion count: Charlie, not Diana (the night victim, who never spoke).
    assert one(con, "select sum(n) as n from mart_last_speaker_bias where role = 'villager'")["n"] == 5


def test_name_and_seat_bias(con) -> None:
    alice = one(con, "select * from mart_name_seat_bias where setting = 'all' and dimension = 'name' "
                     "and value = 'Alice' and role = 'all'")
    assert (alice["n"], alice["k"]) == (6, 3)
    seat0 = one(con, "select * from mart_name_seat_bias where setting = 'all' and dimension = 'seat' "
                     "and value = '0' and role = 'mafioso'")
    assert (seat0["n"], seat0["k"]) == (6, 3)
    nocomm = rows(con, "select * from mart_name_seat_bias where setting = 'no_communication' and role = 'all' "
                       "and dimension = 'name' order by value")
    # Diana, the night victim of every game, played no day: she is in no per-player day rate.
    assert [(r["value"], r["n"], r["k"]) for r in nocomm] == [("Alice", 1, 1), ("Bob", 1, 0), ("Charlie", 1, 0)]
    assert not rows(con, "select * from mart_name_seat_bias where dimension = 'name' and value = 'Diana'")
