"""Exact analytic baselines: hand-computed values, and agreement with Monte Carlo through the real engine."""

from __future__ import annotations

import asyncio
import math
from fractions import Fraction

import pytest

from mafiabench.cli import main
from mafiabench.play.runner import GameSpec, play_game
from mafiabench.transform.models.baselines import PROFILES, Profile, exact_baseline, profile_of


def test_hand_computed_values() -> None:
    # Informed detective votes M; M and V vote uniformly. Profiles (M's vote, V's vote), each 1/4:
    # (D, M): M has 2 -> town; (D, D): D has 2 -> mafia; (V, M): M has 2 -> town; (V, D): 1-1-1 tie -> town 1/3.
    # The paper: mafia 5/12.
    assert exact_baseline("day-informed").town_win == Fraction(1, 4) * (1 + 0 + 1 + Fraction(1, 3)) == Fraction(7, 12)
    assert exact_baseline("day-informed").mafia_win == Fraction(5, 12)
    assert exact_baseline("day-informed").town_win_after_tie == Fraction(1, 12)
    # M always votes D, so V's vote decides: M (town) or D (mafia).
    assert exact_baseline("day-mafioso-votes-detective").town_win == Fraction(1, 2)
    # D votes M, M votes V, V votes M (town, 2-1) or D (1-1-1 tie, town 1/3): 1/2 + 1/2 * 1/3. The paper: town 2/3.
    assert exact_baseline("day-mafioso-votes-villager").town_win == Fraction(1, 2) + Fraction(1, 6) == Fraction(2, 3)
    assert exact_baseline("day-mafioso-votes-villager").town_win_after_tie == Fraction(1, 6)
    # Three random voters: M gets both others' votes (1/4) -> town; a 1-1-1 cycle (2 of 8) -> town 1/3.
    assert exact_baseline("day-all-random").town_win == Fraction(1, 4) + Fraction(1, 4) * Fraction(1, 3)
    # Random night: D killed (1/3) -> three random voters: 1/3. D alive (2/3): it investigates M (found) or the
    # surviving villager (innocent, so the one left is M): it knows M either way -> 7/12. The paper: town 1/2.
    expected = Fraction(1, 3) * Fraction(1, 3) + Fraction(2, 3) * Fraction(7, 12)
    assert exact_baseline("full-random-night").town_win == expected == Fraction(1, 2)
    # Any combination: the same night with a random detective is three random voters whatever happened: 1/3.
    assert exact_baseline(profile_of(night="agents", detective="random")).town_win == Fraction(1, 3)


def test_the_paper_fractions_from_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", "day-informed"]) == 0
    assert "mafia wins 5/12" in capsys.readouterr().out
    assert main(["baseline", "--detective", "informed", "--mafioso", "votes-villager", "--villager", "random"]) == 0
    assert "town wins 2/3 " in capsys.readouterr().out
    assert main(["baseline", "--night", "agents"]) == 0
    assert "town wins 1/2 " in capsys.readouterr().out
    assert main(["baseline", "full-random-night", "--night", "agents"]) == 2
    assert "not both" in capsys.readouterr().err


def test_informed_detective_uses_elimination() -> None:
    """With three players alive, an "innocent" result names the mafioso: the informed policy votes it."""
    from mafiabench.agents.agent import PlayerView
    from mafiabench.agents.policies import PolicyAgent
    from mafiabench.engine.core import Decision
    from mafiabench.engine.events import Event
    from mafiabench.engine.mini_mafia import MiniMafiaRules

    seen = (Event(seq=0, phase="night", round=1, type="investigate", actor="Ann", target="Bo",
                  visibility="player:Ann", data={"result": "villager"}),)
    view = PlayerView("Ann", "detective", "town", "mini-mafia", MiniMafiaRules(), ("Ann", "Bo", "Cy", "Di"), seen)
    agent = PolicyAgent("policy/informed", 1, "Ann")
    for seed in range(20):
        agent.rng.seed(seed)
        assert agent.decide(Decision("Ann", "vote", "day", 1, ("Bo", "Cy")), view).target == "Cy"


def test_unknown_profile() -> None:
    with pytest.raises(KeyError, match="unknown baseline profile"):
        exact_baseline("nope")


COMBINATIONS = [profile_of(night="agents", detective="random"),
                profile_of(night="agents", mafioso="votes-villager")]


@pytest.mark.parametrize("profile", [*(PROFILES[n] for n in sorted(PROFILES)), *COMBINATIONS],
                         ids=[*sorted(PROFILES), *(p.name for p in COMBINATIONS)])
def test_monte_carlo_through_the_engine_agrees(profile: Profile) -> None:
    name = profile.name
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
