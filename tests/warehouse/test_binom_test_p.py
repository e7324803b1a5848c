"""The listing-order check's binomial test (`warehouse.listing_leaks.binom_test_p`): the two-sided exact test, the
sum of the probabilities of the outcomes no more probable than the one seen, checked against that definition
enumerated exactly (fractions) on small cases and at the edges of the support, and against a case computed by hand."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest

from mafiabench.warehouse.listing_leaks import binom_test_p


def _exact(k: int, n: int, p: Fraction) -> Fraction:
    pmf = [comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
    return min(Fraction(1), sum(q for q in pmf if q <= pmf[k]))


CASES = [(k, n, p) for n in (1, 5, 12, 20, 37) for p in (Fraction(1, 4), Fraction(1, 3), Fraction(1, 2))
         for k in sorted({0, 1, n // 4, n // 3, n // 2, n - 1, n})]


@pytest.mark.parametrize(("k", "n", "p"), CASES)
def test_the_p_value_sums_the_outcomes_no_more_probable(k: int, n: int, p: Fraction) -> None:
    assert binom_test_p(k, n, float(p)) == pytest.approx(float(_exact(k, n, p)), rel=1e-9, abs=1e-300)


def test_by_hand() -> None:
    # 0 mafia first in 4 games at 1/4: P(0) = 81/256; only P(1) = 108/256 is more probable, so p = 1 - 108/256.
    assert binom_test_p(0, 4, 0.25) == pytest.approx(148 / 256, rel=1e-12)


def test_at_a_million_games() -> None:
    # 252,200 of 1,000,000 at 1/4 is 5.08 sd above the mean: both tails, about 3.8e-7.
    assert binom_test_p(252_200, 1_000_000, 0.25) == pytest.approx(3.8e-7, rel=0.05)
