"""`mafiabench baseline`: exact Mini-Mafia win probabilities for scripted policy profiles."""

from __future__ import annotations

import argparse
from typing import Any

from mafiabench.build.baselines import PROFILES, exact_baseline
from mafiabench.errors import UserError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "baseline",
        help="print exact analytic win probabilities",
        description="Exact town/mafia win probabilities of Mini-Mafia for a policy profile, as fractions. "
        f"Profiles: {', '.join(PROFILES)}.",
    )
    p.add_argument("profile", nargs="?", help="profile name (default: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = [args.profile] if args.profile else list(PROFILES)
    for name in names:
        if name not in PROFILES:
            raise UserError(f"unknown baseline profile {name!r}; known: {', '.join(PROFILES)}")
        b = exact_baseline(name)
        print(f"{name}: town wins {b.town_win} ({float(b.town_win):.4f}), mafia wins {b.mafia_win}, "
              f"town wins after a tie-break {b.town_win_after_tie}")
        print(f"    {PROFILES[name].description}")
    return 0
