"""The listing-order leak check (issue 35): does the position at which a source lists its players tell their role?

A source's players are listed in two orders a reader meets: the record's seats (every prompt, transcript and page
that lists players in seat order) and the players line of each cleansed transcript the detector read. In a fair
order the player at position i is mafia about as often as the games' mafia share (n_mafia / n_players, averaged over
the games that have a position i); the Dallinger export creates the mafia's nodes first, so its seat order puts a
mafioso first in nearly every game. Per source (each import, each simulated study), per listing and position: the
mafia count, the expected count and a two-sided exact binomial test (`scipy.stats.binomtest`) against the mean
expected share; a position leaks when its p-value is below `ALPHA` divided by the number of positions tested for
that source and listing (Bonferroni). Read from the raw tables, so the import report, the gate and the pages share
one computation.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

ALPHA = 0.001  # family-wise, per source and listing
SEATS = "seats"
DETECTOR = "detector transcripts"
# How many games a position needs before it is tested (a handful of games cannot show a leak, nor clear one).
MIN_GAMES = 10


@dataclass(frozen=True)
class PositionLeak:
    source: str  # the import's source, or `simulation:<experiment>`
    listing: str  # SEATS or DETECTOR
    position: int  # 1-based
    n: int  # games (or transcripts) with a player at this position
    mafia: int  # of them, how often that player was mafia
    expected: float  # the expected count under a role-blind order
    p_value: float
    leak: bool

    def text(self) -> str:
        return (f"{self.source}, {self.listing}: the player listed at position {self.position} is mafia in "
                f"{self.mafia} of {self.n} (expected {self.expected:.1f}; binomial p = {self.p_value:.2g})")


def _rows(con: duckdb.DuckDBPyConnection, sources: list[str] | None) -> list[tuple[str, str, int, int, float]]:
    """(source, listing, position, is_mafia, expected share) per listed player of every finished game."""
    keep = "and g.source in (select unnest($sources))" if sources is not None else ""
    params = {"sources": sources} if sources is not None else {}
    games = f"""
        select g.game_id,
               case when g.source = 'simulation' then 'simulation:' || coalesce(g.experiment, '?') else g.source end
                   as src,
               count(*) filter (where p.team = 'mafia') over (partition by g.game_id) * 1.0
                   / count(*) over (partition by g.game_id) as share,
               p.seat, p.name, p.team
        from raw_games g join raw_players p using (game_id)
        where g.status = 'finished' {keep}"""
    seats = con.execute(f"""
        with players as ({games})
        select src, '{SEATS}', row_number() over (partition by game_id order by seat) as position,
               (team = 'mafia')::int, share
        from players""", params).fetchall()
    listed = con.execute(f"""
        with players as ({games}),
        listed as (
            select t.game_id, t.cut, t.players[i] as name, i as position
            from raw_detection_transcripts t, range(1, 64) as r(i)
            where i <= len(t.players) and t.game_id in (select game_id from players)
        )
        select distinct on (l.game_id, l.cut, l.position) p.src, '{DETECTOR}', l.position,
               (p.team = 'mafia')::int, p.share
        from listed l join players p on p.game_id = l.game_id and p.name = l.name""", params).fetchall()
    return [(str(s), str(li), int(pos), int(m), float(sh)) for s, li, pos, m, sh in seats + listed]


def listing_leaks(con: duckdb.DuckDBPyConnection, sources: list[str] | None = None) -> list[PositionLeak]:
    """Every tested (source, listing, position), leaking or not; `sources` limits it to some raw sources."""
    from scipy.stats import binomtest

    groups: dict[tuple[str, str, int], list[tuple[int, float]]] = {}
    for src, listing, position, mafia, share in _rows(con, sources):
        groups.setdefault((src, listing, position), []).append((mafia, share))
    tested = {k: v for k, v in groups.items() if len(v) >= MIN_GAMES}
    per_family: dict[tuple[str, str], int] = {}
    for src, listing, _ in tested:
        per_family[(src, listing)] = per_family.get((src, listing), 0) + 1
    out = []
    for (src, listing, position), obs in sorted(tested.items()):
        n = len(obs)
        k = sum(m for m, _ in obs)
        expected = sum(s for _, s in obs)
        p = float(binomtest(k, n, expected / n).pvalue)
        out.append(PositionLeak(src, listing, position, n, k, expected, p, p < ALPHA / per_family[(src, listing)]))
    return out
