"""Last-speaker advantage and name / seat bias."""

from __future__ import annotations

import math

import pytest

from support.records import MAFIA_WIN_VOTES, TOWN_WIN_VOTES, landed, mini_record, one, rows

# What the tests and the biases page read (and what those read): the rest of a build would only cost time.
READ = ["mart_last_speaker_bias", "mart_name_seat_bias"]


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
    return landed(recs, only=READ)


def test_last_speaker_rates(con) -> None:
    t = one(con, "select * from mart_last_speaker_bias where role = 'mafioso' and spoke_last")
    f = one(con, "select * from mart_last_speaker_bias where role = 'mafioso' and not spoke_last")
    assert (t["n"], t["k"], f["n"], f["k"]) == (3, 2, 2, 0)
    assert t["advantage"] == pytest.approx(3 / 5 - 1 / 4)
    assert f["advantage"] is None
    # The published contrast: against every mafioso of the final discussion (2 wins in 5), last speakers included.
    assert t["advantage_vs_all_games"] == pytest.approx(3 / 5 - 3 / 7)
    # Beta(3, 2) has variance 0.6 * 0.4 / 6 = 0.04, Beta(1, 3) 0.25 * 0.75 / 5 = 0.0375; the 2 of 5 games in which
    # Alice did not speak last scale the disjoint contrast's sd: (2/5) sqrt(0.0775)
    assert t["advantage_sd"] == pytest.approx(math.sqrt(0.0775))
    assert t["advantage_vs_all_games_sd"] == pytest.approx(2 / 5 * math.sqrt(0.0775))
    assert f["advantage_vs_all_games"] is None and f["advantage_vs_all_games_sd"] is None
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


# Two studies of one variant in one warehouse (the published Mini-Mafia study beside a new run): each is read on its
# own. Alice is the mafioso in every game; `last` says whether she had the last turn of the final round.
LAST = [("Bob", "a"), ("Charlie", "b"), ("Alice", "c")]
FIRST = [("Alice", "a"), ("Charlie", "b"), ("Bob", "c")]
STUDIES = {
    # study: (Alice spoke last, mafia won) per game
    "study-a": [(True, True), (True, True), (False, False)],
    "study-b": [(True, False), (False, True), (False, True)],
}


@pytest.fixture(scope="module")
def two_studies():
    recs = [
        mini_record(f"{study}-{i}", votes=MAFIA_WIN_VOTES if won else TOWN_WIN_VOTES, messages=LAST if last else FIRST,
                    design={"experiment": study, "cell": "c", "game_index": i})
        for study, games in STUDIES.items()
        for i, (last, won) in enumerate(games)
    ]
    # Study b also has a game without discussion: no last speaker, one more no-communication game.
    recs.append(mini_record("study-b-silent", votes=MAFIA_WIN_VOTES, discussion_rounds=0,
                            design={"experiment": "study-b", "cell": "c", "game_index": 3}))
    return landed(recs, only=READ)


def test_last_speaker_bias_is_per_study(two_studies) -> None:
    """By hand: in study a the mafioso won 2/2 speaking last and 0/1 otherwise, Laplace 3/4 against 1/3, an
    advantage of +5/12; study b is its mirror, -5/12. Pooled (the mart grouped by variant) both are 2/3 and 2/3,
    an advantage of 0."""
    # Without naming the study: two rows, not one pooled (3, 2).
    last = rows(two_studies, "select n, k from mart_last_speaker_bias where role = 'mafioso' and spoke_last")
    assert sorted((r["n"], r["k"]) for r in last) == [(1, 0), (2, 2)]
    got = {(r["study"], r["spoke_last"]): r for r in rows(
        two_studies, "select * from mart_last_speaker_bias where role = 'mafioso'")}
    assert set(got) == {("study-a", True), ("study-a", False), ("study-b", True), ("study-b", False)}
    assert [(got[("study-a", s)]["n"], got[("study-a", s)]["k"]) for s in (True, False)] == [(2, 2), (1, 0)]
    assert [(got[("study-b", s)]["n"], got[("study-b", s)]["k"]) for s in (True, False)] == [(1, 0), (2, 2)]
    assert got[("study-a", True)]["advantage"] == pytest.approx(3 / 4 - 1 / 3)
    assert got[("study-b", True)]["advantage"] == pytest.approx(1 / 3 - 3 / 4)
    # Every role of study a: 3 games x 3 players of the final discussion; Alice won twice, Bob and Charlie once each.
    total = one(two_studies, "select * from mart_last_speaker_bias where study = 'study-a' and role = 'all' "
                             "and spoke_last")
    assert (total["n"], total["total_n"], total["total_k"]) == (3, 9, 4)
    assert total["total_laplace_mean"] == pytest.approx(5 / 11)


