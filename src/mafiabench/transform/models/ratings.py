"""Skill ratings across models, by side, with uncertainty: the leaderboard's marts.

The rating is a Bradley–Terry model in team form, fitted by NumPyro's NUTS (full Bayesian sampling):

    logit P(mafia wins game g) = h + mean over g's mafia seats of a[model] - mean over g's town seats of b[model]

with `a` a model's strength as mafia, `b` its strength as town and `h` the side advantage the game gives the mafia
(so the game's asymmetry is not charged to whichever model happened to play mafia more). Every seat of a side is a
member of its team with the seat's model as the player (a side of one mafioso and three villagers of two models is
the mean of four members). The *overall* rating uses one strength `r` per model on both sides. Priors: Normal(0, 1)
on every strength, Normal(0, 2) on `h`; intervals are 95% posterior intervals and ranks come with the 2.5-97.5%
interval of each model's rank over the posterior draws.

The fit is the posterior mode with its Laplace (Gaussian) approximation: the model is a logistic regression on
binomial counts, so the posterior is log-concave and close to Gaussian once a model has played a few dozen games;
tests/test_ratings.py plants strengths, simulates games and checks that the ratings order the models correctly and
that the 95% intervals cover the planted values about 95% of the time.

Why Bradley–Terry and not an online rating (OpenSkill, TrueSkill, Elo): those depend on the order games are fed,
their sigma is not a calibrated interval, and they cost a Python update per game (OpenSkill measured here at
100-340 us a game, minutes at a million games); this fit is order-free and costs what the study's distinct
line-ups cost. Strengths are relative to the study's mean model on that side (they sum to zero), on the logit
scale: a difference of 1 between two mafiosi facing the same town is a factor e in the odds of a mafia win.

Games enter when they are scored (finished, valid, with a winner); failed, abandoned, unfinished and invalid games are
left out and counted (`mart_rating_coverage`), and self-play (one model in every seat) is kept out of the rating
and shown apart (`mart_self_play`): it says how a model fares against itself, nothing about how it ranks. Games are
aggregated to distinct team line-ups first, so a million games cost what their few hundred line-ups cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import polars as pl
from scipy import optimize, special

SIDES = ("overall", "mafia", "town")
SIDE_PRIOR_SD = 2.0
DRAWS = 4000
SEED = 20261126
GAME_IDS_PER_PAIR = 500

# What the marts' columns are, in order (the empty frames of a warehouse without games keep the same schema).
RATING_SCHEMA: dict[str, Any] = {
    "study": pl.Utf8,
    "side": pl.Utf8,
    "model": pl.Utf8,
    "rating": pl.Float64,
    "sd": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "rank": pl.Int64,
    "rank_low": pl.Int64,
    "rank_high": pl.Int64,
    "n_games": pl.Int64,
    "wins": pl.Int64,
    "win_rate": pl.Float64,
    "converged": pl.Boolean,
    "side_advantage": pl.Float64,
}
HEAD_TO_HEAD_SCHEMA: dict[str, Any] = {
    "study": pl.Utf8,
    "mafia_model": pl.Utf8,
    "town_model": pl.Utf8,
    "games": pl.Int64,
    "mafia_wins": pl.Int64,
    "mafia_win_rate": pl.Float64,
    "mirrored": pl.Boolean,
    "game_ids": pl.List(pl.Utf8),
}
SELF_PLAY_SCHEMA: dict[str, Any] = {
    "study": pl.Utf8,
    "model": pl.Utf8,
    "games": pl.Int64,
    "mafia_wins": pl.Int64,
    "mafia_win_rate": pl.Float64,
}
COVERAGE_SCHEMA: dict[str, Any] = {"study": pl.Utf8, "category": pl.Utf8, "games": pl.Int64}


@dataclass(frozen=True)
class LineUps:
    """Distinct (mafia team, town team) line-ups of one study, with their games and mafia wins.

    `mafia` and `town` are (line-ups × models) matrices of seat shares: row i, column m is the fraction of line-up
    i's mafia (town) seats that model m played, so a team's strength is `mafia @ a`, the mean of its members."""

    models: list[str]
    mafia: np.ndarray
    town: np.ndarray
    games: np.ndarray
    wins: np.ndarray


@dataclass(frozen=True)
class Posterior:
    """The posterior mode of each strength vector (`a`, `b` or `r`) and the side advantage `h`, draws from the
    Laplace approximation around it, and whether the optimiser converged."""

    draws: dict[str, np.ndarray]
    mode: dict[str, np.ndarray]
    converged: bool


def line_ups(games: Sequence[tuple[Sequence[str], Sequence[str], bool]]) -> LineUps:
    """Aggregate games given as (mafia seat models, town seat models, mafia won)."""
    models = sorted({m for mafia, town, _ in games for m in (*mafia, *town)})
    index = {m: i for i, m in enumerate(models)}
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[int]] = {}
    for mafia, town, won in games:
        key = (tuple(sorted(mafia)), tuple(sorted(town)))
        entry = groups.setdefault(key, [0, 0])
        entry[0] += 1
        entry[1] += int(won)
    mafia_m = np.zeros((len(groups), len(models)))
    town_m = np.zeros((len(groups), len(models)))
    for row, (mafia_seats, town_seats) in enumerate(groups):
        for m in mafia_seats:
            mafia_m[row, index[m]] += 1 / len(mafia_seats)
        for m in town_seats:
            town_m[row, index[m]] += 1 / len(town_seats)
    counts = np.array(list(groups.values()), dtype=np.int64).reshape(-1, 2)
    return LineUps(models, mafia_m, town_m, counts[:, 0], counts[:, 1])


def _sum_zero_basis(n: int) -> np.ndarray:
    """An orthonormal basis (n x n-1) of the vectors that sum to zero: strengths are `basis @ z`, so a common shift
    of every model (which the side advantage absorbs) is not a parameter, and z ~ Normal(0, I) is the same prior as
    Normal(0, 1) strengths centred on their mean."""
    if n == 1:
        return np.zeros((1, 0))
    q, _ = np.linalg.qr(np.eye(n) - 1.0 / n)
    return q[:, : n - 1]


def fit(data: LineUps, *, by_side: bool, draws: int = DRAWS, seed: int = SEED) -> Posterior:
    """The posterior mode and its Laplace (Gaussian) approximation, then draws from it for ranks.

    The model is a logistic regression on the line-ups (binomial counts), so its negative log-posterior is convex:
    scipy's trust-region Newton method with the exact gradient and Hessian finds the mode in a few steps, and the
    inverse Hessian there is the covariance. For a million games the cost is that of their few hundred line-ups."""
    basis = _sum_zero_basis(len(data.models))
    if by_side:
        design = np.hstack([np.ones((len(data.games), 1)), data.mafia @ basis, -data.town @ basis])
    else:
        design = np.hstack([np.ones((len(data.games), 1)), (data.mafia - data.town) @ basis])
    precision = np.full(design.shape[1], 1.0)
    precision[0] = 1.0 / SIDE_PRIOR_SD**2
    n, w = data.games.astype(float), data.wins.astype(float)

    def objective(theta: np.ndarray) -> float:
        eta = design @ theta
        return float(np.sum(n * np.logaddexp(0.0, eta) - w * eta) + 0.5 * np.sum(precision * theta**2))

    def gradient(theta: np.ndarray) -> np.ndarray:
        return np.asarray(design.T @ (n * special.expit(design @ theta) - w) + precision * theta)

    def hessian(theta: np.ndarray) -> np.ndarray:
        p = special.expit(design @ theta)
        return np.asarray((design * (n * p * (1 - p))[:, None]).T @ design + np.diag(precision))

    result = optimize.minimize(
        objective, np.zeros(design.shape[1]), jac=gradient, hess=hessian, method="trust-exact",
        options={"gtol": 1e-8},
    )
    covariance = np.linalg.inv(hessian(result.x))
    covariance = (covariance + covariance.T) / 2
    sample = np.random.default_rng(seed).multivariate_normal(result.x, covariance, size=draws, method="cholesky")
    k = basis.shape[1]
    out = {"h": sample[:, 0]}
    if by_side:
        out["a"], out["b"] = sample[:, 1 : 1 + k] @ basis.T, sample[:, 1 + k :] @ basis.T
        mode = {"a": basis @ result.x[1 : 1 + k], "b": basis @ result.x[1 + k :], "h": result.x[:1]}
    else:
        out["r"] = sample[:, 1:] @ basis.T
        mode = {"r": basis @ result.x[1:], "h": result.x[:1]}
    converged = bool(result.success or np.max(np.abs(gradient(result.x))) < 1e-6 * max(1.0, n.sum()))
    return Posterior(draws=out, mode=mode, converged=converged)


def _ranks(draws: np.ndarray) -> np.ndarray:
    """Rank of each model (1 = strongest) in each draw."""
    order = np.argsort(-draws, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, draws.shape[1] + 1)[None, :], axis=1)
    return ranks


def summarise(study: str, side: str, data: LineUps, post: Posterior, parameter: str) -> list[dict[str, Any]]:
    """One row per model: posterior mode, sd, 95% interval, rank (by the mode) and its 95% interval over draws."""
    draws = post.draws[parameter]
    mode = post.mode[parameter]
    low, high = np.quantile(draws, [0.025, 0.975], axis=0)
    rank_low, rank_high = np.quantile(_ranks(draws), [0.025, 0.975], axis=0, method="nearest")
    rank = np.empty(len(mode), dtype=np.int64)
    rank[np.argsort(-mode, kind="stable")] = np.arange(1, len(mode) + 1)
    return [
        {
            "study": study,
            "side": side,
            "model": model,
            "rating": float(mode[i]),
            "sd": float(draws[:, i].std(ddof=1)),
            "ci_low": float(low[i]),
            "ci_high": float(high[i]),
            "rank": int(rank[i]),
            "rank_low": int(rank_low[i]),
            "rank_high": int(rank_high[i]),
            "converged": post.converged,
            "side_advantage": float(post.mode["h"][0]),
        }
        for i, model in enumerate(data.models)
    ]


def _games_frame(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return con.sql(
        """
        select g.study, g.game_id, g.status, g.valid, g.is_scored, g.mafia_won,
               list(p.model order by p.seat) filter (where p.team = 'mafia') as mafia,
               list(p.model order by p.seat) filter (where p.team = 'town') as town
        from fct_games g
        join fct_player_games p using (game_id)
        group by all
        order by g.study, g.game_id
        """
    ).pl()


def _category(row: dict[str, Any]) -> str:
    if row["is_scored"]:
        return "self_play" if len({*row["mafia"], *row["town"]}) == 1 else "rated"
    if row["valid"] is False:
        return "invalid"
    return {"failed": "failed", "abandoned": "abandoned", "unfinished": "unfinished"}.get(row["status"], "no_winner")


def rating_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """mart_ratings, mart_head_to_head, mart_self_play and mart_rating_coverage, per study."""
    frame = _games_frame(con)
    ratings: list[dict[str, Any]] = []
    pairs: list[dict[str, Any]] = []
    self_play: list[dict[str, Any]] = []
    coverage: list[dict[str, Any]] = []
    for (study,), part in frame.partition_by("study", as_dict=True, maintain_order=True).items():
        rows = part.to_dicts()
        categories: dict[str, int] = {}
        rated: list[tuple[list[str], list[str], bool]] = []
        ids: list[str] = []
        for row in rows:
            row["mafia"], row["town"] = row["mafia"] or [], row["town"] or []
            category = _category(row) if row["mafia"] and row["town"] else "no_teams"
            categories[category] = categories.get(category, 0) + 1
            if category == "rated":
                rated.append((row["mafia"], row["town"], bool(row["mafia_won"])))
                ids.append(row["game_id"])
            elif category == "self_play":
                model = row["mafia"][0]
                entry = next((s for s in self_play if s["study"] == study and s["model"] == model), None)
                if entry is None:
                    entry = {"study": study, "model": model, "games": 0, "mafia_wins": 0}
                    self_play.append(entry)
                entry["games"] += 1
                entry["mafia_wins"] += int(bool(row["mafia_won"]))
        coverage += [{"study": study, "category": c, "games": n} for c, n in sorted(categories.items())]
        if not rated:
            continue
        ratings += _study_ratings(str(study), rated)
        pairs += _head_to_head(str(study), rated, ids)
    for s in self_play:
        s["mafia_win_rate"] = s["mafia_wins"] / s["games"]
    return {
        "mart_ratings": pl.DataFrame(ratings, schema=RATING_SCHEMA),
        "mart_head_to_head": pl.DataFrame(pairs, schema=HEAD_TO_HEAD_SCHEMA),
        "mart_self_play": pl.DataFrame(self_play, schema=SELF_PLAY_SCHEMA),
        "mart_rating_coverage": pl.DataFrame(coverage, schema=COVERAGE_SCHEMA),
    }


def _study_ratings(study: str, rated: list[tuple[list[str], list[str], bool]]) -> list[dict[str, Any]]:
    data = line_ups(rated)
    rows: list[dict[str, Any]] = []
    overall, sides = fit(data, by_side=False), fit(data, by_side=True)
    for side, post, parameter in (("overall", overall, "r"), ("mafia", sides, "a"), ("town", sides, "b")):
        for row in summarise(study, side, data, post, parameter):
            n, wins = _record(rated, row["model"], side)
            row.update(n_games=n, wins=wins, win_rate=wins / n if n else None)
            rows.append(row)
    return rows


def _record(rated: list[tuple[list[str], list[str], bool]], model: str, side: str) -> tuple[int, int]:
    """Games a model played (on `side`, or on either side for overall) and the games its side won."""
    n = wins = 0
    for mafia, town, mafia_won in rated:
        on_mafia, on_town = model in mafia, model in town
        if side in ("overall", "mafia") and on_mafia:
            n += 1
            wins += int(mafia_won)
        if side in ("overall", "town") and on_town and not (side == "overall" and on_mafia):
            n += 1
            wins += int(not mafia_won)
    return n, wins


def _head_to_head(study: str, rated: list[tuple[list[str], list[str], bool]], ids: list[str]) -> list[dict[str, Any]]:
    """Each (model on the mafia side, model on the town side) meeting, with its games (a game of mixed teams counts
    for every such pair it holds); `mirrored` when the same two models also met with the sides swapped."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for (mafia, town, won), game_id in zip(rated, ids, strict=True):
        for m in sorted(set(mafia)):
            for t in sorted(set(town)):
                if m == t:
                    continue
                cell = cells.setdefault((m, t), {"games": 0, "mafia_wins": 0, "game_ids": []})
                cell["games"] += 1
                cell["mafia_wins"] += int(won)
                if len(cell["game_ids"]) < GAME_IDS_PER_PAIR:
                    cell["game_ids"].append(game_id)
    return [
        {
            "study": study,
            "mafia_model": m,
            "town_model": t,
            "games": c["games"],
            "mafia_wins": c["mafia_wins"],
            "mafia_win_rate": c["mafia_wins"] / c["games"],
            "mirrored": (t, m) in cells,
            "game_ids": c["game_ids"],
        }
        for (m, t), c in sorted(cells.items())
    ]
