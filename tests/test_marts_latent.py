"""The top-down latent model: a tiny fit whose answer can be worked out by hand, and its CV Brier gain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mafiabench.build.python_models import cross_validated_brier, fit_latent
from test_marts_common import cell_records, landed, one, rows


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_single_cell_fit_matches_the_observed_rate() -> None:
    # One cell, 75 of 100 mafia wins. Constraints a + b = 0 and log c = 0 leave a - b = logit(0.75): a = -b = x/2,
    # and the Laplace sd of x is 1/sqrt(n p q), so sd(a) = half of it.
    y = np.array([1] * 75 + [0] * 25)
    fit = fit_latent(["i"] * 100, ["j"] * 100, ["k"] * 100, y)
    assert fit.converged
    assert fit.a[0] == pytest.approx(logit(0.75) / 2, abs=1e-3)
    assert fit.b[0] == pytest.approx(-logit(0.75) / 2, abs=1e-3)
    assert fit.c[0] == pytest.approx(1.0)
    assert fit.se()[0] == pytest.approx(0.5 / math.sqrt(100 * 0.75 * 0.25), rel=1e-2)
    assert fit.predict(["i"], ["j"], ["k"])[0] == pytest.approx(0.75, abs=1e-3)


def test_two_mafiosos_rank_and_respect_the_constraint() -> None:
    # Mafioso A wins 80%, B 50% against the same detective and villager: a_A - b = logit(.8), a_B - b = 0.
    m = ["A"] * 100 + ["B"] * 100
    y = np.array([1] * 80 + [0] * 20 + [1] * 50 + [0] * 50)
    fit = fit_latent(m, ["j"] * 200, ["k"] * 200, y)
    a = dict(zip(fit.mafiosos, fit.a, strict=True))
    assert a["A"] - fit.b[0] == pytest.approx(logit(0.8), abs=2e-3)
    assert a["B"] - fit.b[0] == pytest.approx(0.0, abs=2e-3)
    assert a["A"] + a["B"] + fit.b[0] == pytest.approx(0.0, abs=1e-9)


def test_villager_scale_is_identified_by_its_geometric_mean() -> None:
    # Villager K1 makes the game decisive (c large), K2 a coin flip (c small); geometric mean of c is 1.
    rng = np.random.default_rng(1)
    m, d, v, y = [], [], [], []
    for mafioso, det, base in (("A", "J", 1.0), ("B", "J", -1.0)):
        for villager, scale in (("K1", 2.0), ("K2", 0.5)):
            p = 1 / (1 + math.exp(-scale * base))
            for _ in range(400):
                m.append(mafioso), d.append(det), v.append(villager), y.append(rng.random() < p)
    fit = fit_latent(m, d, v, np.array(y))
    c = dict(zip(fit.villagers, fit.c, strict=True))
    assert c["K1"] > 1 > c["K2"]
    assert c["K1"] * c["K2"] == pytest.approx(1.0)


def test_cross_validated_brier_gain_positive_with_structure_and_not_without() -> None:
    rng = np.random.default_rng(0)
    m = ["A"] * 300 + ["B"] * 300
    y = np.r_[rng.random(300) < 0.9, rng.random(300) < 0.1]
    model, const = cross_validated_brier(m, ["j"] * 600, ["k"] * 600, y)
    assert const - model > 0.1
    y0 = rng.random(600) < 0.5
    model0, const0 = cross_validated_brier(m, ["j"] * 600, ["k"] * 600, y0)
    assert abs(const0 - model0) < 0.01


def test_latent_marts_are_built_from_games() -> None:
    recs = cell_records("a", n=20, mafia_wins=15, models={"mafioso": "A", "detective": "D", "villager": "V"})
    recs += cell_records("b", n=20, mafia_wins=5, models={"mafioso": "B", "detective": "D", "villager": "V"})
    c = landed(recs)
    fit = one(c, "select * from mart_latent_fit")
    assert fit["n_games"] == 40 and fit["n_cells"] == 2 and fit["converged"] and fit["cv_folds"] == 5
    assert fit["brier_gain"] > 0
    ab = {(r["ability"], r["model"]): r for r in rows(c, "select * from mart_latent_abilities")}
    assert set(ab) == {("deceive", "A"), ("deceive", "B"), ("disclose", "D"), ("detect", "V")}
    assert ab[("deceive", "A")]["estimate"] > ab[("deceive", "B")]["estimate"]
    assert ab[("deceive", "A")]["ci_low"] < ab[("deceive", "A")]["estimate"] < ab[("deceive", "A")]["ci_high"]
    assert ab[("detect", "V")]["estimate"] == pytest.approx(1.0)
    assert ab[("deceive", "A")]["n_games"] == 20
