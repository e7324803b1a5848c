"""Belief metrics on a hand-built classic game: deception score, strategic consistency (JSD), config table."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mafiabench.engine import Event
from mafiabench.record import GameRecord, PlayerRecord, Provenance
from test_marts_common import landed, one, rows

NAMES = ["Max", "Ann", "Ben", "Cat", "Dan", "Eve"]
ROLES = {name: "mafioso" if name == "Max" else "villager" for name in NAMES}
# Day 1 and day 2 vote beliefs of Ann and Ben (the others vote without storing beliefs in this test).
BELIEFS = {
    (1, "Ann"): {"Max": 0.5, "Ben": 0.5, "Cat": 0.0, "Dan": 0.0},
    (1, "Ben"): {"Max": 1.0, "Ann": 0.0, "Cat": 0.0, "Dan": 0.0},
    (2, "Ann"): {"Max": 1.0, "Ben": 0.0},
    (2, "Ben"): {"Max": 0.0, "Ann": 1.0},
}


def classic_record() -> GameRecord:
    events: list[Event] = []

    def emit(phase: str, rnd: int, type_: str, **kw: Any) -> None:
        events.append(Event(seq=len(events), phase=phase, round=rnd, type=type_, **kw))  # type: ignore[arg-type]

    def day(rnd: int, votes: dict[str, str], out: str) -> None:
        emit("day", rnd, "phase_start")
        for voter, target in votes.items():
            if (rnd, voter) in BELIEFS:
                emit("day", rnd, "belief", actor=voter, visibility=f"player:{voter}",
                     data={"action": "vote", "probability": BELIEFS[(rnd, voter)]})
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
        game_id="c1", variant="classic", seed=0,
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
    return landed([classic_record()])


def test_deception_score(con) -> None:
    r = one(con, "select * from mart_deception_scores")
    # 1 - P(Max) over (Ann, Ben) x (day 1, day 2), all before Max's game end: (0.5 + 0 + 0 + 1) / 4.
    assert (r["mafioso"], r["n_observations"], r["n_villagers"], r["n_days"]) == ("Max", 4, 2, 2)
    assert r["deception_score"] == pytest.approx(0.375) and r["won"]


def test_strategic_consistency_jsd(con) -> None:
    got = {r["player"]: r["mean_jsd"] for r in rows(con, "select * from mart_strategic_consistency")}
    assert got["Ann"] == pytest.approx(jsd(BELIEFS[(1, "Ann")], BELIEFS[(2, "Ann")]))
    assert got["Ann"] == pytest.approx(0.311278, abs=1e-6)
    assert got["Ben"] == pytest.approx(1.0)


def test_classic_configuration_table(con) -> None:
    r = one(con, "select * from mart_classic_configurations")
    assert (r["n_players"], r["n_mafia"], r["configuration"], r["n"], r["k"]) == (6, 1, "no_speaking", 1, 1)
    assert r["mean_deception_score"] == pytest.approx(0.375)
    ann = jsd(BELIEFS[(1, "Ann")], BELIEFS[(2, "Ann")])
    assert r["mean_consistency_jsd"] == pytest.approx((ann + 1.0) / 2)
