"""Skill ratings across models, by side and by role, with intervals that hold when the model is wrong, the fit's
goodness and held-out prediction beside baselines, and no rank for what the data do not rate: the leaderboard.

The rating is a Bradley–Terry model in team form, fitted at its posterior mode with a Laplace (Gaussian)
approximation (the model is a logistic regression on binomial counts, so the posterior is log-concave):

    logit P(mafia wins game g) = h + mean over g's mafia seats of a[model] - mean over g's town seats of b[model]

with `a` a model's strength as mafia, `b` its strength as town and `h` the side advantage the game gives the mafia
(between the study's average models, not any real model). The *overall* rating uses one strength `r` per model on
both sides. Where a side holds more than one role (Mini-Mafia's town: a detective and two villagers) a third fit
rates each role apart, a seat's strength being its model's strength in its role: Mini-Mafia's mafioso, detective
(disclosing) and villager (detecting) are different abilities. Priors: Normal(0, 1) on every strength (centred over
the models that played that side or role), Normal(0, 2) on `h`.

What the page can trust, and says:
- Intervals. The model-based interval is the Laplace one. Real games scatter more than the model says (line-ups
  differ in ways the team means do not capture: the published Mini-Mafia counts have chi-square/df about 3); the
  robust interval adds the line-ups' own scatter beyond the model (a cluster-robust sandwich over line-ups, the
  cluster bootstrap to first order), and never less than the Laplace one scaled by the dispersion. Each fit shows
  the robust one when its Pearson chi-square / df over line-ups is above 1 (`interval`).
  benchmarks/bench_rating_coverage.py plants strengths with and without line-up effects and records coverage in
  BENCHMARKS.md.
- Rated only where the data rate. For each rating the data's share of its posterior precision
  (1 - posterior variance / prior variance) and whether the design identifies it (less than a quarter of it in
  the null space of the data's Fisher information, where the prior alone places it); a model with no games in a
  side or role, alone there, not identified or rated mostly (> half) by the prior is not rated and not ranked, with
  the reason. Each fit reports the design's rank and the unidentified directions.
- Fit and prediction. Each fit's dispersion (Pearson chi-square / df over line-ups), held-out log loss and Brier
  score by 5-fold cross-validation over line-ups beside baselines (the side advantage alone, the models' raw win
  rates, and for Mini-Mafia designs the reference's latent model), and calibration bins of the held-out predictions.

Why Bradley–Terry and not an online rating (OpenSkill, TrueSkill, Elo): those depend on the order games are fed,
their sigma is not a calibrated interval, and they cost a Python update per game; this fit is order-free and costs
what the study's distinct line-ups cost. Strengths are on the logit scale: a difference of 1 between two mafiosi
facing the same town is a factor e in the odds of a mafia win.

Games enter when they are scored (finished, valid, with a winner); failed, abandoned, unfinished and invalid games are
left out and counted (`mart_rating_coverage`), and self-play (one model in every seat) is kept out of the rating
and shown apart (`mart_self_play`). Games are categorised and counted by distinct line-up in the dbt project
(`int_line_up_counts`, a summed model: an increment adds its own games' counts), so a million games cost what their
few hundred line-ups cost.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from mafiabench.transform.models import fit_cache
from mafiabench.transform.models.baselines import exact_baseline
from mafiabench.transform.models.widening import Z95
from mafiabench.warehouse.sql_models import SQL_MODELS, model_sql

SIDES = ("overall", "mafia", "town")
FITS = ("overall", "sides", "roles")
SIDE_PRIOR_SD = 2.0
DRAWS = 4000
SEED = 20261126
GAME_IDS_PER_PAIR = 500
FOLDS = 5
CALIBRATION_BINS = 10
MIN_DATA_SHARE = 0.5  # a rating the prior sets more than the games is not rated
NULL_TOL = 1e-9  # an information eigenvalue below this share of the largest: a direction the data do not set
MAX_UNSET = 0.25  # a rating a quarter of which lies in directions the design does not set is not identified
# The exact mafia win rate when every seat votes uniformly at random (transform.baselines), per variant.
RANDOM_PLAY = {"mini-mafia": float(exact_baseline("day-all-random").mafia_win)}

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
    "rated": pl.Boolean,
    "reason": pl.Utf8,
    "data_share": pl.Float64,
    "interval": pl.Utf8,
    "model_low": pl.Float64,
    "model_high": pl.Float64,
    "robust_low": pl.Float64,
    "robust_high": pl.Float64,
}
FIT_SCHEMA: dict[str, Any] = {
    "study": pl.Utf8,
    "fit": pl.Utf8,
    "line_ups": pl.Int64,
    "games": pl.Int64,
    "parameters": pl.Int64,
    "design_rank": pl.Int64,
    "unidentified": pl.Int64,
    "unidentified_directions": pl.Utf8,
    "chi2": pl.Float64,
    "df": pl.Int64,
    "dispersion": pl.Float64,
    "dispersion_p": pl.Float64,
    "interval": pl.Utf8,
    "folds": pl.Int64,
    "log_loss": pl.Float64,
    "brier": pl.Float64,
    "log_loss_side": pl.Float64,
    "brier_side": pl.Float64,
    "log_loss_raw": pl.Float64,
    "brier_raw": pl.Float64,
    "log_loss_latent": pl.Float64,
    "brier_latent": pl.Float64,
    "side_advantage": pl.Float64,
    "converged": pl.Boolean,
}
CALIBRATION_SCHEMA: dict[str, Any] = {
    "study": pl.Utf8,
    "fit": pl.Utf8,
    "bin": pl.Int64,
    "games": pl.Int64,
    "line_ups": pl.Int64,
    "predicted": pl.Float64,
    "observed": pl.Float64,
    "observed_low": pl.Float64,
    "observed_high": pl.Float64,
}
HEAD_TO_HEAD_SCHEMA: dict[str, Any] = {
    "study": pl.Utf8,
    "mafia_model": pl.Utf8,
    "town_model": pl.Utf8,
    "games": pl.Int64,
    "mafia_wins": pl.Int64,
    "mafia_win_rate": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "random_play": pl.Float64,
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


Seat = str | tuple[str, str]  # a model, or (role, model)


@dataclass(frozen=True)
class LineUps:
    """Distinct line-ups of one study (who held which role on each side), with their games and mafia wins.

    `roles` maps each role to its side and a (line-ups x models) matrix of seat shares: row i, column m is the
    fraction of line-up i's seats on that side that model m held in that role, so a side's strength is the sum over
    its roles of `share @ strength`, the mean of its members. Seats given without a role take their side's name."""

    models: list[str]
    roles: dict[str, tuple[str, np.ndarray]]
    games: np.ndarray
    wins: np.ndarray

    def side(self, side: str) -> np.ndarray:
        shares = [m for s, m in self.roles.values() if s == side]
        return np.sum(shares, axis=0) if shares else np.zeros((len(self.games), len(self.models)))

    @property
    def mafia(self) -> np.ndarray:
        return self.side("mafia")

    @property
    def town(self) -> np.ndarray:
        return self.side("town")

    @property
    def special_roles(self) -> bool:
        """Roles apart only where a side holds more than one role (Mini-Mafia's town: a detective and villagers)."""
        sides = [s for s, _ in self.roles.values()]
        return any(sides.count(s) > 1 for s in SIDES[1:])

    def rows(self, keep: np.ndarray) -> LineUps:
        return LineUps(
            self.models, {r: (s, m[keep]) for r, (s, m) in self.roles.items()}, self.games[keep], self.wins[keep]
        )


