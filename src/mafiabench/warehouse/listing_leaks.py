"""The listing-order leak check (issue 35): does the position at which a source lists its players tell their role?

A source's players are listed in two orders a reader meets: the record's seats (every prompt, transcript and page
that lists players in seat order; a source without seats, such as Mini-Mafia's batches, lists them by name) and the
players line of each cleansed transcript the detector read. In a fair order the player at position i is mafia about
as often as the games' mafia share (n_mafia / n_players, averaged over the games that have a position i); the
Dallinger export creates the mafia's nodes first, so its seat order puts a mafioso first in nearly every game.

Per source (each import; each simulated study, `simulation:<experiment>`), per listing and position: the mafia
count, the expected count and a two-sided exact binomial test (`scipy.stats.binomtest`) against the mean expected
share. Many positions of many sources are tested at once, so a position leaks when its Holm-adjusted p-value
(Holm's step-down over every position tested in the warehouse, all sources and both listings: the family-wise
error stays at `ALPHA` however many studies a warehouse holds) is below `ALPHA` **and** its mafia share departs
from the expected share by at least `MIN_EFFECT`. The floor is there because a test alone calls any departure a leak
once there are enough games: a million benchmark games copied from 20,000 (each seating repeated 50 times) put a
mafioso second in 25.22% of games against 25.00% expected, p = 3e-7, a cue no reader could use. A departure that is
significant but under the floor is reported as such ("small departure"), neither refused nor called "no leak". A
position with fewer than `MIN_GAMES` games is not tested: its verdict is "too few games", never "no leak".

The counts are aggregated in DuckDB (a handful of rows per source reach Python); the import report, the mart
`mart_listing_leaks` (`transform.models.listing_leaks`), the gate and the data-quality page share this computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

ALPHA = 0.001  # family-wise, over every position tested in the warehouse (Holm)
SEATS = "seats"
DETECTOR = "detector transcripts"
# How many games a position needs before it is tested: with fewer, the check can neither show a leak nor clear one
# (at 10 games a position that is always mafia in 4-player games has p = (1/4)^10 = 9.5e-7, caught under Holm at
# 0.001 among up to a thousand positions).
MIN_GAMES = 10
# The smallest departure of a position's mafia share from the expected share that is called a leak (absolute, 5
# percentage points): the Dallinger export's first seat departs by about 70 points, a role-blind order by
# 1/sqrt(games) (BENCHMARKS' million copied games: 0.2 points).
MIN_EFFECT = 0.05
TOO_FEW = "too few games"
LEAK = "leak"
NO_LEAK = "no leak"
SMALL = "small departure"


@dataclass(frozen=True)
class PositionLeak:
    source: str  # the import's source, or `simulation:<experiment>`
    simulated: bool  # a simulated study (the gate refuses its leaks) or an import (its leaks are reported)
    listing: str  # SEATS or DETECTOR
    position: int  # 1-based
    n: int  # games (or transcripts) with a player at this position
    mafia: int  # of them, how often that player was mafia
    expected: float  # the expected count under a role-blind order
    p_value: float | None  # None: too few games to test
    p_holm: float | None  # Holm-adjusted over every position tested
    family: int  # how many positions were tested together (Holm's m)

    @property
    def departure(self) -> float:
        """The position's mafia share less the expected share."""
        return (self.mafia - self.expected) / self.n

    @property
    def significant(self) -> bool:
        return self.p_holm is not None and self.p_holm < ALPHA

    @property
    def leak(self) -> bool:
        return self.significant and abs(self.departure) >= MIN_EFFECT

    @property
    def verdict(self) -> str:
        if self.p_value is None:
            return TOO_FEW
        return LEAK if self.leak else SMALL if self.significant else NO_LEAK

    def text(self) -> str:
        return (f"{self.source}, {self.listing}: the player listed at position {self.position} is mafia in "
                f"{self.mafia} of {self.n} (expected {self.expected:.1f}; binomial p = {self.p_value:.2g})")


def _counts(con: duckdb.DuckDBPyConnection) -> list[tuple[str, bool, str, int, int, int, float]]:
    """(source, simulated, listing, position, games, mafia, expected count) per listed position of finished games."""
    return con.execute(f"""
        with games as (
            select game_id, source = 'simulation' as simulated,
                   case when source = 'simulation' then 'simulation:' || coalesce(experiment, '?') else source end
                       as src
            from raw_games where status = 'finished'
        ),
        players as (
            select p.game_id, p.name, p.team = 'mafia' as is_mafia,
                   count(*) filter (where p.team = 'mafia') over w * 1.0 / count(*) over w as share,
                   row_number() over (partition by p.game_id order by p.seat nulls last, p.name) as position
            from raw_players p semi join games g on g.game_id = p.game_id
            window w as (partition by p.game_id)
        ),
        listed as (
            select distinct on (game_id, cut, position) game_id, cut, position, name
            from (select game_id, cut, unnest(players) as name, generate_subscripts(players, 1) as position
                  from raw_detection_transcripts)
        ),
        rows as (
            select game_id, '{SEATS}' as listing, position, is_mafia, share from players
            union all
            select l.game_id, '{DETECTOR}', l.position, p.is_mafia, p.share
            from listed l join players p on p.game_id = l.game_id and p.name = l.name
        )
        select g.src, g.simulated, r.listing, r.position::int, count(*)::int, count(*) filter (where r.is_mafia)::int,
               sum(r.share)
        from rows r join games g using (game_id)
        group by all order by all""").fetchall()


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979): sorted ascending, p_(i) times (m - i + 1), made monotone and
    capped at 1; a hypothesis is rejected at family-wise level alpha exactly when its adjusted p-value is below it."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def listing_leaks(con: duckdb.DuckDBPyConnection, sources: list[str] | None = None) -> list[PositionLeak]:
    """Every (source, listing, position) of the warehouse, tested or with too few games; `sources` keeps the rows of
    some raw sources (the Holm family stays every position the warehouse tests, so the verdicts are the mart's)."""
    from scipy.stats import binomtest

    counts = _counts(con)
    p_values = {(src, listing, pos): float(binomtest(k, n, expected / n).pvalue)
                for src, _, listing, pos, n, k, expected in counts if n >= MIN_GAMES}
    adjusted = dict(zip(p_values, holm(list(p_values.values())), strict=True))
    out = []
    for src, simulated, listing, pos, n, k, expected in counts:
        if sources is not None and ("simulation" if simulated else src) not in sources:
            continue
        key = (src, listing, pos)
        out.append(PositionLeak(src, bool(simulated), listing, pos, n, k, float(expected), p_values.get(key),
                                adjusted.get(key), len(p_values)))
    return out
