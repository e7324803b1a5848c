"""Marts that SQL does badly: the top-down latent ability model, exact baselines, the consistency t-test.

Each step reads finished SQL models, computes in numpy/scipy, and returns typed polars frames that the build writes
as tables (registered in `PYTHON_MODELS`). They run after dbt, as a post-step of the same build (`build.marts.stage`):
no SQL model reads them, several write two tables from one fit (a dbt Python model returns one), and the embedding
model of the coherence step is loaded once per build in this process.

The latent mart holds, by default, the model as the Mini-Mafia study fits it now, sampled by NUTS
(`transform.latent_nuts`: logit p = v_k (m_i - d_j), mean(m) = 0, mean(v) = 1); MAFIABENCH_LATENT_METHOD=map selects
the fast point estimate below, each row saying which it holds (`method`). The cross-validated Brier score always
refits the point estimate.

The point estimate (metrics.md §2): logit P(mafia wins | mafioso i, detective j, villager k) = c_k (a_i - b_j), with
a_i the deceive, b_j the disclose and c_k = exp(g_k) the detect ability. It is identified up to a common shift of
a and b and a scale traded between c and (a - b); we fix sum(a) + sum(b) = 0 and sum(g) = 0 (geometric mean of c
is 1) by optimising in the null space of those constraints. Games are aggregated to (i, j, k) cells first, so the
fit costs the same for a hundred games or a million. The fit is a penalised maximum likelihood: weakly
informative priors N(0, 2.5^2) on a and b and N(0, 1) on log c (the posterior mode of that Bayesian model), so a
model that won or lost every game it played in a role stays finite (the near-flat ridge this replaced let such a
model's estimate run to +-15 and, through the constraint, gave every other model a standard error of 3 to 90).
Intervals are Laplace (inverse Hessian of the penalised negative log-likelihood in the constrained space); on
synthetic designs like the published one their 95% intervals cover
the true parameters 95% of the time (tests/test_marts_latent.py, benchmarks/bench_latent_coverage.py). A model that
won or lost every game it played in a role, or whose sd stays above `MAX_SE` (seen in too few cells to be placed
against the others), is reported as not identified, without an interval: its estimate is the prior's, not the
data's.
The fit is per study and prompt version: a model must meet the others within one experiment to be placed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import polars as pl
from scipy import linalg, optimize, stats

from mafiabench.errors import UserError
from mafiabench.transform.coherence import coherence_tables
from mafiabench.transform.detector_marts import detector_tables, transcript_tables
from mafiabench.transform.ratings import rating_tables

Z95 = 1.959963984540054
DEFAULT_RIDGE = 1e-3  # kept for callers; the priors below are what keeps the fit finite
PRIOR_SD_AB = 2.5  # logit units: a 12-to-1 odds swing per unit of ability difference is already extreme
PRIOR_SD_G = 1.0  # log c: a villager scaling the game's decisiveness by e^+-2 at the 95% level
MAX_SE = 1.5  # logit units: an interval wider than about +-3 ranks nothing: the parameter is "not identified"


# -- latent ability model ---------------------------------------------------------------------------------------


@dataclass
class LatentFit:
    mafiosos: list[str]
    detectives: list[str]
    villagers: list[str]
    a: np.ndarray
    b: np.ndarray
    g: np.ndarray  # log c
    cov: np.ndarray  # covariance of (a, b, g)
    log_likelihood: float
    converged: bool
    iterations: int
    n_games: int
    n_cells: int
    # Per parameter (a, b, g order): the model won every game it played in that role, or lost every one.
    separated: np.ndarray | None = None

    @property
    def c(self) -> np.ndarray:
        return np.exp(self.g)

    @property
    def theta(self) -> np.ndarray:
        return np.concatenate([self.a, self.b, self.g])

    def se(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.cov), 0.0, None))

    def identified(self) -> np.ndarray:
        """Per parameter (a, b, g order): placed by the data. Not identified: the model won or lost every game it
        played in that role (the likelihood only says "more than any finite value"; the prior holds the estimate),
        or its Laplace sd exceeds `MAX_SE` (seen in too few cells to be separated from the others)."""
        var = np.diag(self.cov)
        ok = np.isfinite(var) & (np.sqrt(np.clip(var, 0.0, None)) <= MAX_SE)
        return ok if self.separated is None else ok & ~self.separated

    def predict(
        self, mafioso: Sequence[str] | pl.Series, detective: Sequence[str] | pl.Series,
        villager: Sequence[str] | pl.Series,
    ) -> np.ndarray:
        """P(mafia wins); a model unseen in a role gets the neutral value (a = b = 0, c = 1)."""
        a = _lookup(self.mafiosos, self.a, mafioso)
        b = _lookup(self.detectives, self.b, detective)
        g = _lookup(self.villagers, self.g, villager)
        return _sigmoid(np.exp(g) * (a - b))


def _lookup(names: list[str], values: np.ndarray, keys: Sequence[str] | pl.Series) -> np.ndarray:
    known = pl.Series(names, dtype=pl.Utf8)
    series = pl.Series(keys, dtype=pl.Utf8)
    # A join-like replace in polars: per-key dict lookups in Python cost seconds per fold at a million games.
    return series.replace_strict(known, pl.Series(values, dtype=pl.Float64), default=0.0).to_numpy()


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _codes(values: Sequence[str] | pl.Series) -> tuple[list[str], np.ndarray]:
    """Sorted distinct names and each value's index among them (polars sorts strings by code point, as `sorted`)."""
    series = pl.Series(values, dtype=pl.Utf8)
    names = series.unique().sort().to_list()
    return names, series.cast(pl.Enum(names)).to_physical().to_numpy().astype(np.int64)


