"""The top-down latent model: a tiny fit whose answer can be worked out by hand, and its CV Brier gain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from mafiabench.transform.models.calibration import coverage, published_like
from mafiabench.transform.models.latent import DEFAULT_RIDGE, PRIOR_SD_AB, cross_validated_brier, fit_latent
from support.records import cell_records, landed, one, rows


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_single_cell_fit_matches_the_observed_rate() -> None:
    # One cell, 75 of 100 mafia wins. Constraints a + b = 0 and log c = 0 leave x = a - b with a = -b = x/2; the
    # priors N(0, s^2) on a and b add x^2 / (4 s^2) to -loglik, so x solves n sigma(x) - w + x / (2 s^2) = 0 (a
    # hair short of logit(0.75)), and sd(x) = 1 / sqrt(n p q + 1 / (2 s^2)), sd(a) = sd(x) / 2.
    y = np.array([1] * 75 + [0] * 25)
    fit = fit_latent(["i"] * 100, ["j"] * 100, ["k"] * 100, y)
    prec = 1 / PRIOR_SD_AB**2 + DEFAULT_RIDGE
    x = optimize.brentq(lambda t: 100 / (1 + math.exp(-t)) - 75 + prec * t / 2, 0, 3)
    assert logit(0.75) - 0.02 < x < logit(0.75)
    assert fit.converged
    assert fit.a[0] == pytest.approx(x / 2, abs=1e-4)
    assert fit.b[0] == pytest.approx(-x / 2, abs=1e-4)
    assert fit.c[0] == pytest.approx(1.0)
    p = 1 / (1 + math.exp(-x))
    assert fit.se()[0] == pytest.approx(0.5 / math.sqrt(100 * p * (1 - p) + prec / 2), rel=1e-2)
    assert fit.predict(["i"], ["j"], ["k"])[0] == pytest.approx(p, abs=1e-4)
    assert fit.identified().all()


def test_two_mafiosos_rank_and_respect_the_constraint() -> None:
    # Mafioso A wins 80%, B 50% against the same detective and villager: a_A - b = logit(.8), a_B - b = 0 (up to
    # the priors' pull, about 1% with 100 games a cell).
    m = ["A"] * 100 + ["B"] * 100
    y = np.array([1] * 80 + [0] * 20 + [1] * 50 + [0] * 50)
    fit = fit_latent(m, ["j"] * 200, ["k"] * 200, y)
    a = dict(zip(fit.mafiosos, fit.a, strict=True))
    assert a["A"] - fit.b[0] == pytest.approx(logit(0.8), abs=0.03)
    assert a["B"] - fit.b[0] == pytest.approx(0.0, abs=0.03)
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
    c = landed(recs, only=["mart_latent_fit", "mart_latent_abilities"])
    fit = one(c, "select * from mart_latent_fit")
    assert fit["n_games"] == 40 and fit["n_cells"] == 2 and fit["converged"] and fit["cv_folds"] == 5
    assert fit["brier_gain"] > 0
    ab = {(r["ability"], r["model"]): r for r in rows(c, "select * from mart_latent_abilities")}
    assert set(ab) == {("deceive", "A"), ("deceive", "B"), ("disclose", "D"), ("detect", "V")}
    assert ab[("deceive", "A")]["estimate"] > ab[("deceive", "B")]["estimate"]
    assert ab[("deceive", "A")]["ci_low"] < ab[("deceive", "A")]["estimate"] < ab[("deceive", "A")]["ci_high"]
    assert ab[("detect", "V")]["estimate"] == pytest.approx(1.0)
    assert ab[("deceive", "A")]["n_games"] == 20


def test_the_calibration_misfit_spreads_the_cells_beyond_the_binomial() -> None:
    """`published_like(..., misfit)`: every ability 0, so each cell's true rate is 1/2 without misfit; with a line-up
    effect of sd 2 on the logit the cells' win rates spread far wider than 400 binomial games allow (sd 0.025), and
    with misfit 0 they do not, the same draws of the generator otherwise."""
    zeros = np.zeros(4)

    def cell_rates(misfit: float) -> np.ndarray:
        *_, y = published_like(np.random.default_rng(5), 4, 2, 400, zeros, zeros, zeros, misfit)
        return y.reshape(-1, 400).mean(axis=1)

    assert cell_rates(0.0).std() < 0.04
    assert cell_rates(2.0).std() > 0.15


def test_intervals_cover_the_truth_on_published_like_designs() -> None:
    """Calibration: on a small design shaped like the published one (5 models, 2 backgrounds, 100 games a cell),
    the 95% intervals hold the true parameters about 95% of the time (15 parameters x 60 replicates). The full
    published-size figures are in BENCHMARKS.md (benchmarks/bench_latent_coverage.py)."""
    r = coverage(models=5, backgrounds=2, games=100, reps=60, seed=3)
    assert 0.91 <= r["coverage"] <= 0.985, r
    assert r["coverage_min"] >= 0.8, r
    assert r["max_se"] < 0.8 and r["not_identified"] == 0.0, r


def test_a_model_that_won_every_game_is_not_identified_and_does_not_blur_the_others() -> None:
    # Mafioso A won all its 50 games, B lost all its 50, C won 60 of 100, against the same detective and villager.
    # The likelihood bounds A and B on one side only: they are flagged, and their estimates are the priors'. C and
    # the detective stay placed: with the old near-flat ridge A and B ran to +-15 and, through the constraint
    # sum(a) + sum(b) = 0, gave C and the detective standard errors near 90.
    m = ["A"] * 50 + ["B"] * 50 + ["C"] * 100
    y = np.array([1] * 50 + [0] * 50 + [1] * 60 + [0] * 40)
    fit = fit_latent(m, ["j"] * 200, ["k"] * 200, y)
    assert fit.mafiosos == ["A", "B", "C"]
    assert list(fit.identified()) == [False, False, True, True, True]
    se = fit.se()
    assert se[2] < 0.6 and se[3] < 0.6
    assert fit.a[2] - fit.b[0] == pytest.approx(logit(0.6), abs=0.02)
    assert 2 < fit.a[0] - fit.b[0] < 3 * PRIOR_SD_AB  # held by the prior, not infinite


def test_the_mart_says_which_parameters_are_not_identified() -> None:
    recs = cell_records("a", n=20, mafia_wins=20, models={"mafioso": "A", "detective": "D", "villager": "V"})
    recs += cell_records("b", n=20, mafia_wins=8, models={"mafioso": "B", "detective": "D", "villager": "V"})
    c = landed(recs, only=["mart_latent_fit", "mart_latent_abilities"])
    ab = {(r["ability"], r["model"]): r for r in rows(c, "select * from mart_latent_abilities")}
    a = ab[("deceive", "A")]
    assert a["identified"] is False and a["ci_low"] is None and a["ci_high"] is None
    assert a["note"].startswith("not identified: every one of its 20 games as mafioso ended the same way")
    b = ab[("deceive", "B")]
    assert b["identified"] is True and b["note"] is None and b["ci_low"] < b["estimate"] < b["ci_high"]
    fit = one(c, "select * from mart_latent_fit")
    assert fit["n_not_identified"] >= 1


def _brier_from_names(m: list[str], d: list[str], v: list[str], y: np.ndarray, folds: int = 5) -> tuple[float, float]:
    """The cross-validation written from the names: each fold fitted by `fit_latent` and predicted by `predict`."""
    n = len(y)
    fold_of = np.empty(n, dtype=np.int64)
    fold_of[np.random.default_rng(0).permutation(n)] = np.arange(n) % folds
    model_sq = const_sq = 0.0
    for f in range(folds):
        test = fold_of == f
        train = ~test
        pick = lambda xs, mask: [x for x, keep in zip(xs, mask, strict=True) if keep]  # noqa: E731
        fit = fit_latent(pick(m, train), pick(d, train), pick(v, train), y[train])
        pred = fit.predict(pick(m, test), pick(d, test), pick(v, test))
        model_sq += float(np.sum((pred - y[test]) ** 2))
        const_sq += float(np.sum((y[train].mean() - y[test]) ** 2))
    return model_sq / n, const_sq / n


@pytest.mark.parametrize("seed", range(8))
def test_cross_validation_on_codes_is_the_cross_validation_on_names(seed: int) -> None:
    """The folds are fitted and predicted on integer codes coded once; the figures are those of fitting each fold
    from its names, to the last bit, models seen in one fold only (unseen when it is held out) included."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    pool = [f"model-{i}" for i in range(int(rng.integers(1, 6)))]
    m, d, v = ([str(x) for x in rng.choice(pool, n)] for _ in range(3))
    m[0], d[1], v[2] = "rare-mafioso", "rare-detective", "rare-villager"
    y = (rng.random(n) < 0.4).astype(float)
    assert cross_validated_brier(m, d, v, y) == _brier_from_names(m, d, v, y)


