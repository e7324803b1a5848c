"""mart_exceptional_games: upsets by leave-one-out Laplace probability, and the pattern rules."""

from __future__ import annotations

import math

import pytest

from support.records import MAFIA_WIN_VOTES, TOWN_WIN_VOTES, cell_records, landed, mini_record, rows

WEAK_MAFIA = {"mafioso": "weak", "detective": "strong", "villager": "strong"}


@pytest.fixture(scope="module")
def con():
    recs = cell_records("cell", n=20, mafia_wins=1, models=WEAK_MAFIA)  # cell-0 is the one mafia win
    recs += cell_records("even", n=20, mafia_wins=10, models="X")
    # The detective named the mafioso and the town still lost.
    recs.append(mini_record("revealed", models="Y", votes=MAFIA_WIN_VOTES,
                            messages=[("Bob", "Alice is the mafioso!")]))
    # Alice and Bob vote Charlie (a villager), who votes Bob: a 2-1 majority, not unanimous (the bug this replaced
    # flagged every such non-tie mafia win).
    recs.append(mini_record("majority", models="Y", votes={"Alice": "Charlie", "Bob": "Charlie", "Charlie": "Bob"}))
    # Charlie casts no vote (a human game's abstention): every vote cast went to him: unanimous, and wrong.
    recs.append(mini_record("unanimous", models="Y", votes={"Alice": "Charlie", "Bob": "Charlie"}))
    recs.append(mini_record("fallback", models="Y", votes=MAFIA_WIN_VOTES, fallback_voters=["Charlie"]))
    return landed(recs, only=["mart_exceptional_games"])


def test_upset_in_a_lopsided_cell(con) -> None:
    got = rows(con, "select * from mart_exceptional_games where rule = 'upset'")
    assert [r["game_id"] for r in got] == ["cell-0"]
    r = got[0]
    # The other 19 games are all town wins: p = (0 + 1) / (19 + 2) = 1/21.
    assert r["probability"] == pytest.approx(1 / 21)
    assert r["surprise"] == pytest.approx(math.log(21))
    assert "mafia won" in r["reason"] and r["transcript_path"] == "transcripts/cell-0.html"
    assert r["cell"].startswith("mafioso=weak")


def test_a_town_win_is_an_upset_where_the_mafia_nearly_always_wins() -> None:
    # 19 mafia wins and one town win: the town win's p = (0 + 1) / (19 + 2) = 1/21, the mafia wins' 19/21.
    c = landed(cell_records("strong", n=20, mafia_wins=19, models=WEAK_MAFIA), only=["mart_exceptional_games"])
    got = rows(c, "select game_id, probability, reason from mart_exceptional_games where rule = 'upset'")
    assert [(r["game_id"], r["reason"]) for r in got] == [
        ("strong-19", "town won, which the other 19 games of this cell put at 4.8%")]
    assert got[0]["probability"] == pytest.approx(1 / 21)


def test_upset_threshold_is_configurable() -> None:
    c = landed(cell_records("cell", n=20, mafia_wins=1, models=WEAK_MAFIA), upset_threshold=0.01,
               only=["mart_exceptional_games"])
    assert rows(c, "select * from mart_exceptional_games where rule = 'upset'") == []


def test_pattern_rules(con) -> None:
    got = {(r["game_id"], r["rule"]) for r in rows(con, "select game_id, rule from mart_exceptional_games")}
    assert ("revealed", "detective_revealed_town_lost") in got
    assert ("unanimous", "unanimous_wrong_vote") in got
    assert ("majority", "unanimous_wrong_vote") not in got
    assert ("fallback", "fallback_decided") in got
    reason = rows(con, "select reason from mart_exceptional_games where rule = 'unanimous_wrong_vote'")
    assert reason == [{"reason": "every vote cast on day 1 (2) went to Charlie, a villager"}]
    # A clean town win is not exceptional.
    assert not any(g == "even-15" for g, _ in got)
    r = rows(con, "select * from mart_exceptional_games where rule = 'detective_revealed_town_lost'")[0]
    n_scored = 44
    assert r["surprise"] == pytest.approx(-math.log(1 / n_scored))


def test_rare_level1_failure_by_a_model_that_almost_never_fails() -> None:
    models = {"mafioso": "M", "detective": "careful", "villager": "V"}
    recs = [mini_record(f"ok{i}", models=models, votes=TOWN_WIN_VOTES) for i in range(25)]
    recs.append(mini_record("slip", models=models, votes={"Alice": "Charlie", "Bob": "Charlie", "Charlie": "Alice"}))
    c = landed(recs, only=["mart_exceptional_games"])
    got = rows(c, "select * from mart_exceptional_games where rule = 'rare_level1_failure'")
    assert [r["game_id"] for r in got] == ["slip"]
    assert got[0]["probability"] == pytest.approx(1 / 27)
    assert "0 of its other 25 chances" in got[0]["reason"]


def test_transcript_links_match_the_dashboards() -> None:
    from mafiabench.dashboards import transcript_path

    ids = ["plain-1", "index", "has space/and slash", "é", "x" * 200]
    c = landed([mini_record(i) for i in ids], only=["fct_games"])
    got = {r["game_id"]: r["transcript_path"] for r in rows(c, "select game_id, transcript_path from fct_games")}
    assert got == {i: transcript_path(i) for i in ids}


def test_patterns_are_rare_ranked_and_per_study() -> None:
    """A pattern in a third of a study's games flags none of them; the flagged games are ranked within their
    study, and only the top of each study is marked "read these first"."""
    models = {"mafioso": "M", "detective": "D", "villager": "V"}
    common = [mini_record(f"rev{i}", models=models, votes=MAFIA_WIN_VOTES, messages=[("Bob", "Alice is the mafioso!")],
                          design={"experiment": "big", "cell": "c", "game_index": i, "capabilities": [],
                                  "target": None, "background": None}) for i in range(10)]
    common += [mini_record(f"town{i}", models=models, votes=TOWN_WIN_VOTES,
                           design={"experiment": "big", "cell": "c", "game_index": 10 + i, "capabilities": [],
                                   "target": None, "background": None}) for i in range(20)]
    # The same cell name in another study: its one mafia win among town wins is an upset there, not here.
    other = cell_records("o", n=25, mafia_wins=1, models=models,
                         design={"experiment": "small", "cell": "c", "game_index": 0, "capabilities": [],
                                 "target": None, "background": None})
    c = landed(common + other, only=["mart_exceptional_games"])
    got = rows(c, "select game_id, study, rule, rank_in_study, read_first from mart_exceptional_games "
                  "order by study, rank_in_study")
    # 10 of 30 games in "big" have the pattern (33%): none is flagged; "big" has no upset (10 of 30 mafia wins).
    assert not [r for r in got if r["study"] == "big"]
    assert got == [{"game_id": "o-0", "study": "small", "rule": "upset", "rank_in_study": 1, "read_first": True}]