def fit_latent(
    mafioso: Sequence[str] | pl.Series,
    detective: Sequence[str] | pl.Series,
    villager: Sequence[str] | pl.Series,
    mafia_won: Sequence[bool] | np.ndarray,
    *,
    ridge: float = DEFAULT_RIDGE,
) -> LatentFit:
    """Maximum-likelihood fit of logit P(mafia wins) = c_k (a_i - b_j) on per-game outcomes."""
    y = np.asarray(mafia_won, dtype=float)
    if len(y) == 0:
        raise ValueError("no games to fit")
    return _fit_coded(_codes(mafioso), _codes(detective), _codes(villager), y, ridge=ridge)


Coded = tuple[list[str], np.ndarray]  # sorted distinct names, and each game's index among them (`_codes`)


def _present(coded: Coded, rows: np.ndarray) -> tuple[Coded, np.ndarray]:
    """The names of the games in `rows` coded as `_codes` would code them (only the names they use, still sorted),
    and where each of the full list's names went (-1: not in these games). Counting, not sorting: `_codes` of a
    fold's million strings was 40% of the cross-validation's time."""
    names, codes = coded
    used = np.bincount(codes[rows], minlength=len(names)) > 0
    where = np.where(used, np.cumsum(used) - 1, -1)
    return ([n for n, u in zip(names, used, strict=True) if u], where[codes[rows]]), where


