"""Exact win probabilities of Mini-Mafia for simple scripted policies ("what a player with no skill would get").

Enumerates every night choice, every vote profile and every tie-break with exact fractions. The same policies run
through the real engine (`policy/...` agents) must agree within Monte Carlo error, which pins the engine's vote and
tie rules (tests/test_baselines.py).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

MafiosoPolicy = Literal["random", "votes-detective"]
DetectivePolicy = Literal["random", "informed"]


@dataclass(frozen=True)
class Profile:
    """A policy profile. `night = "scripted"`: a random villager dies and the detective knows the mafioso;
    `"agents"`: the mafioso kills uniformly among the town, then the detective (if alive) investigates uniformly
    among the other active players."""

    name: str
    description: str
    night: Literal["scripted", "agents"] = "scripted"
    mafioso: MafiosoPolicy = "random"
    detective: DetectivePolicy = "informed"

    def agents(self) -> dict[str, str]:
        """The engine agents that play this profile."""
        return {
            "mafioso": "policy/mafia-votes-detective" if self.mafioso == "votes-detective" else "policy/random",
            "detective": "policy/informed" if self.detective == "informed" else "policy/random",
            "villager": "policy/random",
        }


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("day-informed", "Scripted night; informed detective; random mafioso and villager votes."),
        Profile(
            "day-mafioso-votes-detective",
            "Scripted night; informed detective; the mafioso always votes the detective.",
            mafioso="votes-detective",
        ),
        Profile("day-all-random", "Scripted night; every vote uniformly random.", detective="random"),
        Profile(
            "full-random-night",
            "Agent-played night with random kill and investigation; informed detective if it found the mafioso; "
            "random votes otherwise; no communication.",
            night="agents",
        ),
    )
}


@dataclass(frozen=True)
class Baseline:
    town_win: Fraction
    town_win_after_tie: Fraction  # the part of town_win decided by a random tie-break

    @property
    def mafia_win(self) -> Fraction:
        return 1 - self.town_win


def _vote_dist(voter: str, active: list[str], profile: Profile, knows_mafioso: bool) -> dict[str, Fraction]:
    others = [p for p in active if p != voter]
    if voter == "M" and profile.mafioso == "votes-detective" and "D" in others:
        return {"D": Fraction(1)}
    if voter == "D" and profile.detective == "informed" and knows_mafioso:
        return {"M": Fraction(1)}
    return {o: Fraction(1, len(others)) for o in others}


def _day(active: list[str], profile: Profile, knows_mafioso: bool) -> tuple[Fraction, Fraction]:
    """(P(town wins), P(town wins after a tie-break)) for one day with the given active players."""
    dists = [_vote_dist(v, active, profile, knows_mafioso) for v in active]
    win = tie_win = Fraction(0)
    for profile_votes in itertools.product(*(d.items() for d in dists)):
        p = Fraction(1)
        for _, q in profile_votes:
            p *= q
        counts = Counter(t for t, _ in profile_votes)
        top = max(counts.values())
        tied = [t for t, c in counts.items() if c == top]
        if "M" in tied:
            share = p / len(tied)
            win += share
            if len(tied) > 1:
                tie_win += share
    return win, tie_win


def _night_outcomes(profile: Profile) -> Iterator[tuple[Fraction, list[str], bool]]:
    """(probability, active players for the day, detective knows the mafioso)."""
    if profile.night == "scripted":
        yield Fraction(1), ["M", "D", "V"], True
        return
    town = ["D", "V1", "V2"]
    for victim in town:
        active = [p for p in ["M", "D", "V1", "V2"] if p != victim]
        if victim == "D":
            yield Fraction(1, 3), active, False
            continue
        targets = [p for p in active if p != "D"]
        for t in targets:
            yield Fraction(1, 3) / len(targets), active, t == "M"


def exact_baseline(profile: Profile | str) -> Baseline:
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise KeyError(f"unknown baseline profile {profile!r}; known: {', '.join(PROFILES)}")
        profile = PROFILES[profile]
    win = tie = Fraction(0)
    for p, active, knows in _night_outcomes(profile):
        w, t = _day(active, profile, knows)
        win += p * w
        tie += p * t
    return Baseline(win, tie)


def baseline_table() -> list[dict[str, object]]:
    """Rows for the `mart_baselines` table and dashboard reference lines."""
    rows = []
    for name, prof in PROFILES.items():
        b = exact_baseline(prof)
        rows.append(
            {
                "profile": name,
                "description": prof.description,
                "night": prof.night,
                "town_win": float(b.town_win),
                "town_win_fraction": str(b.town_win),
                "mafia_win": float(b.mafia_win),
                "mafia_win_fraction": str(b.mafia_win),
                "town_win_after_tie": float(b.town_win_after_tie),
            }
        )
    return rows
