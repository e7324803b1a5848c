"""Adaptive sample sizes: play a cell in waves until its win rate is known to a given interval half-width.

A cell with `[stopping]` is played `min_games` first, then `wave` more at a time, up to `max_games`; after each wave
(a *look*) the cell stops if the interval of its mafia win rate (mafia wins among scored games) is at most
`2 × half_width` wide.

Why the intervals stay honest. Stopping when an interval first looks narrow enough is optional stopping: with a
plain 95% interval computed at every look, the chance that *some* look shows an interval missing the true rate is
above 5%, and the rule stops exactly at such looks more often than chance, so the reported intervals cover less
than they claim. The rule therefore fixes its looks in advance (the game counts `min_games, min_games + wave, ...,
max_games`, K of them, whatever the data) and computes each look's interval at level `1 - (1 - confidence) / K`
(Bonferroni over the looks). By the union bound, the probability that any of the K intervals misses the truth is at
most `1 - confidence`, so the interval reported where the cell stopped (whichever look that is, however chosen)
covers the true rate with probability at least `confidence`. The price: wider intervals per look, hence more games
than a fixed-n design of the same width needs (about 20-60% more for 5-20 looks); `tests/test_stopping.py` checks the
coverage by simulation. The intervals are exact (Clopper-Pearson, Beta quantiles from scipy), never below their
level for any true rate.

What it does to the point estimate: the win rate at the stopping look is slightly biased (a cell stops early when its
interval is narrow, which happens when the rate is near 0 or 1, so extreme estimates stop earlier); the bias is
small next to the interval's width, and the interval, not the point, is what the rule guarantees. Looks are at
fixed game counts and use only the cell's first `n` games (ids are deterministic), so a resumed run re-evaluates
the same look on the same games: a kill never adds a look.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def _beta() -> Any:
    """scipy's Beta distribution, imported on first use: `scipy.stats` costs 0.3-1 s, and a run without [stopping]
    imports this module without computing an interval."""
    from scipy.stats import beta

    return beta


def clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """Exact two-sided interval for a binomial proportion at confidence `level` (k successes in n trials)."""
    if n <= 0:
        return 0.0, 1.0
    a = 1.0 - level
    lower = 0.0 if k == 0 else float(_beta().ppf(a / 2, k, n - k + 1))
    upper = 1.0 if k == n else float(_beta().ppf(1 - a / 2, k + 1, n - k))
    return lower, upper


def looks(min_games: int, max_games: int, wave: int) -> list[int]:
    """The game counts at which a cell is looked at: min, min + wave, ..., max (fixed before any game)."""
    out = list(range(min_games, max_games, wave)) or [min_games]
    if out[-1] != max_games:
        out.append(max_games)
    return out


@dataclass(frozen=True)
class Rule:
    """The stopping rule of a study (recorded with each run's summary)."""

    half_width: float
    min_games: int
    max_games: int
    wave: int
    confidence: float = 0.95

    @property
    def looks(self) -> list[int]:
        return looks(self.min_games, self.max_games, self.wave)

    @property
    def level_per_look(self) -> float:
        """Bonferroni over the planned looks: each look's interval at 1 - (1 - confidence) / K."""
        return 1.0 - (1.0 - self.confidence) / len(self.looks)

    def interval(self, k: int, n: int) -> tuple[float, float]:
        return clopper_pearson(k, n, self.level_per_look)

    def narrow_enough(self, k: int, n: int) -> bool:
        lo, hi = self.interval(k, n)
        return n > 0 and (hi - lo) / 2 <= self.half_width + 1e-12

    def next_look(self, games: int) -> int:
        """The first look at or after `games` games."""
        return next((n for n in self.looks if n >= games), self.max_games)

    def worst_case_games(self) -> int:
        """Games a cell needs when every game is scored and its rate is 1/2 (the widest interval): an upper bound
        on what the rule plays for any rate, capped at max_games."""
        for n in self.looks:
            if self.narrow_enough(n // 2, n):
                return n
        return self.max_games

    def describe(self) -> str:
        return (
            f"stop a cell when its mafia win rate's {self.confidence:.0%} interval half-width is at most "
            f"{self.half_width:g} (Clopper-Pearson at {self.level_per_look:.4f} per look, Bonferroni over "
            f"{len(self.looks)} looks at {self.min_games}, {self.min_games + self.wave}, ... {self.max_games} games)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "looks": len(self.looks), "level_per_look": self.level_per_look}


@dataclass
class CellLook:
    """Where a cell stands at a look: its first `games` games, `n` of them scored, `k` won by the mafia."""

    cell: str
    games: int
    n: int
    k: int
    lower: float
    upper: float
    state: str  # "continue" | "width" (narrow enough) | "max" (max_games reached)

    @property
    def half_width(self) -> float:
        return (self.upper - self.lower) / 2

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["half_width"] = self.half_width
        return d


def evaluate(rule: Rule, cell: str, games: int, n: int, k: int) -> CellLook:
    lo, hi = rule.interval(k, n)
    if n > 0 and (hi - lo) / 2 <= rule.half_width + 1e-12:
        state = "width"
    elif games >= rule.max_games:
        state = "max"
    else:
        state = "continue"
    return CellLook(cell, games, n, k, lo, hi, state)


def _intervals(n: int, level: float) -> tuple[Any, Any]:
    """Clopper-Pearson bounds for every k = 0..n at once (arrays indexed by k)."""
    import numpy as np  # here, not at the top: a run without [stopping] imports this module and never needs numpy

    k = np.arange(n + 1)
    a = 1.0 - level
    lower = np.where(k == 0, 0.0, _beta().ppf(a / 2, np.maximum(k, 1), n - k + 1))
    upper = np.where(k == n, 1.0, _beta().ppf(1 - a / 2, k + 1, np.maximum(n - k, 1)))
    return lower, upper


def simulate_coverage(
    rule: Rule, p: float, reps: int, rng: np.random.Generator, *, bonferroni: bool = True
) -> tuple[float, float, float]:
    """Play the rule `reps` times on a cell whose games are Bernoulli(p): (coverage of the stopping interval, mean
    games played, share stopped for width). `bonferroni=False` uses the plain level at every look (what the rule
    avoids), for comparison."""
    import numpy as np

    level = rule.level_per_look if bonferroni else rule.confidence
    marks = rule.looks
    wins = (rng.random((reps, marks[-1])) < p).cumsum(axis=1)
    open_ = np.ones(reps, dtype=bool)
    covered = np.zeros(reps, dtype=bool)
    played = np.zeros(reps)
    by_width = np.zeros(reps, dtype=bool)
    for n in marks:
        lower, upper = _intervals(n, level)
        k = wins[:, n - 1]
        narrow = (upper[k] - lower[k]) / 2 <= rule.half_width + 1e-12
        stop = open_ & (narrow | (n == marks[-1]))
        covered[stop] = (lower[k][stop] <= p) & (p <= upper[k][stop])
        played[stop] = n
        by_width[stop] = narrow[stop]
        open_ &= ~stop
    return float(covered.mean()), float(played.mean()), float(by_width.mean())


def fixed_n_games(half_width: float, confidence: float = 0.95) -> int:
    """Games a fixed design (one look) needs for the same width at rate 1/2: what the looks cost, for comparison."""
    n = 2
    while True:
        lo, hi = clopper_pearson(n // 2, n, confidence)
        if (hi - lo) / 2 <= half_width:
            return n
        n += 2