def _seat(side: str, seat: Seat) -> tuple[str, str]:
    return (side, seat) if isinstance(seat, str) else (seat[0], seat[1])


def line_ups(games: Iterable[tuple[Sequence[Seat], Sequence[Seat], bool]]) -> LineUps:
    """Aggregate games given as (mafia seats, town seats, mafia won); a seat is a model or (role, model). The roles
    of a side are kept apart (a detective is not a villager), the order of seats within a role is not."""
    groups: dict[tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], list[int]] = {}
    for mafia, town, won in games:
        key = (tuple(sorted(_seat("mafia", s) for s in mafia)), tuple(sorted(_seat("town", s) for s in town)))
        entry = groups.setdefault(key, [0, 0])
        entry[0] += 1
        entry[1] += int(won)
    counts = np.array(list(groups.values()), dtype=np.int64).reshape(-1, 2)
    return from_counts(list(groups), counts[:, 0], counts[:, 1])


def from_counts(
    keys: Sequence[tuple[Sequence[tuple[str, str]], Sequence[tuple[str, str]]]], games: np.ndarray, wins: np.ndarray
) -> LineUps:
    """LineUps from distinct line-ups, each (mafia seats, town seats) as (role, model) pairs, and their counts."""
    models = sorted({m for mafia, town in keys for _, m in (*mafia, *town)})
    index = {m: i for i, m in enumerate(models)}
    sides = {r: "mafia" for mafia, _ in keys for r, _ in mafia} | {r: "town" for _, town in keys for r, _ in town}
    order = sorted(sides, key=lambda r: (SIDES.index(sides[r]), r))
    shares = {r: np.zeros((len(keys), len(models))) for r in order}
    for row, (mafia, town) in enumerate(keys):
        for seats in (mafia, town):
            for role, model in seats:
                shares[role][row, index[model]] += 1 / len(seats)
    return LineUps(
        models,
        {r: (sides[r], shares[r]) for r in order},
        np.asarray(games, dtype=np.int64),
        np.asarray(wins, dtype=np.int64),
    )


@dataclass(frozen=True)
class Block:
    """One strength vector of a fit: its name (a side, a role or 'overall'), the signed seat shares that carry it
    into the log-odds of a mafia win, the models that played it and its sum-to-zero basis over them."""

    name: str
    matrix: np.ndarray
    played: np.ndarray
    basis: np.ndarray


def _blocks(data: LineUps, kind: str) -> list[tuple[str, np.ndarray]]:
    if kind == "overall":
        return [("overall", data.mafia - data.town)]
    if kind == "sides":
        return [("mafia", data.mafia), ("town", -data.town)]
    if kind == "roles":
        return [(r, m if s == "mafia" else -m) for r, (s, m) in data.roles.items()]
    raise ValueError(f"unknown fit {kind!r}: one of {', '.join(FITS)}")


def _sum_zero_basis(n: int) -> np.ndarray:
    """An orthonormal basis (n x n-1) of the vectors that sum to zero: strengths are `basis @ z`, so a common shift
    of every model (which the side advantage absorbs) is not a parameter, and z ~ Normal(0, I) is the same prior as
    Normal(0, 1) strengths centred on their mean."""
    if n <= 1:
        return np.zeros((n, 0))
    q, _ = np.linalg.qr(np.eye(n) - 1.0 / n)
    return q[:, : n - 1]


def _make_blocks(data: LineUps, kind: str) -> list[Block]:
    """Each block's strengths are centred over the models that played it: a model with no games there is not a
    parameter (it stays at 0, not rated) and does not move the others."""
    out = []
    for name, matrix in _blocks(data, kind):
        played = np.abs(matrix).sum(axis=0) > 0
        basis = np.zeros((len(data.models), max(int(played.sum()) - 1, 0)))
        basis[played] = _sum_zero_basis(int(played.sum()))
        out.append(Block(name, matrix, played, basis))
    return out


def _design(blocks: list[Block], rows: int) -> np.ndarray:
    return np.hstack([np.ones((rows, 1))] + [b.matrix @ b.basis for b in blocks])


