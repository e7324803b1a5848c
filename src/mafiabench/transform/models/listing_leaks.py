"""The listing-order leak check as a mart (issue 35 item 1): per source and listed position, how often the player
listed there is mafia, against the share a role-blind order gives.

A Python model of the build (registered in `transform.models.PYTHON_MODELS`): the listed orders are recorded in the
raw tables (`raw_players.seat`, or the name where a source has no seats; `raw_detection_transcripts.players`, the
header the detector read); the seat listing is counted by the dbt model `int_listing_counts` (a summed model: an
increment counts its own games), the detector's listings from the raw tables, and the test is
`warehouse.listing_leaks`' (an exact binomial test, scipy's `binomtest`, with Holm's correction over every position
tested), shared with the import report. The gate refuses a
simulated study with a leak (`listing_leaks.yml`); an import's leaks are data about the dataset, shown on the
data-quality page.
"""

from __future__ import annotations

import duckdb
import polars as pl

from mafiabench.warehouse.listing_leaks import ALPHA, LISTING_COUNTS, MIN_EFFECT, MIN_GAMES, listing_leaks

LISTING_LEAKS_SCHEMA = {
    "source": pl.Utf8,
    "origin": pl.Utf8,
    "listing": pl.Utf8,
    "position": pl.Int64,
    "games": pl.Int64,
    "mafia": pl.Int64,
    "mafia_share": pl.Float64,
    "expected_share": pl.Float64,
    "expected_mafia": pl.Float64,
    "p_value": pl.Float64,
    "p_holm": pl.Float64,
    "positions_tested": pl.Int64,
    "alpha": pl.Float64,
    "min_games": pl.Int64,
    "leak": pl.Boolean,
    "verdict": pl.Utf8,
    "min_effect": pl.Float64,
}


def listing_leak_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """One row per (source, listing, position) of the warehouse's finished games: the seat listing from the build's
    `int_listing_counts`, or where the connection has none (raw tables given alone, as tests give them) from the
    same model's SQL over the raw tables."""
    found = con.execute(
        "select count(*) from (select table_name as name from duckdb_tables() union all "
        "select view_name from duckdb_views()) where name = ?", [LISTING_COUNTS]
    ).fetchall()[0][0]
    rows = [
        {
            "source": r.source,
            "origin": "simulated" if r.simulated else "imported",
            "listing": r.listing,
            "position": r.position,
            "games": r.n,
            "mafia": r.mafia,
            "mafia_share": r.mafia / r.n,
            "expected_share": r.expected / r.n,
            "expected_mafia": r.expected,
            "p_value": r.p_value,
            "p_holm": r.p_holm,
            "positions_tested": r.family,
            "alpha": ALPHA,
            "min_games": MIN_GAMES,
            "leak": None if r.p_value is None else r.leak,
            "verdict": r.verdict,
            "min_effect": MIN_EFFECT,
        }
        for r in listing_leaks(con, counted=LISTING_COUNTS if found else None)
    ]
    return {"mart_listing_leaks": pl.DataFrame(rows, schema=LISTING_LEAKS_SCHEMA, orient="row")}
