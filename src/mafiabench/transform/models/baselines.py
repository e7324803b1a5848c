"""Exact win probabilities of Mini-Mafia for simple scripted policies ("what a player with no skill would get").

A profile is any combination of per-role policies, as the published analysis derives its baselines: detective
random or informed (an informed detective uses elimination: with three players alive, an "innocent" result
identifies the mafioso), mafioso random / votes the detective / votes a villager, villager random; and the night
scripted (a random villager dies, the detective knows the mafioso) or agent-played (a random kill, then the
detective investigates a player still active). Enumerates every night choice, every vote profile and every
tie-break with exact fractions. The same policies run through the real engine (`policy/...` agents) must agree
within Monte Carlo error, which pins the engine's vote and tie rules (tests/test_baselines.py). The paper's own
figures come out exactly: day game with informed detective and random others, mafia 5/12; detective votes the
mafioso, mafioso a villager, villager random, town 2/3; the full game with a random night and no communication,
town 1/2.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import duckdb
    import polars as pl

MafiosoPolicy = Literal["random", "votes-detective", "votes-villager"]
DetectivePolicy = Literal["random", "informed"]
VillagerPolicy = Literal["random"]
MAFIOSO_POLICIES: tuple[str, ...] = ("random", "votes-detective", "votes-villager")
DETECTIVE_POLICIES: tuple[str, ...] = ("random", "informed")
VILLAGER_POLICIES: tuple[str, ...] = ("random",)
NIGHTS: tuple[str, ...] = ("scripted", "agents")


@dataclass(frozen=True)
class Profile:
    """A policy profile. `night = "scripted"`: a random villager dies and the detective knows the mafioso;
    `"agents"`: the mafioso kills uniformly among the town, then the detective (if alive) investigates uniformly
    among the other active players; an informed detective then knows the mafioso either way (found, or the one
    left when it found a villager)."""

    name: str
    description: str
    night: Literal["scripted", "agents"] = "scripted"
    mafioso: MafiosoPolicy = "random"
    detective: DetectivePolicy = "informed"
    villager: VillagerPolicy = "random"

    def agents(self) -> dict[str, str]:
        """The engine agents that play this profile."""
        mafioso = {"votes-detective": "policy/mafia-votes-detective",
                   "votes-villager": "policy/mafia-votes-villager"}.get(self.mafioso, "policy/random")
        return {
            "mafioso": mafioso,
            "detective": "policy/informed" if self.detective == "informed" else "policy/random",
            "villager": "policy/random",
        }


def profile_of(*, night: str = "scripted", detective: str = "informed", mafioso: str = "random",
               villager: str = "random") -> Profile:
    """Any combination of per-role policies (the named profiles are a few of them)."""
    for value, known, what in ((night, NIGHTS, "night"), (detective, DETECTIVE_POLICIES, "detective policy"),
                               (mafioso, MAFIOSO_POLICIES, "mafioso policy"),
                               (villager, VILLAGER_POLICIES, "villager policy")):
        if value not in known:
            raise KeyError(f"unknown {what} {value!r}; known: {', '.join(known)}")
    name = f"{night}-night:detective={detective},mafioso={mafioso},villager={villager}"
    description = (f"{night.capitalize()} night; detective {detective}, mafioso {mafioso}, villager {villager}; "
                   "no communication.")
    return Profile(name, description, night=night, mafioso=mafioso, detective=detective,  # type: ignore[arg-type]
                   villager=villager)  # type: ignore[arg-type]


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("day-informed", "Scripted night; informed detective; random mafioso and villager votes (the "
                "paper's mafia 5/12)."),
        Profile(
            "day-mafioso-votes-detective",
            "Scripted night; informed detective; the mafioso always votes the detective.",
            mafioso="votes-detective",
        ),
        Profile(
            "day-mafioso-votes-villager",
            "Scripted night; informed detective; the mafioso always votes the villager (the paper's town 2/3).",
            mafioso="votes-villager",
        ),
        Profile("day-all-random", "Scripted night; every vote uniformly random.", detective="random"),
        Profile(
            "full-random-night",
            "Agent-played night with random kill and investigation of a player still active; the detective, if "
            "alive, knows the mafioso (found, or by elimination); random votes otherwise; no communication (the "
            "paper's town 1/2).",
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
    villagers = [p for p in others if p.startswith("V")]
    if voter == "M" and profile.mafioso == "votes-villager" and villagers:
        return {v: Fraction(1, len(villagers)) for v in villagers}
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
            # With three players alive, finding a villager names the mafioso too (the one left): an informed
            # detective knows it either way.
            yield Fraction(1, 3) / len(targets), active, t == "M" or len(active) == 3


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


# -- the mart (a Python model of the build) ---------------------------------------------------------------------------


def _fraction(value: Any) -> Fraction:
    return Fraction(value).limit_denominator(10**12) if isinstance(value, float) else Fraction(value)


def baseline_rows() -> list[dict[str, Any]]:
    """Rows of `baseline_table()` for the mart: exact fractions kept as "a/b" text beside their floats.

    Reads the keys that function returns (`profile`, `description`, `night`, `town_win_fraction`,
    `town_win_after_tie`).
    """
    rows: list[dict[str, Any]] = []
    for item in baseline_table():
        town = _fraction(item.get("town_win_fraction", item.get("town_win")))
        after_tie = item.get("town_win_after_tie")
        rows.append(
            {
                "case": str(item.get("profile") or item.get("case")),
                "description": None if item.get("description") is None else str(item["description"]),
                "night": None if item.get("night") is None else str(item["night"]),
                "town_win_fraction": f"{town.numerator}/{town.denominator}",
                "town_win_probability": float(town),
                "mafia_win_fraction": f"{(1 - town).numerator}/{(1 - town).denominator}",
                "mafia_win_probability": float(1 - town),
                "town_win_after_tie": None if after_tie is None else float(_fraction(after_tie)),
                "source": "mafiabench.transform.baselines",  # the module's name when the mart was made: kept, a
                # published table does not change with a module's move (it is `transform.models.baselines` now)
            }
        )
    return rows


def baseline_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """The `mart_baselines` Python model (the build reads no table for it)."""
    import polars as pl  # here: `mafiabench baseline` imports this module on every CLI start, and needs no polars

    schema = {
        "case": pl.Utf8,
        "description": pl.Utf8,
        "night": pl.Utf8,
        "town_win_fraction": pl.Utf8,
        "town_win_probability": pl.Float64,
        "mafia_win_fraction": pl.Utf8,
        "mafia_win_probability": pl.Float64,
        "town_win_after_tie": pl.Float64,
        "source": pl.Utf8,
    }
    return {"mart_baselines": pl.DataFrame(baseline_rows(), schema=schema, orient="row")}


