"""Exact analytic baselines: hand-computed values, and agreement with Monte Carlo through the real engine."""

from __future__ import annotations

import asyncio
import math
from fractions import Fraction

import pytest

from mafiabench.build.baselines import PROFILES, exact_baseline
from mafiabench.play.runner import GameSpec, play_game


def test_hand_computed_values() -> None:
    # Informed detective votes M; M and V vote uniformly. Profiles (M's vote, V's vote), each 1/4:
    # (D, M): M has 2 -> town; (D, D): D has 2 -> mafia; (V, M): M has 2 -> town; (V, D): 1-1-1 tie -> town 1/3.
    assert exact_baseline("day-informed").town_win == Fraction(1, 4) * (1 + 0 + 1 + Fraction(1, 3)) == Fraction(7, 12)
    assert exact_baseline("day-informed").town_win_after_tie == Fraction(1, 12)
    # M always votes D, so V's vote decides: M (town) or D (mafia).
    assert exact_baseline("day-mafioso-votes-detective").town_win == Fraction(1, 2)
    assert exact_baseline("day-all-random").town_win == Fraction(1, 3)
    # Night: D killed (1/3) -> all random among three: 1/3. D alive (2/3): finds M with 1/2 -> 7/12, else 1/3.
    expected = Fraction(1, 3) * Fraction(1, 3) + Fraction(2, 3) * (Fraction(7, 12) + Fraction(1, 3)) / 2
    assert exact_baseline("full-random-night").town_win == expected == Fraction(5, 12)


def test_unknown_profile() -> None:
    with pytest.raises(KeyError, match="unknown baseline profile"):
        exact_baseline("nope")


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_monte_carlo_through_the_engine_agrees(name: str) -> None:
    profile = PROFILES[name]
    n = 1500

    async def run() -> int:
        wins = 0
        for i in range(n):
            spec = GameSpec.build(f"mc-{i}", "mini-mafia", {"night": profile.night, "discussion_rounds": 0},
                                  10_000 + i, profile.agents())
            rec = await play_game(spec, clock=lambda: "t")
            wins += rec.winner == "town"
        return wins

    wins = asyncio.run(run())
    p = float(exact_baseline(profile).town_win)
    se = math.sqrt(p * (1 - p) / n)
    assert abs(wins / n - p) < 3.5 * se, (name, wins / n, p)
