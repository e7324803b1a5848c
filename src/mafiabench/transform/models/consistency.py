"""Strategic consistency, winners against losers (Strategema section 4.5): pooled two-sample t-tests of mean JSD.

A Python model of the build (registered in `transform.models.PYTHON_MODELS`): it reads the finished
`mart_strategic_consistency` and `mart_classic_games` and writes `mart_consistency_tests`; SQL has no t
distribution, scipy does.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import numpy as np
import polars as pl

CONSISTENCY_TESTS_SCHEMA = {
    "study": pl.Utf8,
    "comparison": pl.Utf8,
    "unit": pl.Utf8,
    "n_winners": pl.Int64,
    "n_losers": pl.Int64,
    "mean_jsd_winners": pl.Float64,
    "sd_jsd_winners": pl.Float64,
    "mean_jsd_losers": pl.Float64,
    "sd_jsd_losers": pl.Float64,
    "t_statistic": pl.Float64,
    "df": pl.Float64,
    "p_value": pl.Float64,
}

# Strategema section 4.5, on the main configurations of one study: every player, winners against losers; the same
# with one observation per game (the mafia team's mean C, games the mafia won against games it lost: the unit that
# gives the paper's t(398) for 400 games); and the Mafia-only comparison.
CONSISTENCY_COMPARISONS = (
    ("winners_vs_losers", "player"),
    ("winners_vs_losers", "game"),
    ("mafia_only", "player"),
)


def pooled_t_test(won: np.ndarray, lost: np.ndarray) -> tuple[float, float, float]:
    """Student's two-sample t-test with pooled variance (scipy), the paper's test: (t, df = n1 + n2 - 2, two-sided
    p); NaN where a side has fewer than two values."""
    if len(won) < 2 or len(lost) < 2:
        return math.nan, math.nan, math.nan
    from scipy import stats  # here, not at import: most builds have no classic games to test (0.3 s)

    res = stats.ttest_ind(won, lost, equal_var=True)
    return float(res.statistic), float(len(won) + len(lost) - 2), float(res.pvalue)


def _mean_sd(values: np.ndarray) -> tuple[float, float]:
    mean = float(values.mean()) if len(values) else math.nan
    return mean, float(values.std(ddof=1)) if len(values) >= 2 else math.nan


def consistency_tests(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """Winners against losers in strategic consistency C_i (mean JSD), per study, on its main configurations."""
    players = con.sql(
        """select c.study, c.game_id, c.team, c.won, c.mean_jsd
           from mart_strategic_consistency as c
           inner join mart_classic_games as g on g.game_id = c.game_id
           where g.is_main and c.mean_jsd is not null
           order by c.study, c.game_id, c.player"""
    ).pl()
    rows: list[dict[str, Any]] = []
    for (study,), part in players.group_by(["study"], maintain_order=True):
        mafia = part.filter(pl.col("team") == "mafia")
        per_game = mafia.group_by("game_id", maintain_order=True).agg(pl.col("won").first(), pl.col("mean_jsd").mean())
        samples = {
            ("winners_vs_losers", "player"): part,
            ("winners_vs_losers", "game"): per_game,
            ("mafia_only", "player"): mafia,
        }
        for comparison, unit in CONSISTENCY_COMPARISONS:
            frame = samples[(comparison, unit)]
            won = frame.filter(pl.col("won"))["mean_jsd"].to_numpy()
            lost = frame.filter(~pl.col("won"))["mean_jsd"].to_numpy()
            t, df, p = pooled_t_test(won, lost)
            (mean_w, sd_w), (mean_l, sd_l) = _mean_sd(won), _mean_sd(lost)
            rows.append(
                {
                    "study": study,
                    "comparison": comparison,
                    "unit": unit,
                    "n_winners": len(won),
                    "n_losers": len(lost),
                    "mean_jsd_winners": mean_w,
                    "sd_jsd_winners": sd_w,
                    "mean_jsd_losers": mean_l,
                    "sd_jsd_losers": sd_l,
                    "t_statistic": t,
                    "df": df,
                    "p_value": p,
                }
            )
    return {"mart_consistency_tests": pl.DataFrame(rows, schema=CONSISTENCY_TESTS_SCHEMA, orient="row")}