def _fitted_values(values: np.ndarray, where: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Each game's parameter from a fold's fit: its model's value (`where` from `_present`), or the neutral 0 for a
    model the fold's training games did not have (a = b = 0, c = 1), as `LatentFit.predict` gives it."""
    return np.append(values, 0.0)[where[codes]]  # where = -1 picks the appended 0


def _fit_coded(mafioso: Coded, detective: Coded, villager: Coded, y: np.ndarray, *, ridge: float) -> LatentFit:
    (mnames, mi), (dnames, dj), (vnames, vk) = mafioso, detective, villager
    nm, nd, nv = len(mnames), len(dnames), len(vnames)
    # Aggregate games into (i, j, k) cells: n games, w mafia wins.
    key = (mi * nd + dj) * nv + vk
    # The key space is small (models per role cubed): counting into it beats sorting a million keys.
    size = nm * nd * nv
    counts = np.bincount(key, minlength=size)
    cells = np.flatnonzero(counts)
    n = counts[cells].astype(float)
    w = np.bincount(key, weights=y, minlength=size)[cells]
    ci = cells // (nd * nv)
    cj = (cells // nv) % nd
    ck = cells % nv
    p = nm + nd + nv
    # Constraints: sum(a) + sum(b) = 0, sum(g) = 0; optimise theta = Z @ phi in their null space.
    constraints = np.zeros((2, p))
    constraints[0, : nm + nd] = 1.0
    constraints[1, nm + nd :] = 1.0
    basis = linalg.null_space(constraints)

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return theta[:nm], theta[nm : nm + nd], theta[nm + nd :]

    # Prior precisions (plus the caller's ridge).
    prec = np.r_[np.full(nm + nd, PRIOR_SD_AB**-2), np.full(nv, PRIOR_SD_G**-2)] + ridge

    def objective(phi: np.ndarray) -> tuple[float, np.ndarray]:
        theta = basis @ phi
        a, b, g = unpack(theta)
        c = np.exp(g[ck])
        diff = a[ci] - b[cj]
        eta = c * diff
        # -loglik = sum n log(1 + e^eta) - w eta, computed stably.
        nll = float(np.sum(n * np.logaddexp(0.0, eta) - w * eta)) + 0.5 * float(theta @ (prec * theta))
        resid = n * _sigmoid(eta) - w  # d nll / d eta
        grad = np.zeros(p)
        np.add.at(grad, ci, resid * c)
        np.add.at(grad, nm + cj, -resid * c)
        np.add.at(grad, nm + nd + ck, resid * eta)
        grad += prec * theta
        return nll, basis.T @ grad

    x0 = np.zeros(basis.shape[1])
    res = optimize.minimize(objective, x0, jac=True, method="BFGS", options={"gtol": 1e-8, "maxiter": 2000})
    phi = res.x
    hess = _numeric_hessian(lambda v: objective(v)[1], phi)
    try:
        cov_phi = np.linalg.inv(hess)
    except np.linalg.LinAlgError:
        cov_phi = np.linalg.pinv(hess)
    cov = basis @ cov_phi @ basis.T
    theta = basis @ phi
    a, b, g = unpack(theta)
    nll = objective(phi)[0] - 0.5 * float(theta @ (prec * theta))
    # A role-model whose games were all won or all lost (by the mafia): the data bound it on one side only.
    separated = np.zeros(p, dtype=bool)
    for offset, index, size in ((0, ci, nm), (nm, cj, nd)):
        games = np.bincount(index, weights=n, minlength=size)
        wins = np.bincount(index, weights=w, minlength=size)
        separated[offset : offset + size] = (wins == 0) | (wins == games)
    # A villager's scale is placed by how decisive its games were; all of them one-sided says nothing.
    games_k = np.bincount(ck, weights=n, minlength=nv)
    wins_k = np.bincount(ck, weights=w, minlength=nv)
    separated[nm + nd :] = ((wins_k == 0) | (wins_k == games_k)) & (nv > 1)
    return LatentFit(
        mafiosos=mnames,
        detectives=dnames,
        villagers=vnames,
        a=a,
        b=b,
        g=g,
        cov=cov,
        log_likelihood=-nll,
        # BFGS often stops on "precision loss" at the optimum of a sum of many terms: a vanishing gradient is
        # what convergence means here.
        converged=bool(res.success or np.max(np.abs(res.jac), initial=0.0) < 1e-4),
        iterations=int(res.nit),
        n_games=len(y),
        n_cells=len(cells),
        separated=separated,
    )


def _numeric_hessian(grad: Any, x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    k = len(x)
    h = np.zeros((k, k))
    for i in range(k):
        step = np.zeros(k)
        step[i] = eps
        h[:, i] = (grad(x + step) - grad(x - step)) / (2 * eps)
    return 0.5 * (h + h.T)


def cross_validated_brier(
    mafioso: Sequence[str] | pl.Series,
    detective: Sequence[str] | pl.Series,
    villager: Sequence[str] | pl.Series,
    mafia_won: Sequence[bool] | np.ndarray,
    *,
    folds: int = 5,
    seed: int = 0,
    ridge: float = DEFAULT_RIDGE,
) -> tuple[float, float]:
    """(Brier of the latent model, Brier of a constant rate), both on held-out games of a k-fold split."""
    y = np.asarray(mafia_won, dtype=float)
    # Coded once: each fold's fit and prediction work on the codes (the same fits as from the names).
    roles = [_codes(x) for x in (mafioso, detective, villager)]
    n = len(y)
    order = np.random.default_rng(seed).permutation(n)
    fold_of = np.empty(n, dtype=np.int64)
    fold_of[order] = np.arange(n) % folds
    model_sq = 0.0
    const_sq = 0.0
    for f in range(folds):
        test = fold_of == f
        train = ~test
        if not test.any() or not train.any():
            continue
        (m, where_m), (d, where_d), (v, where_v) = (_present(r, train) for r in roles)
        fit = _fit_coded(m, d, v, y[train], ridge=ridge)
        a = _fitted_values(fit.a, where_m, roles[0][1][test])
        b = _fitted_values(fit.b, where_d, roles[1][1][test])
        g = _fitted_values(fit.g, where_v, roles[2][1][test])
        pred = _sigmoid(np.exp(g) * (a - b))
        model_sq += float(np.sum((pred - y[test]) ** 2))
        const_sq += float(np.sum((y[train].mean() - y[test]) ** 2))
    return model_sq / n, const_sq / n


LATENT_ABILITIES_SCHEMA = {
    "study": pl.Utf8,
    "prompt_version": pl.Utf8,
    "variant": pl.Utf8,
    "method": pl.Utf8,
    "model": pl.Utf8,
    "ability": pl.Utf8,
    "role": pl.Utf8,
    "parameter": pl.Utf8,
    "estimate": pl.Float64,
    "se": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "n_games": pl.Int64,
    "identified": pl.Boolean,
    "r_hat": pl.Float64,
    "ess": pl.Float64,
    "converged": pl.Boolean,
    "note": pl.Utf8,
}

LATENT_FIT_SCHEMA = {
    "study": pl.Utf8,
    "prompt_version": pl.Utf8,
    "variant": pl.Utf8,
    "method": pl.Utf8,
    "n_games": pl.Int64,
    "n_cells": pl.Int64,
    "n_mafioso_models": pl.Int64,
    "n_detective_models": pl.Int64,
    "n_villager_models": pl.Int64,
    "log_likelihood": pl.Float64,
    "converged": pl.Boolean,
    "chains": pl.Int64,
    "draws": pl.Int64,
    "divergences": pl.Int64,
    "max_r_hat": pl.Float64,
    "min_ess": pl.Float64,
    "scale": pl.Float64,
    "n_not_identified": pl.Int64,
    "iterations": pl.Int64,
    "ridge": pl.Float64,
    "cv_folds": pl.Int64,
    "brier_model": pl.Float64,
    "brier_constant": pl.Float64,
    "brier_gain": pl.Float64,
    "brier_skill": pl.Float64,
}


LATENT_METHODS = ("nuts", "map")
LATENT_METHOD_ENV = "MAFIABENCH_LATENT_METHOD"
ROLE_OF_ABILITY = {"deceive": ("mafioso", "m"), "disclose": ("detective", "d"), "detect": ("villager", "v")}


def latent_method() -> str:
    """The fit the latent mart holds: `nuts` (the reference's Bayesian model, `transform.latent_nuts`) unless
    MAFIABENCH_LATENT_METHOD=map asks for the fast point estimate above (its own priors and constraints)."""
    value = os.environ.get(LATENT_METHOD_ENV, "nuts").strip().lower()
    if value not in LATENT_METHODS:
        raise UserError(f"environment variable {LATENT_METHOD_ENV}: expected one of {list(LATENT_METHODS)}, "
                        f"got {value!r}")
    return value


def latent_tables(
    con: duckdb.DuckDBPyConnection, *, folds: int = 5, ridge: float = DEFAULT_RIDGE, method: str | None = None
) -> dict[str, pl.DataFrame]:
    """Fit the latent model per study and prompt version on scored Mini-Mafia games with a scripted night (one
    model per role): games under another prompt version are another experiment, as in the capability marts. Each
    row says which fit it holds (`method`); the cross-validated Brier score refits the point estimate per fold."""
    method = method or latent_method()
    games = con.sql(
        """select study, prompt_version, mafioso_model, detective_model, villager_model, mafia_won
           from fct_games
           where variant = 'mini-mafia' and is_scored and coalesce(night_mode, 'scripted') = 'scripted'
             and mafioso_model is not null and detective_model is not null and villager_model is not null
           order by study, prompt_version, game_id"""
    ).pl()
    abilities: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    for (study, version), part in games.group_by(["study", "prompt_version"], maintain_order=True):
        m, d, v = part["mafioso_model"], part["detective_model"], part["villager_model"]
        y = part["mafia_won"].to_numpy().astype(float)
        games_by = {role: dict(part.group_by(f"{role}_model").len().rows())
                    for role in ("mafioso", "detective", "villager")}
        if method == "nuts":
            rows, fit_row = _nuts_rows(study, version, part, games_by)
        else:
            rows, fit_row = _map_rows(study, version, m, d, v, y, games_by, ridge)
        abilities += rows
        brier_model, brier_const = (math.nan, math.nan)
        if len(y) >= folds:
            brier_model, brier_const = cross_validated_brier(m, d, v, y, folds=folds, ridge=ridge)
        fits.append(
            {
                "study": study,
                "prompt_version": version,
                "variant": "mini-mafia",
                "method": method,
                **fit_row,
                "n_mafioso_models": len(games_by["mafioso"]),
                "n_detective_models": len(games_by["detective"]),
                "n_villager_models": len(games_by["villager"]),
                "n_not_identified": sum(1 for r in rows if not r["identified"]),
                "ridge": ridge,
                "cv_folds": folds,
                "brier_model": brier_model,
                "brier_constant": brier_const,
                "brier_gain": brier_const - brier_model,
                "brier_skill": 1 - brier_model / brier_const if brier_const and brier_const > 0 else math.nan,
            }
        )
    return {
        "mart_latent_abilities": pl.DataFrame(abilities, schema=LATENT_ABILITIES_SCHEMA, orient="row"),
        "mart_latent_fit": pl.DataFrame(fits, schema=LATENT_FIT_SCHEMA, orient="row"),
    }


def _one_sided(part: pl.DataFrame, role: str) -> set[str]:
    """Models whose every game in `role` ended the same way (the data bound them on one side only)."""
    by = part.group_by(f"{role}_model").agg(pl.col("mafia_won").sum().alias("w"), pl.len().alias("n"))
    return {r[0] for r in by.filter((pl.col("w") == 0) | (pl.col("w") == pl.col("n"))).rows()}


def _nuts_rows(
    study: str, version: str | None, part: pl.DataFrame, games_by: Mapping[str, Mapping[str, int]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from mafiabench.transform.latent_nuts import MAX_R_HAT, MIN_ESS, fit_latent_nuts

    cells = part.group_by(["mafioso_model", "villager_model", "detective_model"]).agg(
        pl.len().alias("n"), pl.col("mafia_won").sum().alias("w")).sort(["mafioso_model", "villager_model",
                                                                          "detective_model"])
    fit = fit_latent_nuts([(mi, vk, dj, int(n), int(w)) for mi, vk, dj, n, w in cells.rows()])
    one_sided = {role: _one_sided(part, role) for role in ("mafioso", "detective", "villager")}
    # A villager scale is placed by how decisive its games were; with a single villager model it is the scale.
    if len(games_by["villager"]) == 1:
        one_sided["villager"] = set()
    rows: list[dict[str, Any]] = []
    for ability, (role, parameter) in ROLE_OF_ABILITY.items():
        for i, name in enumerate(fit.models[parameter]):
            games = int(games_by[role].get(name, 0))
            sd, r_hat, ess = float(fit.sd[parameter][i]), float(fit.r_hat[parameter][i]), float(fit.ess[parameter][i])
            converged = r_hat <= MAX_R_HAT and ess >= MIN_ESS
            notes = []
            if name in one_sided[role]:
                notes.append(_not_identified(sd, games, True, role))
            elif sd > MAX_SE:
                notes.append(_not_identified(sd, games, False, role))
            identified = not notes
            if not converged:
                notes.append(f"sampling did not converge: R-hat {r_hat:.3f} (at most {MAX_R_HAT}), effective "
                             f"sample size {ess:.0f} (at least {MIN_ESS})")
            rows.append({
                "study": study, "prompt_version": version, "variant": "mini-mafia", "method": "nuts",
                "model": name, "ability": ability, "role": role, "parameter": parameter,
                "estimate": float(fit.estimate[parameter][i]), "se": sd,
                "ci_low": float(fit.ci_low[parameter][i]) if identified else None,
                "ci_high": float(fit.ci_high[parameter][i]) if identified else None,
                "n_games": games, "identified": identified, "r_hat": r_hat, "ess": ess, "converged": converged,
                "note": "; ".join(notes) or None,
            })
    # The log-likelihood at the posterior means: v (m - d) = c (a - b) draw by draw, whatever the normalisation.
    mi, vk, dj, n, w = (np.array(c) for c in zip(*cells.rows(), strict=True))
    est = {k: dict(zip(fit.models[k], fit.estimate[k], strict=True)) for k in ("m", "d", "v")}
    eta = np.array([est["v"][k] * (est["m"][i] - est["d"][j]) for i, k, j in zip(mi, vk, dj, strict=True)])
    fit_row = {
        "n_games": fit.n_games, "n_cells": fit.n_cells,
        "log_likelihood": float(np.sum(w * eta - n * np.logaddexp(0.0, eta))),
        "converged": fit.converged, "chains": fit.chains, "draws": fit.n_draws, "divergences": fit.divergences,
        "max_r_hat": fit.max_r_hat, "min_ess": fit.min_ess, "scale": fit.scale, "iterations": None,
    }
    return rows, fit_row


def _map_rows(
    study: str, version: str | None, m: pl.Series, d: pl.Series, v: pl.Series, y: np.ndarray,
    games_by: Mapping[str, Mapping[str, int]], ridge: float,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    fit = fit_latent(m, d, v, y, ridge=ridge)
    se = fit.se()
    ok = fit.identified()
    sep = fit.separated if fit.separated is not None else np.zeros(len(ok), dtype=bool)
    nm, nd = len(fit.mafiosos), len(fit.detectives)
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(fit.mafiosos):
        rows.append(_ability(study, version, name, "deceive", "mafioso", "a", fit.a[i], se[i], games_by,
                             bool(ok[i]), bool(sep[i])))
    for j, name in enumerate(fit.detectives):
        rows.append(_ability(study, version, name, "disclose", "detective", "b", fit.b[j], se[nm + j],
                             games_by, bool(ok[nm + j]), bool(sep[nm + j])))
    for k, name in enumerate(fit.villagers):
        g, s, known = fit.g[k], se[nm + nd + k], bool(ok[nm + nd + k])
        rows.append(
            {
                "study": study,
                "prompt_version": version,
                "variant": "mini-mafia",
                "method": "map",
                "model": name,
                "ability": "detect",
                "role": "villager",
                "parameter": "c",
                "estimate": math.exp(g),
                "se": math.exp(g) * s,  # delta method
                "ci_low": math.exp(g - Z95 * s) if known else None,
                "ci_high": math.exp(g + Z95 * s) if known else None,
                "n_games": games_by["villager"].get(name, 0),
                "identified": known,
                "r_hat": None,
                "ess": None,
                "converged": fit.converged,
                "note": None if known else _not_identified(
                    s, games_by["villager"].get(name, 0), bool(sep[nm + nd + k]), "villager"),
            }
        )
    for r in rows:
        r["converged"] = fit.converged
    fit_row = {
        "n_games": fit.n_games, "n_cells": fit.n_cells, "log_likelihood": fit.log_likelihood,
        "converged": fit.converged, "chains": None, "draws": None, "divergences": None, "max_r_hat": None,
        "min_ess": None, "scale": None, "iterations": fit.iterations,
    }
    return rows, fit_row


def _not_identified(se: float, games: int, separated: bool, role: str) -> str:
    if separated:
        return (f"not identified: every one of its {games} games as {role} ended the same way, so the data only "
                "bound it on one side; the estimate is the prior's")
    sd = f"{se:.1f}" if math.isfinite(se) else "infinite"
    return (f"not identified: sd {sd} on the logit scale from {games} games (more than {MAX_SE}): the model is "
            "seen in too few cells to be placed against the others")


def _ability(
    study: str, version: str | None, name: str, ability: str, role: str, parameter: str, est: float, se: float,
    games_by: Mapping[str, Mapping[str, int]], identified: bool, separated: bool,
) -> dict[str, Any]:
    return {
        "study": study,
        "prompt_version": version,
        "variant": "mini-mafia",
        "method": "map",
        "model": name,
        "ability": ability,
        "role": role,
        "parameter": parameter,
        "estimate": float(est),
        "se": float(se),
        "ci_low": float(est - Z95 * se) if identified else None,
        "ci_high": float(est + Z95 * se) if identified else None,
        "n_games": int(games_by[role].get(name, 0)),
        "identified": identified,
        "r_hat": None,
        "ess": None,
        "converged": None,
        "note": None if identified else _not_identified(se, int(games_by[role].get(name, 0)), separated, role),
    }


# -- exact baselines ----------------------------------------------------------------------------------------------

BASELINES_SCHEMA = {
    "case": pl.Utf8,
    "description": pl.Utf8,
    "night": pl.Utf8,
    "town_win_fraction": pl.Utf8,
    "town_win_probability": pl.Float64,
    "mafia_win_fraction": pl.Utf8,
    "mafia_win_probability": pl.Float64,
    "town_win_after_tie": pl.Float64,
    "source": pl.Utf8,
}


def _fraction(value: Any) -> Fraction:
    return Fraction(value).limit_denominator(10**12) if isinstance(value, float) else Fraction(value)


def baseline_rows() -> list[dict[str, Any]]:
    """Rows of `transform.baselines.baseline_table()`: exact fractions kept as "a/b" text beside their floats.

    Reads the keys that function returns (`profile`, `description`, `night`, `town_win_fraction`,
    `town_win_after_tie`).
    """
    from mafiabench.transform.baselines import baseline_table

    rows: list[dict[str, Any]] = []
    for item in baseline_table():
        town = _fraction(item.get("town_win_fraction", item.get("town_win")))
        after_tie = item.get("town_win_after_tie")
        rows.append(
            {
                "case": str(item.get("profile") or item.get("case")),
                "description": None if item.get("description") is None else str(item["description"]),
                "night": None if item.get("night") is None else str(item["night"]),
                "town_win_fraction": f"{town.numerator}/{town.denominator}",
                "town_win_probability": float(town),
                "mafia_win_fraction": f"{(1 - town).numerator}/{(1 - town).denominator}",
                "mafia_win_probability": float(1 - town),
                "town_win_after_tie": None if after_tie is None else float(_fraction(after_tie)),
                "source": "mafiabench.transform.baselines",
            }
        )
    return rows


def baseline_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    return {"mart_baselines": pl.DataFrame(baseline_rows(), schema=BASELINES_SCHEMA, orient="row")}


# -- strategic consistency t-tests --------------------------------------------------------------------------------

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


# -- registry -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PythonModel:
    """A step the build runs after dbt (`build.marts.stage`): reads finished models, writes `outputs` as tables."""

    name: str
    layer: str
    kind: str
    grain: str
    purpose: str
    materialized: str
    outputs: tuple[str, ...]
    run: Callable[[duckdb.DuckDBPyConnection], Mapping[str, pl.DataFrame]]
    depends_on: tuple[str, ...] = ()

    @property
    def tables(self) -> tuple[str, ...]:
        return self.outputs


PYTHON_MODELS: list[PythonModel] = [
    PythonModel(
        name="mart_latent",
        layer="marts",
        kind="python",
        grain="mart_latent_abilities: one row per (study, prompt version, model, ability); mart_latent_fit: one row "
              "per (study, prompt version)",
        purpose="top-down latent abilities as the Mini-Mafia study fits them (logit P(mafia wins) = v_k (m_i - d_j), "
                "NUTS, mean(m) = 0, mean(v) = 1, R-hat and ESS per parameter; or the fast point estimate as a "
                "labelled fallback), with an `identified` flag, and the 5-fold cross-validated Brier gain over a "
                "constant rate",
        materialized="table",
        depends_on=("fct_games",),
        outputs=("mart_latent_abilities", "mart_latent_fit"),
        run=latent_tables,
    ),
    PythonModel(
        name="mart_baselines",
        layer="marts",
        kind="python",
        grain="one row per analytic baseline case",
        purpose="exact win probabilities of scripted policies (build.baselines): the no-skill reference lines",
        materialized="table",
        outputs=("mart_baselines",),
        run=baseline_tables,
    ),
    PythonModel(
        name="mart_consistency_tests",
        layer="marts",
        kind="python",
        grain="one row per (study, comparison, unit)",
        purpose="strategic consistency C_i of winners against losers on a study's main configurations (Strategema "
        "section 4.5): pooled two-sample t-tests (scipy) of mean JSD over every player, over games (the mafia "
        "team's mean, the unit of the paper's t(398) for 400 games), and over mafiosos only",
        materialized="table",
        depends_on=("mart_strategic_consistency", "mart_classic_games"),
        outputs=("mart_consistency_tests",),
        run=consistency_tests,
    ),
    PythonModel(
        name="mart_coherence",
        layer="marts",
        kind="python",
        grain="mart_semantic_coherence: one row per (game, mafioso) with public statements; "
        "mart_coherence_summary: one row per study",
        purpose="semantic coherence (mean pairwise cosine similarity of all-MiniLM-L6-v2 embeddings of a mafioso's "
        "statements), its Pearson r (and p) with the deception score, and mean deception ± sd for coherence > 0.8 "
        "and < 0.5, per study over its main configurations",
        materialized="table",
        depends_on=("mart_deception_scores", "mart_classic_games", "stg_events"),
        outputs=("mart_semantic_coherence", "mart_coherence_summary"),
        run=coherence_tables,
    ),
    PythonModel(
        name="mart_detector",
        layer="marts",
        kind="python",
        grain="mart_detections: one row per (game, day cut, detector, prompt sha256); mart_detector_accuracy: one row "
        "per (detector, prompt sha256, source, study, scope, day); mart_detector_tables: one row per (detector, "
        "prompt sha256, source, study, row); mart_detector_datasets: one row per (source, study)",
        purpose="Mafia Detector accuracy (Hidden in Plain Text, section III): single-match and exact-match per game "
        "and cut; averages per source and day with the number of games and Wilson 95% intervals, beside the exact "
        "random baseline 1 - C(n-k,k)/C(n,k) and 1/C(n,k) averaged over the same games; Tables I-III of Hidden in "
        "Plain Text as printed (transform.detector_marts)",
        materialized="table",
        depends_on=("raw_detections", "raw_games", "raw_players", "raw_events"),
        outputs=("mart_detections", "mart_detector_accuracy", "mart_detector_tables", "mart_detector_datasets"),
        run=detector_tables,
    ),
    PythonModel(
        name="mart_detector_transcripts",
        layer="marts",
        kind="python",
        grain="one row per (game, line) of the cleansed transcript the detector read at the game's last cut",
        purpose="what the Mafia Detector read (public day messages, votes, eliminations; roles redacted), for the "
        "dashboards' cleansed-transcript pages",
        materialized="table",
        depends_on=("raw_detection_transcripts",),
        outputs=("mart_detector_transcripts",),
        run=transcript_tables,
    ),
    PythonModel(
        name="mart_ratings",
        layer="marts",
        kind="python",
        grain="mart_ratings: one row per (study, side, model); mart_head_to_head: one row per (study, model on the "
        "mafia side, model on the town side); mart_self_play: one row per (study, model); mart_rating_coverage: one "
        "row per (study, category of game)",
        purpose="the leaderboard (transform.ratings): Bradley-Terry skill ratings in team form, as mafia, as town "
        "and overall, with 95% intervals and rank intervals; scored games only, self-play shown apart, the rest "
        "counted",
        materialized="table",
        depends_on=("fct_games", "fct_player_games"),
        outputs=("mart_ratings", "mart_head_to_head", "mart_self_play", "mart_rating_coverage"),
        run=rating_tables,
    ),
]
