"""The Mini-Mafia study's published tables (tests/fixtures/published_mini_mafia/, its README names each file's
source): read as rows, and the 140 line-up cells of win_counts.csv, for the tests that rebuild them from the
published counts (tests/transform/test_mini_mafia_published.py, test_mini_mafia_with_humans_published.py)."""

from __future__ import annotations

import csv
from pathlib import Path

PUBLISHED = Path(__file__).parents[1] / "fixtures" / "published_mini_mafia"
GAMES_PER_CELL = 100


def read(name: str) -> list[dict[str, str]]:
    with (PUBLISHED / name).open() as f:
        return list(csv.DictReader(f))


def published_cells() -> dict[tuple[str, str, str], tuple[int, str | None, str, str]]:
    """(mafioso, villager, detective) -> (mafia wins of 100, capability or None when homogeneous, target,
    background), from win_counts.csv; a homogeneous cell is in all three capabilities' rows, once."""
    cells: dict[tuple[str, str, str], tuple[int, str | None, str, str]] = {}
    for r in read("win_counts.csv"):
        target, capability = r["model"], r["capability"].lower()
        for background in (c for c in r if c not in ("capability", "model")):
            k = int(float(r[background]))
            key, mafia_wins = {
                "deceive": ((target, background, background), k),
                "detect": ((background, target, background), GAMES_PER_CELL - k),
                "disclose": ((background, background, target), GAMES_PER_CELL - k),
            }[capability]
            homogeneous = target == background
            if key in cells:
                assert homogeneous and cells[key][0] == mafia_wins, (key, cells[key], mafia_wins)
            cells[key] = (mafia_wins, None if homogeneous else capability, target, background)
    return cells


def published_ess() -> float:
    """The smallest bulk effective sample size of the study's own sampling of the 140 cells (its
    mcmc_diagnostics.csv, of the raw a, b, c)."""
    return min(float(r["ess_bulk"]) for r in read("mcmc_diagnostics.csv"))