@dataclass(frozen=True)
class Posterior:
    """The posterior mode of a fit (`theta`: h, then each block's sum-to-zero coordinates), its Laplace covariance,
    the cluster-robust covariance over line-ups, the data's Fisher information, the fit statistics and which
    covariance the intervals use (`interval`: 'model' or 'robust')."""

    kind: str
    blocks: list[Block]
    theta: np.ndarray
    cov: np.ndarray
    cov_robust: np.ndarray
    information: np.ndarray
    converged: bool
    chi2: float
    df: int
    rank: int
    interval: str
    draws_count: int = DRAWS
    seed: int = SEED

    def block(self, name: str) -> tuple[int, Block]:
        start = 1
        for b in self.blocks:
            if b.name == name:
                return start, b
            start += b.basis.shape[1]
        raise KeyError(f"no block {name!r} in the {self.kind} fit")

    @property
    def dispersion(self) -> float | None:
        return self.chi2 / self.df if self.df > 0 else None

    @property
    def dispersion_p(self) -> float | None:
        from scipy import stats  # only where a study is fitted: a build that reads its fits from the cache skips it

        return float(stats.chi2.sf(self.chi2, self.df)) if self.df > 0 else None

    @property
    def mode(self) -> dict[str, np.ndarray]:
        out = {"h": self.theta[:1]}
        for b in self.blocks:
            start, _ = self.block(b.name)
            out[b.name] = b.basis @ self.theta[start : start + b.basis.shape[1]]
        return out

    def shown_cov(self) -> np.ndarray:
        return self.cov_robust if self.interval == "robust" else self.cov

    def draws(self, name: str) -> np.ndarray:
        """Draws of a block's strengths from the normal approximation the intervals use (for rank intervals)."""
        start, b = self.block(name)
        k = b.basis.shape[1]
        rng = np.random.default_rng(self.seed)
        cov = self.shown_cov()[start : start + k, start : start + k]
        z = rng.multivariate_normal(self.theta[start : start + k], cov, size=self.draws_count, method="eigh")
        return np.asarray(z @ b.basis.T)

    def predict(self, data: LineUps) -> np.ndarray:
        """P(mafia wins) for each line-up of `data` (a model the fit did not see there counts as the mean model)."""
        from scipy import special

        fitted = {b.name: b for b in self.blocks}
        eta = np.full(len(data.games), float(self.theta[0]))
        mode = self.mode
        for b in _make_blocks(data, self.kind):
            if b.name in fitted:
                eta += b.matrix @ mode[b.name]
        return np.asarray(special.expit(eta))


def fit(
    data: LineUps,
    *,
    by_side: bool | None = None,
    kind: str | None = None,
    draws: int = DRAWS,
    seed: int = SEED,
    interval: str = "auto",
) -> Posterior:
    """The posterior mode and its Laplace (Gaussian) approximation, the cluster-robust covariance over line-ups and
    the dispersion that chooses between them.

    The model is a logistic regression on the line-ups (binomial counts), so its negative log-posterior is convex:
    scipy's trust-region Newton method with the exact gradient and Hessian finds the mode in a few steps, and the
    inverse Hessian H^-1 there is the covariance. The robust covariance adds what the line-ups' own scatter says
    beyond the model: H^-1 (M - F) H^-1, M the sum over line-ups of their score's outer product and F its model
    expectation (the Fisher information), negative directions dropped (the cluster bootstrap's covariance to first
    order), and is never below the Laplace covariance scaled by the dispersion phi = Pearson chi-square / df over
    line-ups (quasi-likelihood): the sandwich alone covered 0.90 with line-up effects of sd 0.3-0.5 at 100 cells,
    the bound of both 0.95 (benchmarks/bench_rating_coverage.py). `interval='auto'` shows it when phi > 1."""
    from scipy import optimize, special  # here, not at import: a build whose fits are cached never fits (0.3 s)

    kind = kind or ("sides" if by_side else "overall")
    blocks = _make_blocks(data, kind)
    design = _design(blocks, len(data.games))
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
        objective,
        np.zeros(design.shape[1]),
        jac=gradient,
        hess=hessian,
        method="trust-exact",
        options={"gtol": 1e-8},
    )
    theta = result.x
    p = special.expit(design @ theta)
    variance = n * p * (1 - p)
    information = (design * variance[:, None]).T @ design
    cov = _symmetric(np.linalg.inv(information + np.diag(precision)))
    residual = w - n * p
    meat = (design * (residual**2)[:, None]).T @ design
    rank = _rank(information)
    chi2 = float(np.sum(residual**2 / np.maximum(variance, 1e-12)))
    df = len(n) - rank
    phi = max(1.0, chi2 / df) if df > 0 else 1.0
    # The robust covariance bounds both the dispersion-scaled one (phi H^-1) and the cluster sandwich's
    # (H^-1 + H^-1 (M - F) H^-1): phi H^-1 + the positive part of what the sandwich adds beyond it.
    scaled = (phi - 1) * cov
    excess = scaled + _psd(cov @ (meat - information) @ cov - scaled)
    if interval == "auto":
        interval = "robust" if phi > 1 else "model"
    converged = bool(result.success or np.max(np.abs(gradient(theta))) < 1e-6 * max(1.0, n.sum()))
    return Posterior(
        kind, blocks, theta, cov, cov + excess, information, converged, chi2, df, rank, interval, draws, seed
    )


def _symmetric(m: np.ndarray) -> np.ndarray:
    return np.asarray((m + m.T) / 2)


