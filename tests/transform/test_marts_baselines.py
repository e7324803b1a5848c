"""mart_baselines carries the exact analytic baselines (fractions kept exact as text)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from mafiabench.transform.models.baselines import baseline_table
from support.records import landed, rows


def test_baselines_mart_matches_the_library() -> None:
    c = landed([], only=["mart_baselines"])
    got = {r["case"]: r for r in rows(c, "select * from mart_baselines")}
    expected = baseline_table()
    assert set(got) == {b["profile"] for b in expected}
    for b in expected:
        r = got[b["profile"]]
        assert Fraction(r["town_win_fraction"]) == Fraction(b["town_win_fraction"])
        assert r["town_win_probability"] + r["mafia_win_probability"] == pytest.approx(1.0)
        assert Fraction(r["mafia_win_fraction"]) == 1 - Fraction(r["town_win_fraction"])
