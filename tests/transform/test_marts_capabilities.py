"""Capability marts: the homogeneous-cell invariant, design inference, a hand-checked z-score example."""

from __future__ import annotations

import math

import pytest

from support.records import cell_records, design, landed, one, rows


def beta_sd(k: int, n: int) -> float:
    return math.sqrt((k + 1) * (n - k + 1) / ((n + 2) ** 2 * (n + 3)))


def test_homogeneous_games_count_once_per_game_and_once_per_capability() -> None:
    recs = cell_records("h", n=9, mafia_wins=4, models="X", design=design("X/X", None, "X", "X"))
    c = landed(recs, only=["mart_capability_win_rates", "mart_win_rates"])
    caps = rows(c, "select capability, n, k, laplace_mean from mart_capability_win_rates order by capability")
    got = [(r["capability"], r["n"], r["k"]) for r in caps]
    assert got == [("deceive", 9, 4), ("detect", 9, 5), ("disclose", 9, 5)]
    dec, det, dis = (r["laplace_mean"] for r in caps)
    assert dec + det == pytest.approx(1.0) and det == pytest.approx(dis)
    # Game-level marts count each game once.
    assert one(c, "select n from mart_win_rates where dimension = 'all'")["n"] == 9
    assert one(c, "select count(*) as n from fct_games")["n"] == 9
    assert one(c, "select count(*) as n from int_capability_games")["n"] == 27


def test_homogeneous_games_get_all_three_capabilities_even_if_the_design_names_one() -> None:
    recs = cell_records("h", n=3, mafia_wins=1, models="X", design=design("X/X", "deceive", "X", "X"))
    c = landed(recs, only=["int_capability_games"])
    assert one(c, "select count(distinct capability) as n from int_capability_games")["n"] == 3


def test_capability_is_inferred_for_imported_games_without_design() -> None:
    recs = (
        cell_records("dec", n=2, mafia_wins=1, models={"mafioso": "T", "detective": "B", "villager": "B"})
        + cell_records("det", n=2, mafia_wins=1, models={"mafioso": "B", "detective": "B", "villager": "T"})
        + cell_records("dis", n=2, mafia_wins=1, models={"mafioso": "B", "detective": "T", "villager": "B"})
        + cell_records("mix", n=2, mafia_wins=1, models={"mafioso": "P", "detective": "Q", "villager": "R"})
    )
    c = landed(recs, only=["mart_capability_win_rates"])
    got = rows(c, "select capability, target_model, background, target_role, n "
                  "from mart_capability_win_rates order by 1")
    assert [(r["capability"], r["target_model"], r["background"], r["target_role"], r["n"]) for r in got] == [
        ("deceive", "T", "B", "mafioso", 2),
        ("detect", "T", "B", "villager", 2),
        ("disclose", "T", "B", "detective", 2),
    ]


# Hand-checked bottom-up scores. Deceive, two backgrounds X and Y, three targets, 4 games per cell:
#   X: A 3/4 -> 4/6, B 1/4 -> 2/6, C 2/4 -> 3/6: mean 1/2, sample sd 1/6, z = (+1, -1, 0)
#   Y: A 4/4 -> 5/6, B 2/4 -> 3/6, C 0/4 -> 1/6: mean 1/2, sample sd 1/3, z = (+1, 0, -1)
# mean z: A 1, B -1/2, C -1/2; score = exp(mean z); sd(mean z) = sqrt(sum (beta_sd/sd_b)^2) / 2.
WINS = {("X", "A"): 3, ("X", "B"): 1, ("X", "C"): 2, ("Y", "A"): 4, ("Y", "B"): 2, ("Y", "C"): 0}


@pytest.fixture(scope="module")
def scored():
    recs = []
    for (bg, target), k in WINS.items():
        models = {"mafioso": target, "detective": bg, "villager": bg}
        recs += cell_records(f"{bg}{target}", n=4, mafia_wins=k, models=models,
                             design=design(f"{target}|{bg}", "deceive", target, bg))
    return landed(recs, only=["mart_capability_scores", "mart_capability_win_rates"])


def test_z_scores_by_hand(scored) -> None:
    got = {r["target_model"]: r for r in rows(scored, "select * from mart_capability_scores")}
    assert got["A"]["mean_z"] == pytest.approx(1.0)
    assert got["B"]["mean_z"] == pytest.approx(-0.5)
    assert got["C"]["mean_z"] == pytest.approx(-0.5)
    assert got["A"]["score"] == pytest.approx(math.e)
    sd_a = math.sqrt((beta_sd(3, 4) / (1 / 6)) ** 2 + (beta_sd(4, 4) / (1 / 3)) ** 2) / 2
    assert got["A"]["mean_z_sd"] == pytest.approx(sd_a)
    assert got["A"]["score_sd"] == pytest.approx(math.e * sd_a)
    assert got["A"]["n_backgrounds"] == 2 and got["A"]["n_games"] == 8
    assert got["A"]["score_low"] == pytest.approx(math.exp(1 - 1.959963984540054 * sd_a))


def test_capability_win_rates_cells(scored) -> None:
    r = one(scored, "select * from mart_capability_win_rates where background = 'X' and target_model = 'A'")
    assert (r["capability"], r["n"], r["k"], r["laplace_mean"]) == ("deceive", 4, 3, pytest.approx(4 / 6))
    assert r["beta_sd"] == pytest.approx(beta_sd(3, 4))


def test_explicit_cells_of_a_designed_experiment_measure_no_capability() -> None:
    # A [[cells]] baseline of an experiment (design block with no capabilities) is not a capability cell, even
    # when one policy plays every role.
    explicit = {"experiment": "exp", "cell": "baseline", "capabilities": [], "target": None, "background": None}
    recs = cell_records("b", n=3, mafia_wins=1, models="policy/random", design=explicit)
    recs += cell_records("p", n=3, mafia_wins=1, models={"mafioso": "policy/random", "detective": "policy/informed",
                                                          "villager": "policy/random"}, design=explicit)
    c = landed(recs, only=["int_capability_games", "mart_win_rates"])
    assert rows(c, "select * from int_capability_games") == []
    assert one(c, "select n from mart_win_rates where dimension = 'cell' and value = 'baseline'")["n"] == 6