def _psd(m: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(_symmetric(m))
    return np.asarray((vectors * np.clip(values, 0.0, None)) @ vectors.T)


def _null_space(information: np.ndarray) -> np.ndarray:
    """The directions of the parameters the data say nothing about (eigenvalues of the information below 1e-9 of
    its largest): there the posterior is the prior."""
    values, vectors = np.linalg.eigh(_symmetric(information))
    scale = max(float(values.max(initial=0.0)), 1e-300)
    return np.asarray(vectors[:, values <= NULL_TOL * scale])


def _rank(information: np.ndarray) -> int:
    return int(information.shape[0] - _null_space(information).shape[1])


def _ranks(draws: np.ndarray) -> np.ndarray:
    """Rank of each model (1 = strongest) in each draw."""
    order = np.argsort(-draws, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, draws.shape[1] + 1)[None, :], axis=1)
    return ranks


def rating_stats(post: Posterior, name: str) -> dict[str, np.ndarray]:
    """Per model of a block: rating, model and robust sd, the data's share of its posterior precision (1 - posterior
    variance / prior variance), the share of it (by squared norm, in the prior's metric) lying in directions the
    design does not set (the information's null space: the prior alone places it there, whatever the games) and
    whether the design identifies it (that share below a quarter). `defined` is false where the model's strength is
    not a parameter at all (it did not play there, or alone: the centring fixes it at 0 with no variance)."""
    start, b = post.block(name)
    k = b.basis.shape[1]
    contrast = np.zeros((len(b.played), len(post.theta)))
    contrast[:, start : start + k] = b.basis
    prior = (contrast**2).sum(axis=1)  # every strength coordinate has prior Normal(0, 1)
    var = np.einsum("ij,jk,ik->i", contrast, post.cov, contrast)
    var_robust = np.einsum("ij,jk,ik->i", contrast, post.cov_robust, contrast)
    null = _null_space(post.information)
    norm2 = (contrast**2).sum(axis=1)
    unset = ((contrast @ null) ** 2).sum(axis=1) / np.where(norm2 > 0, norm2, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(prior > 0, 1 - var / prior, 0.0)
    return {
        "rating": contrast @ post.theta,
        "sd_model": np.sqrt(np.clip(var, 0, None)),
        "sd_robust": np.sqrt(np.clip(var_robust, 0, None)),
        "data_share": np.clip(share, 0.0, 1.0),
        "unset": unset,
        "identified": b.played & (k > 0) & (unset < MAX_UNSET),
        "defined": prior > 0,
    }


def unidentified_directions(post: Posterior, models: list[str], limit: int = 6) -> list[str]:
    """The directions of the strengths the data do not set, in words ('town: +0.71 m03 -0.71 m04'): the prior
    alone places the ratings along them."""
    null = _null_space(post.information)
    out = []
    for v in null.T[:limit]:
        parts = []
        for b in post.blocks:
            start, _ = post.block(b.name)
            strengths = b.basis @ v[start : start + b.basis.shape[1]]
            terms = [f"{s:+.2f} {models[i]}" for i, s in enumerate(strengths) if abs(s) >= 0.05]
            if terms:
                parts.append(f"{b.name}: {' '.join(terms)}")
        if abs(v[0]) >= 0.05:
            parts.append(f"h: {v[0]:+.2f}")
        out.append("; ".join(parts))
    return out


LEGACY = {"r": "overall", "a": "mafia", "b": "town"}


def summarise(study: str, side: str, data: LineUps, post: Posterior, parameter: str) -> list[dict[str, Any]]:
    """One row per model: posterior mode, the interval the fit shows (model-based, or robust when over-dispersed)
    beside both, the data's share of the rating's precision, and a rank with its 95% interval over draws among the
    models the data rate. A model with no games there, alone there, not identified by the design or rated mostly by
    the prior is not rated: no rank, and the reason. Where the model did not play, played alone, or (overall) held
    the same share of both sides in every game it played, its strength is no parameter of the fit (the centring
    puts it at 0, with no variance): rating, sd and intervals are null there, not 0 +- 0, which would read as a
    rating known exactly."""
    name = LEGACY.get(parameter, parameter)
    _, b = post.block(name)
    s = rating_stats(post, name)
    games, wins = _record(data, name)
    reasons = []
    alone = int(b.played.sum()) == 1
    for i in range(len(data.models)):
        if not b.played[i] and games[i] > 0:
            # Only overall: a model holding the same share of both sides' seats in every game it played (one of two
            # mafia, two of four town) adds as much to each side, so its games cancel and set nothing of it.
            reasons.append(f"the same share of both sides in every game it played: nothing sets its {name} strength")
        elif not b.played[i]:
            reasons.append(f"no games as {name}" if name != "overall" else "no games")
        elif alone:
            reasons.append(f"the only model as {name}: nothing to compare it with")
        elif not s["identified"][i]:
            reasons.append(f"not identified: {s['unset'][i]:.0%} of it lies in directions the design does not set")
        elif s["data_share"][i] < MIN_DATA_SHARE:
            reasons.append(f"mostly prior: the games set {s['data_share'][i]:.0%} of its precision")
        else:
            reasons.append("")
    rated = np.array([r == "" for r in reasons])
    rank = np.full(len(data.models), -1, dtype=np.int64)
    rank_low = rank.copy()
    rank_high = rank.copy()
    if rated.any():
        idx = np.flatnonzero(rated)
        rank[idx[np.argsort(-s["rating"][idx], kind="stable")]] = np.arange(1, len(idx) + 1)
        ranks = _ranks(post.draws(name)[:, idx])
        rank_low[idx], rank_high[idx] = np.quantile(ranks, [0.025, 0.975], axis=0, method="nearest")
    sd = s["sd_robust"] if post.interval == "robust" else s["sd_model"]
    rows = []
    for i, model in enumerate(data.models):
        n = int(games[i])
        if not s["defined"][i]:
            rows.append(_undefined_row(study, side, model, n, int(wins[i]), post, reasons[i]))
            continue
        rating = float(s["rating"][i])
        rows.append(
            {
                "study": study,
                "side": side,
                "model": model,
                "rating": rating,
                "sd": float(sd[i]),
                "ci_low": rating - Z95 * float(sd[i]),
                "ci_high": rating + Z95 * float(sd[i]),
                "rank": int(rank[i]) if rated[i] else None,
                "rank_low": int(rank_low[i]) if rated[i] else None,
                "rank_high": int(rank_high[i]) if rated[i] else None,
                "n_games": n,
                "wins": int(wins[i]),
                "win_rate": float(wins[i]) / n if n else None,
                "converged": post.converged,
                "side_advantage": float(post.theta[0]),
                "rated": bool(rated[i]),
                "reason": reasons[i] or None,
                "data_share": float(s["data_share"][i]),
                "interval": post.interval,
                "model_low": rating - Z95 * float(s["sd_model"][i]),
                "model_high": rating + Z95 * float(s["sd_model"][i]),
                "robust_low": rating - Z95 * float(s["sd_robust"][i]),
                "robust_high": rating + Z95 * float(s["sd_robust"][i]),
            }
        )
    return rows


def _undefined_row(study: str, side: str, model: str, n: int, wins: int, post: Posterior,
                   reason: str) -> dict[str, Any]:
    """The row of a model whose strength there the fit does not have (`summarise`): its games and reason, no
    rating."""
    return {"study": study, "side": side, "model": model, "rating": None, "sd": None, "ci_low": None,
            "ci_high": None, "rank": None, "rank_low": None, "rank_high": None, "n_games": n, "wins": wins,
            "win_rate": wins / n if n else None, "converged": post.converged, "side_advantage": float(post.theta[0]),
            "rated": False, "reason": reason, "data_share": 0.0, "interval": post.interval, "model_low": None,
            "model_high": None, "robust_low": None, "robust_high": None}


def _record(data: LineUps, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Per model: games it played in the block (a side, a role, or either side for overall) and the games its side
    won (overall: a model on both sides of a game counts it once, as mafia)."""
    n, w = data.games.astype(np.int64), data.wins.astype(np.int64)
    on_mafia, on_town = data.mafia > 0, data.town > 0
    if name == "overall":
        games = (on_mafia | on_town).T @ n
        wins = on_mafia.T @ w + (on_town & ~on_mafia).T @ (n - w)
    elif name in ("mafia", "town"):
        on = on_mafia if name == "mafia" else on_town
        games = on.T @ n
        wins = on.T @ (w if name == "mafia" else n - w)
    else:
        side, matrix = data.roles[name]
        on = matrix > 0
        games = on.T @ n
        wins = on.T @ (w if side == "mafia" else n - w)
    return np.asarray(games), np.asarray(wins)


def held_out(data: LineUps, kind: str, *, folds: int = FOLDS, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Each line-up's P(mafia wins) from a fit that did not see it (k-fold over line-ups), and the same from the
    baselines: the side advantage alone (the training games' mafia win rate) and the models' raw win rates (the
    mean of the mafia seats' raw mafia win rate and the town seats' raw town loss rate). Returns (model, baselines
    as columns 'side', 'raw')."""
    fold = fold_of(len(data.games), folds, seed)
    model = np.full(len(data.games), np.nan)
    base = np.full((len(data.games), 2), np.nan)
    for f in range(folds):
        test, train = fold == f, fold != f
        if not test.any() or not train.any():
            continue
        part = data.rows(train)
        held = data.rows(test)
        model[test] = fit(part, kind=kind, draws=0, interval="model").predict(held)
        base[test] = _baselines(part, held)
    return model, base


def fold_of(line_ups: int, folds: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """Each line-up's fold: the same split for the fits and for every baseline."""
    return np.asarray(np.random.default_rng(seed).permutation(line_ups) % folds)


def _baselines(train: LineUps, test: LineUps) -> np.ndarray:
    n, w = train.games.astype(float), train.wins.astype(float)
    rate = w.sum() / n.sum()
    mafia_on, town_on = train.mafia > 0, train.town > 0
    mafia_games, town_games = mafia_on.T @ n, town_on.T @ n
    mafia_rate = np.where(mafia_games > 0, (mafia_on.T @ w) / np.maximum(mafia_games, 1), rate)
    town_loss = np.where(town_games > 0, (town_on.T @ w) / np.maximum(town_games, 1), rate)
    raw = (test.mafia @ mafia_rate + test.town @ town_loss) / 2
    return np.column_stack([np.full(len(test.games), rate), raw])


def scores(p: np.ndarray, data: LineUps) -> tuple[float, float]:
    """(log loss, Brier score) per game of predictions per line-up (line-ups without a prediction left out)."""
    ok = np.isfinite(p)
    n, w, q = data.games[ok].astype(float), data.wins[ok].astype(float), np.clip(p[ok], 1e-12, 1 - 1e-12)
    total = n.sum()
    if total == 0:
        return math.nan, math.nan
    log_loss = -float(np.sum(w * np.log(q) + (n - w) * np.log1p(-q))) / total
    brier = float(np.sum(w * (1 - q) ** 2 + (n - w) * q**2)) / total
    return log_loss, brier


def latent_held_out(data: LineUps, *, folds: int = FOLDS, seed: int = SEED) -> np.ndarray | None:
    """The Mini-Mafia reference's latent model (logit p = c_k (a_i - b_j): mafioso i, detective j, villager k;
    transform.models.latent) on the same folds over line-ups as the leaderboard's fits (`fold_of`), where every
    line-up has one mafioso, one detective and a villager it names (villagers of one model, or the one of two that
    holds no other seat: the published design's target, who plays the day); None for other designs."""
    from mafiabench.transform.models.latent import DEFAULT_RIDGE, _fit_coded, _sigmoid

    if set(data.roles) != {"mafioso", "detective", "villager"}:
        return None
    codes = {}
    for role, (_, matrix) in data.roles.items():
        held = matrix > 0
        if role == "villager":
            # Villagers of two models: the one holding no other seat is the design's target, the villager who
            # plays the day in the published design (the other is the night's victim).
            others = (data.roles["mafioso"][1] > 0) | (data.roles["detective"][1] > 0)
            held = np.where((held.sum(axis=1) > 1)[:, None], held & ~others, held)
        if np.any(held.sum(axis=1) != 1):
            return None
        codes[role] = held.argmax(axis=1)
    fold = fold_of(len(data.games), folds, seed)
    out = np.full(len(data.games), np.nan)
    names = data.models
    for f in range(folds):
        test, train = fold == f, fold != f
        if not test.any() or not train.any():
            continue
        # Fitted on the training line-ups' counts (games and mafia wins per row): the same cells as game by game.
        coded = []
        params = []
        for role in ("mafioso", "detective", "villager"):
            per_row = codes[role][train]
            used = np.unique(per_row)
            where = np.full(len(names), -1)
            where[used] = np.arange(len(used))
            coded.append(([names[i] for i in used], where[per_row]))
            params.append(where)
        fitted = _fit_coded(
            coded[0], coded[1], coded[2], data.wins[train].astype(float), ridge=DEFAULT_RIDGE,
            games=data.games[train].astype(float),
        )
        a = np.append(fitted.a, 0.0)[params[0][codes["mafioso"][test]]]
        b = np.append(fitted.b, 0.0)[params[1][codes["detective"][test]]]
        g = np.append(fitted.g, 0.0)[params[2][codes["villager"][test]]]
        out[test] = _sigmoid(np.exp(g) * (a - b))
    return out


def calibration(p: np.ndarray, data: LineUps, bins: int = CALIBRATION_BINS) -> list[dict[str, Any]]:
    """Held-out predicted against observed mafia win rate, in bins of about equal games by prediction, with the
    observed rate's Wilson 95% interval."""
    ok = np.isfinite(p)
    p, n, w = p[ok], data.games[ok], data.wins[ok]
    if n.sum() == 0:
        return []
    order = np.argsort(p, kind="stable")
    cum = np.cumsum(n[order])
    which = np.minimum((bins * (cum - n[order] / 2) / cum[-1]).astype(int), bins - 1)
    out = []
    for k in np.unique(which):
        sel = order[which == k]
        games, wins = int(n[sel].sum()), int(w[sel].sum())
        low, high = _wilson(np.array([wins]), np.array([games]))
        out.append(
            {
                "bin": int(k) + 1,
                "games": games,
                "line_ups": len(sel),
                "predicted": float(np.sum(p[sel] * n[sel]) / games),
                "observed": wins / games,
                "observed_low": float(low[0]),
                "observed_high": float(high[0]),
            }
        )
    return out


def _wilson(wins: np.ndarray, games: np.ndarray, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of binomial proportions, vectorised (the formula scipy's binomtest uses)."""
    n = np.maximum(games.astype(float), 1.0)
    phat = wins / n
    centre = (phat + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * np.sqrt(phat * (1 - phat) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


# The dbt model the build counts games by line-up in (a summed model: an increment adds its games' counts), and its
# SQL, read from the packaged project where a warehouse has no such relation (a connection given only the marts).
LINE_UP_COUNTS = "int_line_up_counts"
LINE_UP_COUNTS_SQL = SQL_MODELS / "intermediate" / f"{LINE_UP_COUNTS}.sql"

PAIR_GAME_IDS_SQL = """
with sides as (
    -- A game's first and last model by name on each side: equal when one model held the side.
    select
        game_id,
        min(model) filter (where team = 'mafia') as mafia_model,
        max(model) filter (where team = 'mafia') as mafia_max,
        min(model) filter (where team = 'town') as town_model,
        max(model) filter (where team = 'town') as town_max
    from fct_player_games
    group by game_id
)

select g.study, s.mafia_model, s.town_model, list_sort(min(g.game_id, {ids})) as game_ids
from fct_games as g
inner join sides as s on s.game_id = g.game_id
where g.is_scored and s.mafia_model = s.mafia_max and s.town_model = s.town_max and s.mafia_model <> s.town_model
group by all
"""


LatentHeldOut = Callable[[LineUps], "np.ndarray | None"]


@dataclass(frozen=True)
class GameCounts:
    """What the leaderboard reads from the games, counted in DuckDB: games per category (`coverage`), self-play per
    model, rated games and mafia wins per distinct line-up (`line_ups`, keyed as `_parse` reads), the head-to-head
    cells' counts and first game ids (`pairs`) and each study's variant where all its rated games share one."""

    coverage: pl.DataFrame
    self_play: pl.DataFrame
    line_ups: pl.DataFrame
    pairs: pl.DataFrame
    variants: dict[str, str]


def game_counts(con: duckdb.DuckDBPyConnection) -> GameCounts:
    """The leaderboard's counts from the games counted by line-up (`int_line_up_counts`: a few hundred rows for a
    million games), and the first game ids of each head-to-head cell, where there is one (the only read of every
    seat: a cell's ids are not a count)."""
    counts, made = _line_up_counts(con)
    try:
        pairs = f"""select study, mafia_model, town_model, sum(games)::bigint as games, sum(wins)::bigint as mafia_wins
                    from {counts} where category = 'rated' and one_model_a_side group by all"""
        if con.execute(f"select count(*) from ({pairs})").fetchall()[0][0]:
            ids = PAIR_GAME_IDS_SQL.format(ids=GAME_IDS_PER_PAIR)
            pairs = f"""select c.*, i.game_ids from ({pairs}) as c
                        inner join ({ids}) as i using (study, mafia_model, town_model)"""
        else:
            pairs = f"select *, []::varchar[] as game_ids from ({pairs})"
        return GameCounts(
            coverage=con.sql(
                f"select study, category, sum(games)::bigint as games from {counts} group by all order by all"
            ).pl(),
            self_play=con.sql(
                f"""select study, mafia_model as model, sum(games)::bigint as games, sum(wins)::bigint as mafia_wins,
                           sum(wins)::double / sum(games) as mafia_win_rate
                    from {counts} where category = 'self_play' group by all order by all"""
            ).pl(),
            line_ups=con.sql(
                f"""select study, line_up, sum(games)::bigint as games, sum(wins)::bigint as wins
                    from {counts} where category = 'rated' group by all order by all"""
            ).pl(),
            pairs=con.sql(f"select * from ({pairs}) order by all").pl(),
            variants=dict(
                con.execute(
                    f"""select study, min(variant) from {counts} where category = 'rated' group by study
                    having count(distinct variant) = 1 and count(variant) = count(*)"""
                ).fetchall()
            ),
        )
    finally:
        if made:
            con.execute(f"drop table if exists {counts}")


def _line_up_counts(con: duckdb.DuckDBPyConnection) -> tuple[str, bool]:
    """The relation of the games' counts by line-up, and whether it was made here: the build's `int_line_up_counts`,
    or where the connection has none (marts given alone, as the tests and benchmarks give them) a temporary table of
    the same model's SQL over fct_games and fct_player_games (a missing `variant` column read as null)."""
    found = con.execute(
        "select count(*) from (select table_name as name from duckdb_tables() union all "
        "select view_name from duckdb_views()) where name = ?", [LINE_UP_COUNTS]
    ).fetchall()[0][0]
    if found:
        return LINE_UP_COUNTS, False
    has_variant = con.execute(
        "select count(*) from (describe fct_player_games) where column_name = 'variant'"
    ).fetchall()[0][0]
    refs = {"fct_games": "fct_games",
            "fct_player_games": "fct_player_games" if has_variant
            else "(select *, null::varchar as variant from fct_player_games)"}
    name = f"rating_line_ups_{uuid.uuid4().hex[:8]}"
    con.execute(f"create temp table {name} as {model_sql(LINE_UP_COUNTS_SQL, refs)}")
    return name, True


def rating_tables(
    con: duckdb.DuckDBPyConnection, *, latent: LatentHeldOut | None = None
) -> dict[str, pl.DataFrame]:
    """mart_ratings, mart_rating_fit, mart_rating_calibration, mart_head_to_head, mart_self_play and
    mart_rating_coverage, per study, from the games' counts per line-up (`game_counts`). `latent` gives a
    baseline's held-out predictions on the same folds (`fold_of`); by default the Mini-Mafia reference's latent
    model (`latent_held_out`), None where the design has none. A study's fits are kept in the user's cache under
    `rating_fit_key` (`fit_cache`, `rating-fits/`): a build whose line-up counts did not change does not refit."""
    counts = game_counts(con)
    ratings: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    bins: list[dict[str, Any]] = []
    code = _fit_code_key() if latent is None else {}
    for (study,), part in counts.line_ups.partition_by("study", as_dict=True, maintain_order=True).items():
        # A study whose line-up counts did not change since a build that fitted them reads that build's rows (the
        # same bytes; the default latent baseline only: its code is in the key).
        key = rating_fit_key(str(study), part, code) if latent is None else None
        cached = fit_cache.load("rating-fits", key, tuple) if key else None
        if cached is not None:
            r, f, b = cached
        else:
            data = from_counts(
                [_parse(k) for k in part["line_up"].to_list()], part["games"].to_numpy(), part["wins"].to_numpy()
            )
            r, f, b = study_ratings(str(study), data, latent=latent or latent_held_out)
            if key:
                fit_cache.store("rating-fits", key, (r, f, b))
        ratings += r
        fits += f
        bins += b
    return {
        "mart_ratings": pl.DataFrame(ratings, schema=RATING_SCHEMA),
        "mart_rating_fit": pl.DataFrame(fits, schema=FIT_SCHEMA),
        "mart_rating_calibration": pl.DataFrame(bins, schema=CALIBRATION_SCHEMA),
        "mart_head_to_head": head_to_head(counts.pairs, counts.variants),
        "mart_self_play": pl.DataFrame(counts.self_play.to_dicts(), schema=SELF_PLAY_SCHEMA),
        "mart_rating_coverage": pl.DataFrame(counts.coverage.to_dicts(), schema=COVERAGE_SCHEMA),
    }


def _fit_code_key() -> dict[str, str]:
    """The code a study's rating rows depend on: this module, the latent baseline's (transform.models.latent) and
    the numerical libraries."""
    return fit_cache.code_key({"ratings": __file__, "latent": Path(__file__).with_name("latent.py")},
                              ("numpy", "scipy"))


def rating_fit_key(study: str, line_ups: pl.DataFrame, code: dict[str, str]) -> str:
    """A study's fits' identity (issue 37 item 1): its line-up counts in order (`line_up`, `games`, `wins`, as
    `game_counts` gives them), the settings the fits read and the code (`_fit_code_key`)."""
    settings = {"side_prior_sd": SIDE_PRIOR_SD, "draws": DRAWS, "seed": SEED, "folds": FOLDS,
                "calibration_bins": CALIBRATION_BINS, "min_data_share": MIN_DATA_SHARE, "null_tol": NULL_TOL,
                "max_unset": MAX_UNSET}
    rows = [line_ups[c].to_list() for c in ("line_up", "games", "wins")]
    return fit_cache.key({"study": study, "line_ups": rows, "settings": settings, "code": code})


def _parse(key: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    mafia: list[tuple[str, str]] = []
    town: list[tuple[str, str]] = []
    for seat in key.split("\x1e"):
        team, role, model = seat.split("\x1f", 2)
        (mafia if team == "mafia" else town).append((role, model))
    return mafia, town


def study_ratings(
    study: str, data: LineUps, *, latent: LatentHeldOut | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """A study's rating rows (overall, by side and, where a side has special roles, by role), one fit row per fit
    (its design, dispersion and held-out scores beside the baselines) and the calibration bins of each fit."""
    rows: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    bins: list[dict[str, Any]] = []
    kinds = ["overall", "sides"] + (["roles"] if data.special_roles else [])
    latent_p = latent(data) if latent is not None else None
    for kind in kinds:
        post = fit(data, kind=kind)
        for b in post.blocks:
            rows += summarise(study, b.name, data, post, b.name)
        predicted, base = held_out(data, kind)
        log_loss, brier = scores(predicted, data)
        side_ll, side_brier = scores(base[:, 0], data)
        raw_ll, raw_brier = scores(base[:, 1], data)
        latent_ll, latent_brier = scores(latent_p, data) if latent_p is not None else (None, None)
        directions = unidentified_directions(post, data.models)
        fits.append(
            {
                "study": study,
                "fit": kind,
                "line_ups": len(data.games),
                "games": int(data.games.sum()),
                "parameters": len(post.theta),
                "design_rank": post.rank,
                "unidentified": len(post.theta) - post.rank,
                "unidentified_directions": " | ".join(directions) or None,
                "chi2": post.chi2,
                "df": post.df,
                "dispersion": post.dispersion,
                "dispersion_p": post.dispersion_p,
                "interval": post.interval,
                "folds": FOLDS,
                "log_loss": log_loss,
                "brier": brier,
                "log_loss_side": side_ll,
                "brier_side": side_brier,
                "log_loss_raw": raw_ll,
                "brier_raw": raw_brier,
                "log_loss_latent": latent_ll,
                "brier_latent": latent_brier,
                "side_advantage": float(post.theta[0]),
                "converged": post.converged,
            }
        )
        bins += [{"study": study, "fit": kind, **b} for b in calibration(predicted, data)]
    return rows, fits, bins


def head_to_head(pairs: pl.DataFrame, variants: dict[str, str]) -> pl.DataFrame:
    """Cells of games in which one model held every mafia seat and one other model every town seat: each such game
    counted once, in one cell; its mafia win rate with a Wilson 95% interval and, where the variant has one, the
    exact mafia win rate of random play (every seat voting at random) to read it against."""
    if pairs.height == 0:
        return pl.DataFrame(schema=HEAD_TO_HEAD_SCHEMA)
    games, wins = pairs["games"].to_numpy(), pairs["mafia_wins"].to_numpy()
    low, high = _wilson(wins, games)
    keys = set(
        zip(pairs["study"].to_list(), pairs["mafia_model"].to_list(), pairs["town_model"].to_list(), strict=True)
    )
    mirrored = [(s, t, m) in keys for s, m, t in keys_in_order(pairs)]
    random_play = [RANDOM_PLAY.get(variants.get(s, "")) for s in pairs["study"].to_list()]
    return (
        pairs.with_columns(
            mafia_win_rate=pl.col("mafia_wins") / pl.col("games"),
            ci_low=pl.Series(low),
            ci_high=pl.Series(high),
            mirrored=pl.Series(mirrored, dtype=pl.Boolean),
            random_play=pl.Series(random_play, dtype=pl.Float64),
        )
        .select(list(HEAD_TO_HEAD_SCHEMA))
        .cast(HEAD_TO_HEAD_SCHEMA)  # type: ignore[arg-type]
    )


def keys_in_order(pairs: pl.DataFrame) -> list[tuple[str, str, str]]:
    return list(
        zip(pairs["study"].to_list(), pairs["mafia_model"].to_list(), pairs["town_model"].to_list(), strict=True)
    )


def design_widths(data: LineUps, *, width: float = 0.5) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """What a planned design will rate, before it is played: per fit, side or role and model, the expected 95%
    interval width at zero strengths (every game's information p (1 - p) = 1/4, h = 0; the prior included) and the
    games the whole design needs for an interval of `width` (the data's part of the variance shrinks as 1 / games),
    and per fit the directions of the strengths it leaves unidentified. `data.wins` is not read."""
    rows: list[dict[str, Any]] = []
    unidentified: dict[str, list[str]] = {}
    total = float(data.games.sum())
    for kind in ["overall", "sides"] + (["roles"] if data.special_roles else []):
        blocks = _make_blocks(data, kind)
        design = _design(blocks, len(data.games))
        precision = np.full(design.shape[1], 1.0)
        precision[0] = 1.0 / SIDE_PRIOR_SD**2
        information = (design * (data.games / 4.0)[:, None]).T @ design
        cov = np.linalg.inv(information + np.diag(precision))
        data_cov = np.linalg.pinv(information, hermitian=True)
        post = Posterior(
            kind,
            blocks,
            np.zeros(design.shape[1]),
            cov,
            cov,
            information,
            True,
            0.0,
            0,
            _rank(information),
            "model",
            0,
            SEED,
        )
        unidentified[kind] = unidentified_directions(post, data.models)
        for b in blocks:
            s = rating_stats(post, b.name)
            start, _ = post.block(b.name)
            k = b.basis.shape[1]
            games, _ = _record(data, b.name)
            data_var = np.einsum("ij,jk,ik->i", b.basis, data_cov[start : start + k, start : start + k], b.basis)
            for i, model in enumerate(data.models):
                if not b.played[i] or k == 0:
                    continue
                ok = bool(s["identified"][i])
                rows.append(
                    {
                        "fit": kind,
                        "side": b.name,
                        "model": model,
                        "games": int(games[i]),
                        "width": 2 * Z95 * float(s["sd_model"][i]),
                        "identified": ok,
                        "data_share": float(s["data_share"][i]),
                        "games_for_width": math.ceil(total * (2 * Z95) ** 2 * float(data_var[i]) / width**2)
                        if ok
                        else None,
                    }
                )
    return rows, unidentified
