"""The latent point estimate fitted on counts (rows of several games each, as the leaderboard's held-out baseline
gives it its line-ups, or the mart's cells counted in DuckDB) is the fit game by game, to the bit: the same cells,
counts and wins."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

from mafiabench.transform.models.latent import (
    DEFAULT_RIDGE,
    _codes,
    _fit_coded,
    cross_validated_brier,
    fit_latent,
    latent_tables,
)


def test_a_fit_on_counts_is_the_fit_on_games() -> None:
    rng = np.random.default_rng(5)
    rows = 40
    mafioso, detective, villager = (rng.choice(list("ABCD"), size=rows) for _ in range(3))
    games = rng.integers(1, 30, size=rows)
    wins = rng.binomial(games, 0.55)
    per_game = [np.repeat(x, games) for x in (mafioso, detective, villager)]
    y = np.concatenate([np.repeat([1.0, 0.0], [w, n - w]) for n, w in zip(games, wins, strict=True)])
    by_game = _fit_coded(*(_codes(x) for x in per_game), y, ridge=DEFAULT_RIDGE)
    by_count = _fit_coded(*(_codes(x) for x in (mafioso, detective, villager)), wins.astype(float),
                          ridge=DEFAULT_RIDGE, games=games.astype(float))
    for field in ("a", "b", "g", "cov", "separated"):
        np.testing.assert_array_equal(getattr(by_count, field), getattr(by_game, field))
    assert (by_count.log_likelihood, by_count.n_games, by_count.n_cells) == (
        by_game.log_likelihood, by_game.n_games, by_game.n_cells)
    assert by_count.n_games == games.sum() and by_count.mafiosos == by_game.mafiosos


def test_the_mart_on_counted_cells_is_the_fit_and_cross_validation_game_by_game() -> None:
    """latent_tables reads the games' cells counted in DuckDB and, for the cross-validation only, each game's cell
    number in game-id order: its point estimates and Brier scores are those of the per-game functions on the games
    in game-id order (ids not in insertion order, several studies, one without a prompt version), to the bit."""
    rng = np.random.default_rng(11)
    frames = []
    for study, version, pool, n in (("s1", "v1", "ABC", 400), ("s1", None, "AB", 60), ("s2", "v1", "ABCD", 90)):
        picks = [rng.choice(list(pool), size=n) for _ in range(3)]
        frames.append(pl.DataFrame({
            "game_id": [f"{study}-{version}-{i:04d}" for i in rng.permutation(n)],
            "study": [study] * n, "prompt_version": pl.Series([version] * n, dtype=pl.Utf8),
            "variant": ["mini-mafia"] * n, "is_scored": [True] * n, "night_mode": ["scripted"] * n,
            "mafioso_model": picks[0], "detective_model": picks[1], "villager_model": picks[2],
            "mafia_won": rng.random(n) < 0.3 + 0.2 * (picks[0] == "A"),
        }))
    games = pl.concat(frames)
    con = duckdb.connect()
    con.register("games", games.to_arrow())
    con.execute("create table fct_games as select * from games")
    tables = latent_tables(con, method="map")
    fits = tables["mart_latent_fit"]
    assert fits.select("study", "prompt_version").rows() == [("s1", "v1"), ("s1", None), ("s2", "v1")]
    for fit in fits.to_dicts():
        part = games.filter((pl.col("study") == fit["study"])
                            & pl.col("prompt_version").eq_missing(fit["prompt_version"])).sort("game_id")
        m, d, v = part["mafioso_model"], part["detective_model"], part["villager_model"]
        y = part["mafia_won"].to_numpy().astype(float)
        assert (fit["brier_model"], fit["brier_constant"]) == cross_validated_brier(m, d, v, y)
        by_game = fit_latent(m, d, v, y)
        assert (fit["log_likelihood"], fit["n_games"], fit["n_cells"]) == (
            by_game.log_likelihood, by_game.n_games, by_game.n_cells)
        estimates = tables["mart_latent_abilities"].filter(
            (pl.col("study") == fit["study"]) & pl.col("prompt_version").eq_missing(fit["prompt_version"]))
        assert estimates.filter(pl.col("parameter") == "a")["estimate"].to_list() == by_game.a.tolist()
        assert estimates.filter(pl.col("parameter") == "b")["estimate"].to_list() == by_game.b.tolist()
