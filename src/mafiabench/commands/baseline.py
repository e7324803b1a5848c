"""`mafiabench baseline`: exact Mini-Mafia win probabilities for scripted policy profiles."""

from __future__ import annotations

from typing import Annotated

import typer

from mafiabench.build.baselines import PROFILES, exact_baseline
from mafiabench.commands import command
from mafiabench.errors import UserError


def register(app: typer.Typer) -> None:
    command(
        app,
        "baseline",
        short_help="print exact analytic win probabilities",
        help="Exact town/mafia win probabilities of Mini-Mafia for a policy profile, as fractions. "
        f"Profiles: {', '.join(PROFILES)}.",
    )(run)


def run(profile: Annotated[str | None, typer.Argument(help="profile name (default: all)")] = None) -> int:
    names = [profile] if profile else list(PROFILES)
    for name in names:
        if name not in PROFILES:
            raise UserError(f"unknown baseline profile {name!r}; known: {', '.join(PROFILES)}")
        b = exact_baseline(name)
        print(f"{name}: town wins {b.town_win} ({float(b.town_win):.4f}), mafia wins {b.mafia_win}, "
              f"town wins after a tie-break {b.town_win_after_tie}")
        print(f"    {PROFILES[name].description}")
    return 0
