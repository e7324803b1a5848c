"""An uncertainty never prints as zero when it is not: at a million games a win rate's Beta sd is about 0.05% and
its Wilson interval 0.2 points wide, which the pages' one-decimal percentages printed as "± 0.0%" (a rate known
exactly) and would print as [54.6%, 54.6%] a little further on. Hand-computed cases, the shared rate cells, and the
charts' tooltips."""

from __future__ import annotations

import math

import pytest

from mafiabench.dashboards import charts
from mafiabench.dashboards.html import environment, fmt_interval, fmt_range, fmt_spread


@pytest.mark.parametrize(("value", "kwargs", "text"), [
    (0.012, {}, "1.2%"),  # as pct prints it
    (0.0004978, {}, "0.050%"),  # the Beta sd of 546,400 wins in 1,000,000: two significant digits
    (0.0005, {}, "0.1%"),  # 0.05 rounds up: not zero
    (0.00049, {}, "0.049%"),
    (0.00012, {}, "0.012%"),
    (0.0, {}, "0.0%"),  # a zero stays zero
    (None, {}, "–"),
    (math.nan, {}, "–"),
    (0.0004, {"digits": 2, "pct": False}, "0.00040"),
    (0.25, {"digits": 2, "pct": False}, "0.25"),
    (0.0123, {"pct": False}, "0.012"),  # fixed's three decimals
])
def test_a_spread_keeps_two_significant_digits_below_the_last(value: float | None, kwargs: dict, text: str) -> None:
    assert fmt_spread(value, **kwargs) == text


@pytest.mark.parametrize(("lo", "hi", "pct", "text"), [
    (0.5455, 0.5474, True, "[54.5%, 54.7%]"),
    (0.54601, 0.54649, True, "[54.60%, 54.65%]"),  # 0.05 points apart: one more digit
    (0.546001, 0.546004, True, "[54.6001%, 54.6004%]"),
    (0.5, 0.5, True, "[50.0%, 50.0%]"),  # equal bounds stay equal
    (0.1, 0.1004, False, "[0.1000, 0.1004]"),
    (None, 0.5, True, "–"),
])
def test_an_interval_prints_bounds_that_differ_apart(lo: float | None, hi: float, pct: bool, text: str) -> None:
    assert fmt_interval(lo, hi, pct) == text


@pytest.mark.parametrize(("lo", "hi", "text"), [
    (-0.4, 0.81, "-0.40 to 0.81"),
    (0.4123, 0.4149, "0.412 to 0.415"),  # a rating's interval at a million games: one more digit
    (None, None, "–"),  # no rating there (mart_ratings: no games, or alone)
])
def test_a_rating_interval_prints_bounds_that_differ_apart(lo: float | None, hi: float | None, text: str) -> None:
    assert fmt_range(lo, hi) == text


def test_the_rate_cells_of_a_million_games() -> None:
    """546,400 mafia wins of 1,000,000 (the overview of bench_landing's million): Beta(1 + k, 1 + n - k) sd
    0.0498%, Wilson [54.54%, 54.74%]; the tie-break count with its thousands."""
    k, n = 546_400, 1_000_000
    a, b = 1 + k, 1 + n - k
    row = {"k": k, "n": n, "k_tie": 164_450, "laplace_mean": a / (a + b),
           "beta_sd": math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))), "wilson_low": 0.54542, "wilson_high": 0.54737}
    html = environment().from_string('{% import "macros.html.j2" as m %}{{ m.rate_cells(r) }}').render(r=row)
    assert "54.6% ± 0.050%" in html and "[54.5%, 54.7%]" in html and "164,450" in html
    assert "± 0.0%" not in html


def test_the_rate_tooltips_give_an_sd_two_significant_digits() -> None:
    formats = {d["title"]: d.get("format") for d in (t.to_dict() for t in charts._rate_tooltip("cell", "cell"))}
    assert formats["Beta posterior sd"] == ".2p" and formats["games"] == ","
