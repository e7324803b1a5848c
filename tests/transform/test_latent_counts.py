"""The latent point estimate fitted on counts (rows of several games each, as the leaderboard's held-out baseline
gives it its line-ups) is the fit game by game, to the bit: the same cells, counts and wins."""

from __future__ import annotations

import numpy as np

from mafiabench.transform.models.latent import DEFAULT_RIDGE, _codes, _fit_coded


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
