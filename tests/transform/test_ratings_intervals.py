"""Intervals that hold when the model is wrong: the dispersion over line-ups and the robust covariance, hand-computed
on a fit with one parameter, and chosen only when the line-ups scatter more than the model says."""

from __future__ import annotations

import pytest
from scipy import optimize, special

from mafiabench.transform.models.ratings import SIDE_PRIOR_SD, fit, line_ups


def _one_parameter(wins: tuple[int, int], games: tuple[int, int]) -> list:
    """A always mafia, B always town, in two line-ups that differ (one town seat or two) but carry the same team
    means: the fit has h alone (each side's only model has no free strength)."""
    out = []
    for town, w, n in ((["B"], wins[0], games[0]), (["B", "B"], wins[1], games[1])):
        out += [(["A"], town, True)] * w + [(["A"], town, False)] * (n - w)
    return out


@pytest.mark.parametrize(("wins", "over"), [((20, 20), False), ((35, 5), True)])
def test_dispersion_and_robust_variance_by_hand(wins: tuple[int, int], over: bool) -> None:
    """h solves sum(w) - N expit(h) - h / sd^2 = 0; the Pearson chi-square is sum (w_i - n_i p)^2 / (n_i p (1 - p))
    on df = 2 line-ups - 1 parameter; the model variance is 1 / (N p (1 - p) + 1 / sd^2) = v; the robust variance
    is the larger of phi v and v + v^2 (sum (w_i - n_i p)^2 - N p (1 - p)), phi = chi2 / df, shown when phi > 1."""
    games = (40, 40)
    n = sum(games)
    h = optimize.brentq(lambda h: sum(wins) - n * special.expit(h) - h / SIDE_PRIOR_SD**2, -5, 5)
    p = special.expit(h)
    chi2 = sum((w - g * p) ** 2 / (g * p * (1 - p)) for w, g in zip(wins, games, strict=True))
    v = 1 / (n * p * (1 - p) + 1 / SIDE_PRIOR_SD**2)
    meat = sum((w - g * p) ** 2 for w, g in zip(wins, games, strict=True))
    robust = max(max(chi2, 1.0) * v, v + v**2 * (meat - n * p * (1 - p)), v)
    post = fit(line_ups(_one_parameter(wins, games)), kind="sides")
    assert [b.basis.shape[1] for b in post.blocks] == [0, 0]
    assert post.theta[0] == pytest.approx(h, abs=1e-8)
    assert (post.df, post.chi2) == (1, pytest.approx(chi2, rel=1e-7))
    assert post.cov[0, 0] == pytest.approx(v, rel=1e-7)
    assert post.cov_robust[0, 0] == pytest.approx(robust, rel=1e-7)
    assert post.interval == ("robust" if over else "model")
    assert (chi2 > 1) == over


def test_no_dispersion_without_degrees_of_freedom() -> None:
    """As many parameters as line-ups: nothing is left to measure scatter with, so the model's interval is shown."""
    games = [(["A"], ["B"], True)] * 30 + [(["A"], ["B"], False)] * 10
    games += [(["B"], ["A"], True)] * 10 + [(["B"], ["A"], False)] * 30
    post = fit(line_ups(games), kind="overall")
    assert post.df == 0 and post.dispersion is None and post.interval == "model"
