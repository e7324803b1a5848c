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

The counts are aggregated in DuckDB (a handful of rows per source reach Python) by the dbt model
`int_listing_counts` (a summed model: a build counts an increment's games only); the import report reads the same
model's SQL over the raw tables. The mart `mart_listing_leaks` (`transform.models.listing_leaks`), the gate and the
data-quality page share this computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import duckdb

from mafiabench.warehouse.sql_models import SQL_MODELS, model_sql

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


Count = tuple[str, bool, str, int, int, int, float]

# The seat listing's counts: the dbt model `int_listing_counts` (a summed model: the build counts an increment's games
# only), the one statement of how seats are counted; read over the raw tables where no build counted them.
LISTING_COUNTS = "int_listing_counts"
LISTING_COUNTS_SQL = SQL_MODELS / "intermediate" / f"{LISTING_COUNTS}.sql"
_RAW = {"int_player_games": "raw_players", "fct_games": "raw_games"}


def _counts(con: duckdb.DuckDBPyConnection, counted: str | None = None) -> list[Count]:
    """(source, simulated, listing, position, games, mafia, expected count) per listed position of finished games.

    The seat listing from `counted` (the build's `int_listing_counts`), or, where None, from that model's SQL over
    raw_players and raw_games (the import report, before any build): a game whose players sit on distinct seats in
    0..62 (every simulated game, and the imports with seats) is counted there by its set of seats and its set of
    mafia seats, two bit masks, and the position of a seat is its rank among the game's seats (the order `seat nulls
    last, name` gives), ranked here from a few rows; the other games are counted there per position. The detector's
    listings are ranked one player at a time, by a window, in a second query that only runs when there are some.
    The expected count is the exact sum of the games' n_mafia / n_players, rounded once (a float sum in DuckDB's
    thread order differed in the last bits from one run to the next)."""
    relation = counted if counted is not None else f"({model_sql(LISTING_COUNTS_SQL, _RAW)})"
    listed = con.execute(f"""
        select source, simulated, n_players, n_mafia, seats, mafia_seats, position, is_mafia, games
        from {relation}""").fetchall()
    # (source, simulated, listing, position, n_players, n_mafia, mafia at the position, games)
    rows: list[tuple[Any, ...]] = []
    for src, simulated, n, m, seats, mafia_seats, position, is_mafia, games in listed:
        if seats is not None:  # the k-th lowest seat of the mask is listed k-th
            ranked_seats = [seat for seat in range(63) if seats >> seat & 1]
            rows += [(src, simulated, SEATS, k, n, m, bool(mafia_seats >> seat & 1), games)
                     for k, seat in enumerate(ranked_seats, start=1)]
        else:
            rows.append((src, simulated, SEATS, position, n, m, is_mafia, games))
    if con.execute("select count(*) from raw_detection_transcripts").fetchall()[0][0]:
        rows += _detector_counts(con)
    totals: dict[tuple[str, bool, str, int], list[Any]] = {}
    for src, simulated, listing, pos, n, m, mafia, games in rows:
        total = totals.setdefault((src, simulated, listing, pos), [0, 0, Fraction(0)])
        total[0] += games
        total[1] += games if mafia else 0
        total[2] += Fraction(games * m, n)
    counts = [(*key, n, k, float(expected)) for key, (n, k, expected) in totals.items()]
    # As `order by all` orders them: nulls last, strings by code point.
    return sorted(counts, key=lambda r: tuple((x is None, x) for x in r[:4]))


_GAMES = """games as (
            select game_id, source = 'simulation' as simulated,
                   case when source = 'simulation' then 'simulation:' || coalesce(experiment, '?') else source end
                       as src
            from raw_games where status = 'finished'
        )"""


def _detector_counts(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """The detector's listings, counted per (source, simulated, listing, position, n_players, n_mafia, mafia) from
    raw_detection_transcripts and raw_players. Not a summed model: the transcripts land apart from their games (a
    detector run reads published games), so a build's increment of games does not say which transcripts are new."""
    return con.execute(f"""
        with {_GAMES},
        listed as (
            select distinct on (game_id, cut, position) game_id, cut, position, name
            from (select game_id, cut, unnest(players) as name, generate_subscripts(players, 1) as position
                  from raw_detection_transcripts)
        ),
        players as (
            select p.game_id, p.name, p.team = 'mafia' as is_mafia,
                   count(*) filter (where p.team = 'mafia') over w as m, count(*) over w as n
            from raw_players as p semi join games as g on g.game_id = p.game_id
            where p.game_id in (select game_id from listed)
            window w as (partition by p.game_id)
        ),
        rows as (
            select l.game_id, '{DETECTOR}' as listing, l.position, p.n, p.m, p.is_mafia
            from listed as l inner join players as p on p.game_id = l.game_id and p.name = l.name
        )
        select g.src, g.simulated, r.listing, r.position, r.n, r.m, coalesce(r.is_mafia, false), count(*)
        from rows as r inner join games as g using (game_id)
        group by all""").fetchall()


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


def binom_test_p(k: int, n: int, p: float) -> float:
    """The two-sided exact binomial test's p-value (`scipy.stats.binomtest`: the outcomes no more probable than k).
    A build imports scipy.stats beside its models while dbt works (`transform.models.import_beside`)."""
    from scipy.stats import binomtest

    return float(binomtest(k, n, p).pvalue)


def listing_leaks(
    con: duckdb.DuckDBPyConnection, sources: list[str] | None = None, *, counted: str | None = None
) -> list[PositionLeak]:
    """Every (source, listing, position) of the warehouse, tested or with too few games; `sources` keeps the rows of
    some raw sources (the Holm family stays every position the warehouse tests, so the verdicts are the mart's).
    `counted`: the relation of the seat listing's counts (the build's `int_listing_counts`); None counts the raw
    tables (a published warehouse's counts may predate what was just landed)."""
    counts = _counts(con, counted)
    p_values = {(src, listing, pos): binom_test_p(k, n, expected / n)
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