# -- the reference's model, sampled (NUTS) ----------------------------------------------------------------------


def nuts_build(recs: list, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MAFIABENCH_LATENT_METHOD", "nuts")
    return landed(recs, only=["mart_latent_fit", "mart_latent_abilities"])


def test_the_mart_holds_the_sampled_model_normalised_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two mafiosos (A wins 30 of 40, B 10 of 40) against one detective and one villager: m_A > m_B, mean(m) = 0
    and mean(v) = 1 exactly (the normalisation), every parameter with its R-hat and ESS; the fit converged.
    (The published design's figures against the study's are in test_mini_mafia_published.py.)"""
    recs = cell_records("a", n=40, mafia_wins=30, models={"mafioso": "A", "detective": "D", "villager": "V"})
    recs += cell_records("b", n=40, mafia_wins=10, models={"mafioso": "B", "detective": "D", "villager": "V"})
    c = nuts_build(recs, monkeypatch)
    fit = one(c, "select * from mart_latent_fit")
    assert (fit["method"], fit["chains"], fit["draws"], fit["n_cells"]) == ("nuts", 4, 1000, 2)
    assert fit["converged"] and fit["max_r_hat"] <= 1.01 and fit["min_ess"] >= 400 and fit["iterations"] is None
    ab = {(r["ability"], r["model"]): r for r in rows(c, "select * from mart_latent_abilities")}
    assert set(ab) == {("deceive", "A"), ("deceive", "B"), ("disclose", "D"), ("detect", "V")}
    assert {r["parameter"] for r in ab.values()} == {"m", "d", "v"}
    m_a, m_b = ab[("deceive", "A")], ab[("deceive", "B")]
    assert m_a["estimate"] == pytest.approx(-m_b["estimate"], abs=1e-9) and m_a["estimate"] > 0.3
    assert ab[("detect", "V")]["estimate"] == pytest.approx(1.0, abs=1e-12)
    # The mafia won 40 of 80 against D: the average mafioso (m = 0) meets D at even odds, so d is near 0.
    assert abs(ab[("disclose", "D")]["estimate"]) < 0.2
    for r in ab.values():
        assert r["method"] == "nuts" and r["converged"] and r["note"] is None
        assert r["r_hat"] < 1.01 and r["ess"] >= 400 and r["ci_low"] < r["estimate"] < r["ci_high"]


def test_sampling_that_did_not_converge_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injected: 15 draws a chain after 15 of warm-up cannot give an ESS of 400: the fit and every row say
    so, with the figures."""
    from mafiabench.transform.models import latent

    monkeypatch.setattr(latent, "WARMUP", 15)
    monkeypatch.setattr(latent, "DRAWS", 15)
    recs = cell_records("a", n=30, mafia_wins=20, models={"mafioso": "A", "detective": "D", "villager": "V"})
    recs += cell_records("b", n=30, mafia_wins=12, models={"mafioso": "B", "detective": "D", "villager": "V"})
    c = nuts_build(recs, monkeypatch)
    fit = one(c, "select * from mart_latent_fit")
    assert fit["converged"] is False and fit["draws"] == 15 and fit["min_ess"] < 400
    for r in rows(c, "select * from mart_latent_abilities"):
        assert r["converged"] is False and r["ess"] < 400
        assert "sampling did not converge: R-hat" in r["note"] and "(at least 400)" in r["note"]
