"""The Python marts reach the warehouse with null, not NaN, for a statistic there was nothing to compute from
(`marts.write_table`): a researcher's `avg()` skips a null where a NaN poisons it, and `is null` finds it.
Infinities and every other value are written as they are."""

from __future__ import annotations

import math

import duckdb
import polars as pl

from mafiabench.transform.build.marts import write_table
from mafiabench.transform.models import latent
from support.records import fresh_con


def test_a_nan_is_written_as_null_and_nothing_else_changes() -> None:
    frame = pl.DataFrame({
        "x": [1.5, math.nan, None, math.inf],
        "y": pl.Series([math.nan, 2.0, -math.inf, 0.0], dtype=pl.Float32),
        "n": [1, 2, 3, 4],
        "s": ["nan", "b", None, "d"],
    })
    con = duckdb.connect()
    write_table(con, "t", frame)
    assert con.execute("select * from t order by n").fetchall() == [
        (1.5, None, 1, "nan"), (None, 2.0, 2, "b"), (None, -math.inf, 3, None), (math.inf, 0.0, 4, "d")]
    assert [r[1] for r in con.execute("describe t").fetchall()] == ["DOUBLE", "FLOAT", "BIGINT", "VARCHAR"]
    assert con.execute("select avg(x) from t").fetchone() == (math.inf,)  # over 1.5 and inf: no NaN left


def test_a_latent_fit_not_made_has_null_scores_in_the_warehouse() -> None:
    """Three cells for seven free parameters: not fitted, so no Brier scores (the frame's NaN, the table's null)."""
    rows = [{"study": "s", "prompt_version": "v1", "game_id": f"{i}-{g}", "variant": "mini-mafia", "is_scored": True,
             "night_mode": "scripted", "mafioso_model": m, "detective_model": d, "villager_model": v,
             "mafia_won": g < w}
            for i, (m, d, v, w) in enumerate([("A", "D", "V", 12), ("B", "E", "W", 9), ("C", "F", "X", 11)])
            for g in range(20)]
    con = fresh_con()
    con.register("frame", pl.DataFrame(rows).to_arrow())
    con.execute("create table fct_games as select * from frame")
    fit = latent.latent_tables(con, method="nuts")["mart_latent_fit"]
    assert fit["status"].to_list() == ["not_fitted"] and math.isnan(fit["brier_model"][0])
    write_table(con, "mart_latent_fit", fit)
    scores = con.execute("select brier_model, brier_constant, brier_gain, brier_skill, n_games "
                         "from mart_latent_fit").fetchall()
    assert scores == [(None, None, None, None, 60)]
