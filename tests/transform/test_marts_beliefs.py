"""Belief metrics on hand-built classic games: the deception score D_i as Strategema defines it (section 3.2: a mean
over villagers of each villager's mean over days of 1 - the probability it gave the mafioso, from the vote
distributions the appendix's prompts ask for), the P(mafia) extension's own D beside it, strategic consistency (JSD
of the vote distributions), and the configuration table, per study."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mafiabench.engine import Event
from mafiabench.record import GameRecord, PlayerRecord, Provenance
from support.records import landed, one, rows

NAMES = ["Max", "Ann", "Ben", "Cat", "Dan", "Eve"]
ROLES = {name: "mafioso" if name == "Max" else "villager" for name in NAMES}
# Day 1 and day 2 vote distributions of Ann and Ben (the others vote without storing beliefs in this test).
BELIEFS = {
    (1, "Ann"): {"Max": 0.5, "Ben": 0.5, "Cat": 0.0, "Dan": 0.0},
    (1, "Ben"): {"Max": 1.0, "Ann": 0.0, "Cat": 0.0, "Dan": 0.0},
    (2, "Ann"): {"Max": 1.0, "Ben": 0.0},
    (2, "Ben"): {"Max": 0.0, "Ann": 1.0},
}
# P(Max is mafia) beside them: Ann and Ben on both days, Cat on day 1 only (killed on night 2), and Max's own
# answer, which is no villager's and must not count.
P_MAFIA = {(1, "Ann"): 0.4, (2, "Ann"): 0.8, (1, "Ben"): 0.1, (2, "Ben"): 0.3, (1, "Cat"): 0.5, (1, "Max"): 0.0}


def classic_record(game_id: str = "c1", study: str = "s1", elicited: bool = True) -> GameRecord:
    events: list[Event] = []

    def emit(phase: str, rnd: int, type_: str, **kw: Any) -> None:
        events.append(Event(seq=len(events), phase=phase, round=rnd, type=type_, **kw))  # type: ignore[arg-type]

    def day(rnd: int, votes: dict[str, str], out: str) -> None:
        emit("day", rnd, "phase_start")
        for voter, target in votes.items():
            if (rnd, voter) in BELIEFS or (rnd, voter) in P_MAFIA:
                others = [n for n in votes if n != voter]
                data: dict[str, Any] = {
                    "action": "vote", "probability": BELIEFS.get((rnd, voter), {n: 1 / len(others) for n in others})}
                if elicited and (rnd, voter) in P_MAFIA:
                    data["mafia_probability"] = {n: P_MAFIA[(rnd, voter)] if n == "Max" else 0.2 for n in others}
                emit("day", rnd, "belief", actor=voter, visibility=f"player:{voter}", data=data)
            emit("day", rnd, "vote", actor=voter, target=target)
        emit("day", rnd, "elimination", target=out, data={"votes": {}, "role": ROLES[out]})

    emit("setup", 0, "game_start")
    emit("night", 1, "phase_start")
    emit("night", 1, "kill", actor="Max", target="Eve", visibility="team:mafia")
    emit("night", 1, "death", target="Eve")
    day(1, {"Max": "Dan", "Ann": "Dan", "Ben": "Max", "Cat": "Dan", "Dan": "Max"}, "Dan")
    emit("night", 2, "phase_start")
    emit("night", 2, "kill", actor="Max", target="Cat", visibility="team:mafia")
    emit("night", 2, "death", target="Cat")
    day(2, {"Max": "Ann", "Ann": "Max", "Ben": "Ann"}, "Ann")
    emit("end", 2, "game_end", data={"winner": "mafia"})
    return GameRecord(
        game_id=game_id, variant="classic", seed=0, design={"experiment": study, "cell": "n6-m1"},
        rules={"n_players": 6, "n_mafia": 1, "speaking": False, "sampling": "sample", "memory": "last_k",
               "decision": "belief"},
        players=[PlayerRecord(seat=i, name=n, role=ROLES[n], agent="fake/m", model="m") for i, n in enumerate(NAMES)],
        events=events, outcome={"status": "finished", "winner": "mafia", "tie_decided": False, "days": 2},
        provenance=Provenance(git_commit=None),
    )


def jsd(p: dict[str, float], q: dict[str, float]) -> float:
    keys = set(p) | set(q)
    m = {k: (p.get(k, 0) + q.get(k, 0)) / 2 for k in keys}
    kl = lambda a: sum(a.get(k, 0) * math.log2(a.get(k, 0) / m[k]) for k in keys if a.get(k, 0) > 0)  # noqa: E731
    return 0.5 * kl(p) + 0.5 * kl(q)


@pytest.fixture(scope="module")
def con():
    return landed([classic_record()],
                  only=["mart_deception_scores", "mart_strategic_consistency", "mart_classic_configurations"])


def test_deception_score_is_a_mean_over_villagers_of_their_means_over_days(con) -> None:
    r = one(con, "select * from mart_deception_scores")
    # From the vote distributions: Ann mean(1 - 0.5, 1 - 1.0) = 0.25; Ben mean(1 - 1.0, 1 - 0.0) = 0.5; Cat 1 - 1/4
    # (uniform over four, one day) = 0.75; D = mean(0.25, 0.5, 0.75) = 0.5 (one mean over the five pairs: 2.25 / 5).
    assert (r["study"], r["mafioso"], r["n_observations"], r["n_villagers"], r["n_days"]) == ("s1", "Max", 5, 3, 2)
    assert r["deception_score"] == pytest.approx(0.5) and r["won"]
    # The P(mafia) extension's own D: Ann mean(0.6, 0.2) = 0.4; Ben mean(0.9, 0.7) = 0.8; Cat 0.5; Max's own
    # answer is not counted.
    assert r["deception_score_mafia_probability"] == pytest.approx(1.7 / 3) and r["n_villagers_suspected"] == 3


def test_without_p_mafia_the_published_d_stands_alone() -> None:
    """A game whose prompt asked the vote distribution only (the appendix, classic/v4) has D_i, and no P(mafia) D."""
    con = landed([classic_record(elicited=False)], only=["mart_deception_scores", "mart_classic_configurations"])
    r = one(con, "select * from mart_deception_scores")
    assert r["deception_score"] == pytest.approx(0.5)
    assert r["deception_score_mafia_probability"] is None and r["n_villagers_suspected"] == 0
    assert one(con, "select mean_deception_score, n_mafiosos_scored from mart_classic_configurations") == {
        "mean_deception_score": pytest.approx(0.5), "n_mafiosos_scored": 1}


def test_strategic_consistency_jsd(con) -> None:
    got = {r["player"]: r["mean_jsd"] for r in rows(con, "select * from mart_strategic_consistency")}
    assert got["Ann"] == pytest.approx(jsd(BELIEFS[(1, "Ann")], BELIEFS[(2, "Ann")]))
    assert got["Ann"] == pytest.approx(0.311278, abs=1e-6)
    assert got["Ben"] == pytest.approx(1.0)


def test_classic_configuration_table(con) -> None:
    r = one(con, "select * from mart_classic_configurations")
    assert (r["study"], r["n_players"], r["n_mafia"], r["configuration"], r["n"], r["k"]) == (
        "s1", 6, 1, "no_speaking", 1, 1)
    assert r["mafia_ratio"] == pytest.approx(1 / 6) and r["model"] == "m" and not r["is_main"]
    assert r["mean_deception_score"] == pytest.approx(0.5)
    ann = jsd(BELIEFS[(1, "Ann")], BELIEFS[(2, "Ann")])
    assert r["mean_consistency_jsd"] == pytest.approx((ann + 1.0) / 2)


def test_two_studies_in_one_warehouse_are_never_pooled() -> None:
    con = landed([classic_record("a1", "first"), classic_record("a2", "first"), classic_record("b1", "second")],
                 only=["mart_deception_scores", "mart_classic_configurations"])
    got = rows(con, "select study, n, k from mart_classic_configurations order by study")
    assert got == [{"study": "first", "n": 2, "k": 2}, {"study": "second", "n": 1, "k": 1}]
    studies = rows(con, "select study, count(*) as n from mart_deception_scores group by study order by study")
    assert studies == [{"study": "first", "n": 2}, {"study": "second", "n": 1}]