def test_name_and_seat_bias_is_per_study(two_studies) -> None:
    """By hand: Alice (the mafioso, seat 0) won 2 of 3 games in study a and 3 of 4 in study b (its game without
    discussion is a mafia win); pooled she would be 5 of 7. Only study b has a no-communication game."""
    assert sorted((r["n"], r["k"]) for r in rows(
        two_studies, "select n, k from mart_name_seat_bias where setting = 'all' and dimension = 'name' "
                     "and value = 'Alice' and role = 'all'")) == [(3, 2), (4, 3)]  # not one pooled (7, 5)
    alice = {r["study"]: (r["n"], r["k"]) for r in rows(
        two_studies, "select * from mart_name_seat_bias where setting = 'all' and dimension = 'name' "
                     "and value = 'Alice' and role = 'all'")}
    assert alice == {"study-a": (3, 2), "study-b": (4, 3)}
    seat0 = one(two_studies, "select * from mart_name_seat_bias where study = 'study-b' and setting = 'all' "
                             "and dimension = 'seat' and value = '0' and role = 'mafioso'")
    assert (seat0["n"], seat0["k"]) == (4, 3)
    assert seat0["laplace_mean"] == pytest.approx(4 / 6)
    female = {r["study"]: (r["n"], r["k"]) for r in rows(
        two_studies, "select * from mart_name_seat_bias where setting = 'all' and dimension = 'gender' "
                     "and value = 'female' and role = 'all'")}
    assert female == {"study-a": (3, 2), "study-b": (4, 3)}  # Diana, the night victim, played no day
    nocomm = {r["study"] for r in rows(two_studies, "select study from mart_name_seat_bias "
                                                    "where setting = 'no_communication'")}
    assert nocomm == {"study-b"}


def test_the_biases_page_has_a_section_and_csv_exports_per_study(two_studies) -> None:
    from mafiabench.dashboards.data import Marts
    from mafiabench.dashboards.html import render_page
    from mafiabench.dashboards.page_registry import Context
    from mafiabench.dashboards.pages.bias import build

    page = build(Context(marts=Marts(two_studies), transcripts={}))
    assert [s["study"] for s in page.data["studies"]] == ["study-a", "study-b"]
    assert set(page.exports) == {"study-a.last-speaker", "study-a.name-seat", "study-b.last-speaker",
                                 "study-b.name-seat"}
    # Each export holds its study's rows alone, as the mart has them.
    exported = page.exports["study-a.last-speaker"]
    assert {r["study"] for r in exported} == {"study-a"}
    assert {(r["n"], r["k"]) for r in exported if r["role"] == "mafioso" and r["spoke_last"] is True} == {(2, 2)}
    assert {r["study"] for r in page.exports["study-b.name-seat"]} == {"study-b"}
    html = render_page(page, nav=[])
    for study in ("study-a", "study-b"):
        assert f'<section id="study-{study}" class="study">' in html and f"<h2>Study {study}</h2>" in html
        assert f'id="chart-last-speaker-{study}"' in html and f'id="chart-name-seat-{study}"' in html
        assert f'href="biases.{study}.last-speaker.csv"' in html and f'href="biases.{study}.name-seat.csv"' in html
