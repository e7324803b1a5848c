"""`mafiabench baseline`: exact Mini-Mafia win probabilities for scripted policy profiles."""

from __future__ import annotations

from typing import Annotated

import typer

from mafiabench.commands import command
from mafiabench.errors import UserError
from mafiabench.transform.models.baselines import (
    DETECTIVE_POLICIES,
    MAFIOSO_POLICIES,
    NIGHTS,
    PROFILES,
    VILLAGER_POLICIES,
    Profile,
    exact_baseline,
    profile_of,
)


def register(app: typer.Typer) -> None:
    command(
        app,
        "baseline",
        short_help="print exact analytic win probabilities",
        help="Exact town/mafia win probabilities of Mini-Mafia for a policy profile, as fractions: a named "
        f"profile ({', '.join(PROFILES)}), or any combination of per-role policies given with the options.",
    )(run)


def run(
    profile: Annotated[str | None, typer.Argument(help="profile name (default: all named profiles)")] = None,
    night: Annotated[str | None, typer.Option(help=f"one of {', '.join(NIGHTS)}: scripted (a random villager "
                                              "dies, the detective knows the mafioso) or agents (random kill, then "
                                              "an investigation of a player still active)")] = None,
    detective: Annotated[str | None, typer.Option(help=f"one of {', '.join(DETECTIVE_POLICIES)}: informed votes "
                                                  "the mafioso it found, or by elimination")] = None,
    mafioso: Annotated[str | None, typer.Option(help=f"one of {', '.join(MAFIOSO_POLICIES)}")] = None,
    villager: Annotated[str | None, typer.Option(help=f"one of {', '.join(VILLAGER_POLICIES)}")] = None,
) -> int:
    roles = {k: v for k, v in (("night", night), ("detective", detective), ("mafioso", mafioso),
                               ("villager", villager)) if v}
    profiles: list[Profile]
    if roles:
        if profile:
            raise UserError("give a profile name or per-role options (--night, --detective, ...), not both")
        try:
            profiles = [profile_of(**roles)]
        except KeyError as exc:
            raise UserError(str(exc.args[0])) from exc
    else:
        names = [profile] if profile else list(PROFILES)
        for name in names:
            if name not in PROFILES:
                raise UserError(f"unknown baseline profile {name!r}; known: {', '.join(PROFILES)}")
        profiles = [PROFILES[n] for n in names]
    for prof in profiles:
        b = exact_baseline(prof)
        print(f"{prof.name}: town wins {b.town_win} ({float(b.town_win):.4f}), mafia wins {b.mafia_win}, "
              f"town wins after a tie-break {b.town_win_after_tie}")
        print(f"    {prof.description}")
    return 0
