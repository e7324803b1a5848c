"""The top-down latent ability model of Mini-Mafia (metrics.md §2), whole: the mart (`latent_tables`), the fast
point estimate, and the Mini-Mafia study's own model sampled by NUTS.

It runs after dbt, as a Python model of the same build (registered in `transform.models.PYTHON_MODELS`, staged by
`transform.build.marts.stage`): it reads `fct_games`, fits in numpy/scipy (or NumPyro) and returns typed polars
frames, two tables from one fit (a dbt Python model returns one).

The latent mart holds, by default, the model as the Mini-Mafia study fits it now, sampled by NUTS (the second half
of this module: logit p = v_k (m_i - d_j), mean(m) = 0, mean(v) = 1); MAFIABENCH_LATENT_METHOD=map selects the fast
point estimate, each row saying which it holds (`method`). The cross-validated Brier score always refits the point
estimate.

The point estimate: logit P(mafia wins | mafioso i, detective j, villager k) = c_k (a_i - b_j), with
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
data's. So is, in either method, a parameter the design itself does not determine (`undetermined`: other values
fit its games exactly as well, e.g. a person who played only against a model no other game saw), however narrow
its prior makes its sd; the NUTS fit's normalisation leaves such models out of its means, and the point
estimate's constraints out of their sums.
The fit is per study and prompt version: a model must meet the others within one experiment to be placed.

Intervals when the model is wrong. Either fit's intervals assume the cells scatter binomially about the model; real
line-ups scatter more (the published 140 cells: Pearson chi-square / df = 2.53 on 112 df). `dispersion` measures it
over the cells, and the mart shows each interval widened by sqrt(phi) t_df / z where phi > 1 (quasi-likelihood,
`widening.widened`), the model's own beside it (`model_low`, `model_high`): an addition to the study's protocol,
counted as a deviation on its protocol card (statistics.latent_interval). Simulated with line-up effects the model
has no term for (sd 0.3-0.5 on a cell's logit), the widened intervals hold the truth 0.94-0.99 of the time where the
model's own hold it 0.58-0.93 (tests/transform/test_latent_dispersion.py, BENCHMARKS.md).

The NUTS fit (`fit_latent_nuts`), the Mini-Mafia reference's model by full Bayesian sampling (NumPyro NUTS).

The reference (`mini-mafia-benchmark/analysis/top_down_theoretical/scores_theoretical_model.py` of
bastoscostadavi/llm-mafia-game, commit "added shift symmetry and fixed E[m]=0"): one deceive (a), disclose (b) and
detect (c) parameter per model (every model of the published design plays every role; here a model has the
parameters of the roles it played, see `fit_latent_nuts`), priors
a, b, c ~ Normal(0, 2), c allowed negative, the sign flip excluded by requiring sum(c) > 0, and

    mafia wins in a (mafioso i, villager k, detective j) cell ~ Binomial(n, logit p = c_k (a_i - b_j)).

Its published estimates are then normalised as the reference does: each draw's a and b are shifted by that draw's
mean(a) (mean(m) = 0), and all draws are scaled by lambda = mean over models of the posterior mean of c (m = a
lambda, d = b lambda, v = c / lambda, so mean(v) = 1). Both means are over the models the design places (every
model of the reference's designs): a prior-drawn parameter in them would move every model's estimate and widen
its sd (one cell of three unseen models beside three placed ones moved their estimates by 9-29 Monte Carlo
errors: tests/transform/test_latent_undetermined.py). The estimate is the posterior mean, its uncertainty the
posterior sd (`estimate`, `se`: the published `Deceive`, `Deceive_Error`, ... columns), with a central 95% credible
interval beside them, and per parameter the split R-hat and effective sample size of its normalised draws
(`numpyro.diagnostics`). A fit whose largest R-hat exceeds `MAX_R_HAT` or smallest ESS is under `MIN_ESS` is flagged
as not converged, never silently trusted.

NUTS adapts a dense mass matrix (the shift a, b -> a + t, b + t is a straight ridge of the posterior it removes:
the bulk ESS doubles against a diagonal one at the same cost). The scale traded between c and a - b is a curved
ridge no mass matrix removes. So each separate part of the design (`components`: models who meet only each other)
is sampled apart, the posterior being their product, and on a part that places all its own parameters NUTS moves in
coordinates that separate the shift and scale from the shape the data set (`_sampler`, `gauge`: the same posterior,
by a change of variables with its Jacobian): on the published design without divergences and with six times the
effective sample size per draw. The likelihood is
written as a factor, sum of w eta - n log(1 + e^eta): the binomial's log-normaliser is a constant, so the posterior
is the reference's. Cells and models are padded to powers of two (empty cells, prior-only models left out of every
sum and mean) so that one compiled sampler serves every build of similar size, the counts passed to it as arguments
(`_parallel_chains`: read from JAX's compilation cache by the next build whose games changed); JAX runs on the CPU in
double precision (a cell of a million games would overflow float32's resolution).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from mafiabench.errors import UserError
from mafiabench.transform.models import fit_cache
from mafiabench.transform.models.widening import Z95, widened

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


def _fit_coded(
    mafioso: Coded, detective: Coded, villager: Coded, y: np.ndarray, *, ridge: float, games: np.ndarray | None = None,
    loose: Mapping[str, set[str]] | None = None,
) -> LatentFit:
    """The fit on coded rows: one game each with `y` its outcome, or (`games` given) `games` games each with `y`
    mafia wins among them, the same cells and so the same fit at the cost of the rows (the leaderboard's line-ups).
    `loose` (`undetermined`'s models by parameter kind) are left out of the constraints' sums, as the NUTS fit
    leaves them out of its means: a parameter its prior alone places would otherwise shift every placed one."""
    (mnames, mi), (dnames, dj), (vnames, vk) = mafioso, detective, villager
    nm, nd, nv = len(mnames), len(dnames), len(vnames)
    # Aggregate games into (i, j, k) cells: n games, w mafia wins.
    key = (mi * nd + dj) * nv + vk
    # The key space is small (models per role cubed): counting into it beats sorting a million keys.
    size = nm * nd * nv
    counts = np.bincount(key, minlength=size) if games is None else np.bincount(key, weights=games, minlength=size)
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
    if loose:
        placed = np.r_[[n not in loose.get("a", ()) for n in mnames], [n not in loose.get("b", ()) for n in dnames],
                       [n not in loose.get("c", ()) for n in vnames]]
        for row, part in ((0, slice(0, nm + nd)), (1, slice(nm + nd, p))):
            if placed[part].any():  # none placed: the sum over every model, as before
                constraints[row, part] = placed[part].astype(float)
    from scipy import linalg, optimize  # here, not at import: a build whose fits are cached never fits (0.3 s)

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
        n_games=len(y) if games is None else int(games.sum()),
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
    # Coded once: each fold's fit and prediction work on the codes (the same fits as from the names).
    roles = [_codes(x) for x in (mafioso, detective, villager)]
    return _cross_validated_brier_coded(roles, np.asarray(mafia_won, dtype=float), folds=folds, seed=seed,
                                        ridge=ridge)


def _cross_validated_brier_coded(
    roles: Sequence[Coded], y: np.ndarray, *, folds: int, seed: int, ridge: float
) -> tuple[float, float]:
    """`cross_validated_brier` on coded games (mafioso, detective, villager, as `_codes` codes them)."""
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
    "interval": pl.Utf8,
    "model_low": pl.Float64,
    "model_high": pl.Float64,
    "robust_low": pl.Float64,
    "robust_high": pl.Float64,
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
    "status": pl.Utf8,
    "reason": pl.Utf8,
    "n_games": pl.Int64,
    "n_cells": pl.Int64,
    "n_mafioso_models": pl.Int64,
    "n_detective_models": pl.Int64,
    "n_villager_models": pl.Int64,
    "log_likelihood": pl.Float64,
    "chi2": pl.Float64,
    "df": pl.Int64,
    "dispersion": pl.Float64,
    "interval": pl.Utf8,
    "converged": pl.Boolean,
    "chains": pl.Int64,
    "draws": pl.Int64,
    "divergences": pl.Int64,
    "coordinates": pl.Utf8,
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
    """The fit the latent mart holds: `nuts` (the reference's Bayesian model, `fit_latent_nuts` below) unless
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
    row says which fit it holds (`method`); the cross-validated Brier score refits the point estimate per fold.
    Data NUTS cannot learn from (`not_fitted_reason`) is not sampled: its fit row says why, with no abilities.

    The fits read the games' (mafioso, villager, detective) cells, counted in DuckDB (a few hundred rows for a
    million games); only the cross-validation, whose folds split games, reads one row per game, and only for a
    study it fits (each game's cell number and outcome, not its names)."""
    method = method or latent_method()
    cells = con.sql(
        f"""select study, prompt_version, mafioso_model, villager_model, detective_model, count(*) as n,
                  count(*) filter (where mafia_won) as w
           from fct_games where {_LATENT_GAMES}
           group by all
           order by study, prompt_version, mafioso_model, villager_model, detective_model"""
    ).pl()
    abilities: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    for (study, version), part in cells.group_by(["study", "prompt_version"], maintain_order=True):
        games_by = {role: dict(part.group_by(f"{role}_model").agg(pl.col("n").sum()).rows())
                    for role in ("mafioso", "detective", "villager")}
        reason = not_fitted_reason(part, games_by) if method == "nuts" else None
        rows: list[dict[str, Any]]
        if reason is not None:
            rows, fit_row = [], _not_fitted_row(part)
        elif method == "nuts":
            rows, fit_row = _nuts_rows(study, version, part, games_by)
        else:
            rows, fit_row = _map_rows(study, version, part, games_by, ridge)
        abilities += rows
        brier_model, brier_const = (math.nan, math.nan)
        if int(part["n"].sum()) >= folds and reason is None:
            roles, y = _games_coded(con, study, version, part)
            brier_model, brier_const = _cross_validated_brier_coded(roles, y, folds=folds, seed=0, ridge=ridge)
        fits.append(
            {
                "study": study,
                "prompt_version": version,
                "variant": "mini-mafia",
                "method": method,
                "status": "fitted" if reason is None else "not_fitted",
                "reason": reason,
                **fit_row,
                "n_mafioso_models": len(games_by["mafioso"]),
                "n_detective_models": len(games_by["detective"]),
                "n_villager_models": len(games_by["villager"]),
                "n_not_identified": sum(1 for r in rows if not r["identified"]) if reason is None else None,
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


# The games the latent model fits: scored Mini-Mafia games with a scripted night and a model in every role.
_LATENT_GAMES = """variant = 'mini-mafia' and is_scored and coalesce(night_mode, 'scripted') = 'scripted'
             and mafioso_model is not null and detective_model is not null and villager_model is not null"""


def _games_coded(
    con: duckdb.DuckDBPyConnection, study: str, version: str | None, cells: pl.DataFrame
) -> tuple[list[Coded], np.ndarray]:
    """One study's games in game-id order as the cross-validation reads them: each role's model coded as `_codes`
    codes the names (sorted distinct names, each game's index among them), and each game's outcome (1.0: the mafia
    won). DuckDB numbers each game's cell in the order of `cells` (sorted by mafioso, villager, detective, as the
    cells query sorts them); the names come from the cells, so a million games cost two integer columns."""
    found = con.execute(
        f"""with games as (
                select game_id, mafioso_model, villager_model, detective_model, mafia_won
                from fct_games
                where {_LATENT_GAMES} and study = $study and prompt_version is not distinct from $version
            ),
            cells as (
                select *, (row_number() over (order by mafioso_model, villager_model, detective_model) - 1)::int
                    as cell
                from (select distinct mafioso_model, villager_model, detective_model from games)
            )
            select c.cell, g.mafia_won
            from games as g inner join cells as c using (mafioso_model, villager_model, detective_model)
            order by g.game_id""",
        {"study": study, "version": version},
    ).fetchnumpy()
    cell = np.asarray(found["cell"], dtype=np.int64)
    roles = []
    for role in ("mafioso", "detective", "villager"):
        names, codes = _codes(cells[f"{role}_model"])
        roles.append((names, codes[cell]))
    return roles, np.asarray(found["mafia_won"], dtype=float)


def not_fitted_reason(cells: pl.DataFrame, games_by: Mapping[str, Mapping[str, int]]) -> str | None:
    """Why NUTS would learn nothing from these games (None: it can): one model in every role (one cell, nothing to
    compare), only scripted players (`policy/...`: their play is a rule, whose exact win rates mart_baselines gives,
    not an ability), or fewer cells than the free parameters (a model per role less the shift and the scale the
    normalisation fixes). Sampling such data only reports R-hat NaN or a prior's draws as "not converged". `cells`:
    one row per (mafioso, villager, detective) model combination with its games `n` and mafia wins `w`."""
    models = {role: sorted(games_by[role]) for role in ("mafioso", "detective", "villager")}
    games, wins = int(cells["n"].sum()), int(cells["w"].sum())
    if all(len(names) == 1 for names in models.values()):
        return (f"one model in every role ({', '.join(f'{r} {n[0]}' for r, n in models.items())}): nothing to "
                f"compare; the mafia won {wins} of {games} games")
    everyone = sorted({name for names in models.values() for name in names})
    if all(name.startswith("policy/") for name in everyone):
        return (f"only scripted players ({', '.join(everyone)}): their play is a fixed rule, not an ability to "
                "estimate (mart_baselines gives the exact win rates of the policies it knows)")
    free = sum(len(names) for names in models.values()) - 2
    if cells.height < free:
        return (f"{cells.height} cells of games for {free} free parameters ({len(models['mafioso'])} mafioso, "
                f"{len(models['detective'])} detective and {len(models['villager'])} villager models, less the "
                "shift and the scale): the design cannot place them")
    return None


def _not_fitted_row(cells: pl.DataFrame) -> dict[str, Any]:
    return {
        "n_games": int(cells["n"].sum()), "n_cells": cells.height, "log_likelihood": None, "chi2": None,
        "df": None, "dispersion": None, "interval": None, "converged": None,
        "chains": None, "draws": None, "divergences": None, "coordinates": None, "max_r_hat": None, "min_ess": None,
        "scale": None, "iterations": None,
    }


def _one_sided(cells: pl.DataFrame, role: str) -> set[str]:
    """Models whose every game in `role` ended the same way (the data bound them on one side only)."""
    by = cells.group_by(f"{role}_model").agg(pl.col("w").sum(), pl.col("n").sum())
    return {r[0] for r in by.filter((pl.col("w") == 0) | (pl.col("w") == pl.col("n"))).rows()}


def _nuts_rows(
    study: str, version: str | None, cells: pl.DataFrame, games_by: Mapping[str, Mapping[str, int]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cell_rows = cells.select("mafioso_model", "villager_model", "detective_model", "n", "w").rows()
    fit = fit_latent_nuts([(mi, vk, dj, int(n), int(w)) for mi, vk, dj, n, w in cell_rows])
    one_sided = {role: _one_sided(cells, role) for role in ("mafioso", "detective", "villager")}
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
            if name in fit.undetermined[parameter]:
                notes.append(UNDETERMINED_NOTE)
            elif name in one_sided[role]:
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
    mi, vk, dj, n, w = (np.array(c) for c in zip(*cell_rows, strict=True))
    est = {k: dict(zip(fit.models[k], fit.estimate[k], strict=True)) for k in ("m", "d", "v")}
    eta = np.array([est["v"][k] * (est["m"][i] - est["d"][j]) for i, k, j in zip(mi, vk, dj, strict=True)])
    fit_row = {
        "n_games": fit.n_games, "n_cells": fit.n_cells,
        "log_likelihood": float(np.sum(w * eta - n * np.logaddexp(0.0, eta))),
        **_intervals(rows, *dispersion(cell_rows, {p: est[k] for k, p in (("m", "a"), ("d", "b"), ("v", "c"))})),
        "converged": fit.converged, "chains": fit.chains, "draws": fit.n_draws, "divergences": fit.divergences,
        "coordinates": fit.coordinates, "max_r_hat": fit.max_r_hat, "min_ess": fit.min_ess, "scale": fit.scale,
        "iterations": None,
    }
    return rows, fit_row


def _map_rows(
    study: str, version: str | None, cells: pl.DataFrame, games_by: Mapping[str, Mapping[str, int]], ridge: float,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    # On the cells, each with its games and wins: the fit game by game, to the bit (tests/transform/
    # test_latent_counts.py); the constraints over the models the design places.
    cell_rows = cells.select("mafioso_model", "villager_model", "detective_model", "n", "w").rows()
    loose = undetermined(cell_rows)
    fit = _fit_coded(_codes(cells["mafioso_model"]), _codes(cells["detective_model"]), _codes(cells["villager_model"]),
                     cells["w"].to_numpy().astype(float), ridge=ridge, games=cells["n"].to_numpy().astype(float),
                     loose=loose)
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
        if r["model"] in loose[r["parameter"]]:
            r.update(identified=False, ci_low=None, ci_high=None, note=UNDETERMINED_NOTE)
    fitted = {"a": dict(zip(fit.mafiosos, fit.a, strict=True)), "b": dict(zip(fit.detectives, fit.b, strict=True)),
              "c": dict(zip(fit.villagers, fit.c, strict=True))}
    fit_row = {
        "n_games": fit.n_games, "n_cells": fit.n_cells, "log_likelihood": fit.log_likelihood,
        **_intervals(rows, *dispersion(cell_rows, fitted)),
        "converged": fit.converged, "chains": None, "draws": None, "divergences": None, "coordinates": None,
        "max_r_hat": None, "min_ess": None, "scale": None, "iterations": fit.iterations,
    }
    return rows, fit_row


def _intervals(rows: list[dict[str, Any]], chi2: float, df: int) -> dict[str, Any]:
    """Each identified row's interval twice, the model's (`model_low`, `model_high`: the published model's own) and
    one widened for the scatter beyond the model (`robust_low`, `robust_high`: `widened`, phi = chi-square / df
    over the cells; a point estimate's detect ability on its log scale, where its interval is made), and in
    `ci_low`, `ci_high` the one the fit shows (`interval`): the widened one when phi > 1, as the leaderboard does.
    With no cell beyond the parameters the design sets (df = 0) the scatter cannot be measured: the model's interval
    is shown, and no robust one. Returns the fit row's columns."""
    phi = chi2 / df if df > 0 else None
    interval = "robust" if phi is not None and phi > 1 else "model"
    for r in rows:
        low, high, est = r["ci_low"], r["ci_high"], r["estimate"]
        r["model_low"], r["model_high"] = low, high
        r["robust_low"] = r["robust_high"] = r["interval"] = None
        if low is None or high is None:
            continue
        r["interval"] = interval
        if phi is None:
            continue
        if r["method"] == "map" and r["parameter"] == "c":
            log_low, log_high = widened(math.log(est), math.log(low), math.log(high), phi, df)
            r["robust_low"], r["robust_high"] = math.exp(log_low), math.exp(log_high)
        else:
            r["robust_low"], r["robust_high"] = (float(x) for x in widened(est, low, high, phi, df))
        if interval == "robust":
            r["ci_low"], r["ci_high"] = r["robust_low"], r["robust_high"]
    return {"chi2": chi2, "df": df, "dispersion": phi, "interval": interval}


def _not_identified(se: float, games: int, separated: bool, role: str) -> str:
    if separated:
        return (f"not identified: every one of its {games} games as {role} ended the same way, so the data only "
                "bound it on one side; the estimate is the prior's")
    sd = f"{se:.1f}" if math.isfinite(se) else "infinite"
    return (f"not identified: sd {sd} on the logit scale from {games} games (more than {MAX_SE}): the model is "
            "seen in too few cells to be placed against the others")


def _roles(cells: Sequence[tuple[str, str, str, int, int]]) -> dict[str, list[str]]:
    """Per parameter kind (`a` mafioso, `c` villager, `b` detective), the models that played that role, sorted."""
    return {k: sorted({str(c[pos]) for c in cells}) for k, pos in (("a", 0), ("c", 1), ("b", 2))}


def undetermined(cells: Sequence[tuple[str, str, str, int, int]]) -> dict[str, set[str]]:
    """Per parameter kind (`a` mafioso, `b` detective, `c` villager), the models whose parameter the design does not
    determine: whatever the games' outcomes, other values fit them exactly as well, so a posterior places it by its
    prior alone (however narrow that makes its sd). The two symmetries every design has (a common shift of a and b,
    a scale traded between c and a - b) are fixed on the most-played mafioso's a and villager's c; a parameter with
    a component in the null space of the cells' logits' Jacobian, taken at two generic points (the rank is
    structural), cannot be placed against them. Example: a person who only played against a model no other game
    saw: (person, M, M) as (mafioso, villager, detective) gives c_M (a_person - b_M), one number for three
    parameters. A design where every model plays every role (the published one) leaves nothing out."""
    cells = [c for c in cells if c[3] > 0]
    roles = _roles(cells)
    out: dict[str, set[str]] = {k: set() for k in roles}
    if not cells:
        return out
    index = {k: {name: i for i, name in enumerate(names)} for k, names in roles.items()}
    na, nb, nc = len(roles["a"]), len(roles["b"]), len(roles["c"])
    games = {k: dict.fromkeys(names, 0) for k, names in roles.items()}
    for m, v, _, n, _ in cells:
        games["a"][m] += n
        games["c"][v] += n
    distinct = np.array(sorted({(index["a"][m], index["c"][v], index["b"][d]) for m, v, d, *_ in cells}))
    rng = np.random.default_rng(0)
    for _ in range(2):
        jac = np.vstack([_logit_jacobian(distinct, *_generic_point(rng, na, nb, nc)), np.zeros((2, na + nb + nc))])
        jac[-2, index["a"][max(roles["a"], key=lambda x: (games["a"][x], x))]] = 1.0
        jac[-1, na + nb + index["c"][max(roles["c"], key=lambda x: (games["c"][x], x))]] = 1.0
        _, sv, vt = np.linalg.svd(jac)
        rank = int((sv > 1e-9 * sv[0]).sum())
        loose = (vt[rank:] ** 2).sum(axis=0) > 1e-12
        for kind, start in (("a", 0), ("b", na), ("c", na + nb)):
            out[kind] |= {name for i, name in enumerate(roles[kind]) if loose[start + i]}
    return out


def dispersion(
    cells: Sequence[tuple[str, str, str, int, int]], estimate: Mapping[str, Mapping[str, float]]
) -> tuple[float, int]:
    """How far the games scatter beyond the model: Pearson's chi-square over the (mafioso, villager, detective)
    cells at the fitted logits c_k (a_i - b_j), and its degrees of freedom, the cells less the parameters the
    design sets (the rank of the logits' Jacobian at a generic point, as `undetermined` takes it: the shift and
    scale of each part, and parameters the design leaves loose, set nothing). `estimate`: per parameter kind (`a`,
    `b`, `c`), each model's value in any normalisation (the logits do not depend on it). chi-square / df near 1:
    the binomial scatter the model's intervals assume; the published 140 cells give 2.53 on 112 degrees of freedom
    (tests/transform/test_mini_mafia_published.py; by hand: tests/transform/test_latent_dispersion.py)."""
    cells = [c for c in cells if c[3] > 0]
    if not cells:
        return 0.0, 0
    roles = _roles(cells)
    index = {k: {name: i for i, name in enumerate(names)} for k, names in roles.items()}
    na, nb, nc = len(roles["a"]), len(roles["b"]), len(roles["c"])
    a, b, c = (np.array([float(estimate[k][name]) for name in roles[k]]) for k in ("a", "b", "c"))
    ikj = np.array([(index["a"][m], index["c"][v], index["b"][d]) for m, v, d, *_ in cells])
    i, k, j = ikj.T
    n, w = (np.array([cell[pos] for cell in cells], dtype=float) for pos in (3, 4))
    p = _sigmoid(c[k] * (a[i] - b[j]))
    chi2 = float(np.sum((w - n * p) ** 2 / np.maximum(n * p * (1.0 - p), 1e-12)))
    sv = np.linalg.svd(_logit_jacobian(ikj, *_generic_point(np.random.default_rng(0), na, nb, nc)), compute_uv=False)
    rank = int((sv > 1e-9 * sv[0]).sum()) if sv.size and sv[0] > 0 else 0
    return chi2, len(cells) - rank


def _generic_point(rng: np.random.Generator, na: int, nb: int, nc: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random a, b and c > 0: where the logits' Jacobian has the design's structural rank."""
    return rng.normal(size=na), rng.normal(size=nb), rng.uniform(0.5, 1.5, size=nc)


def _logit_jacobian(ikj: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """d logit / d (a, b, c) of each cell, c_k (a_i - b_j), one row per (mafioso i, villager k, detective j) index
    triple: c_k for a_i, -c_k for b_j, a_i - b_j for c_k."""
    i, k, j = ikj.T
    jac = np.zeros((len(ikj), len(a) + len(b) + len(c)))
    rows = np.arange(len(ikj))
    jac[rows, i], jac[rows, len(a) + j], jac[rows, len(a) + len(b) + k] = c[k], -c[k], a[i] - b[j]
    return jac


UNDETERMINED_NOTE = ("not identified: the design does not place it (the cells it played in hold models no other "
                     "games place, so other values fit its games as well); the estimate is the prior's")


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



# -- the reference's model, sampled by NUTS (the mart's default) ----------------------------------------------

PRIOR_SD = 2.0
CHAINS = 4
WARMUP = 500
DRAWS = 1000  # x 4 chains: a bulk ESS of 3,900 on the published design in gauge coordinates (610 in the reference's)
TARGET_ACCEPT = 0.95  # the reference's
SEED = 42  # the reference's random_seed: a build's estimates are reproducible
MAX_R_HAT = 1.01  # Vehtari et al. (2021): split R-hat below 1.01 ...
MIN_ESS = 400  # ... and a bulk effective sample size of at least 100 per chain (4 chains)


@dataclass
class NutsFit:
    """Normalised posterior summaries of m (deceive), d (disclose) and v (detect): for each, one entry per model
    that played the role (mafioso, detective, villager), in the order of `models[parameter]` (sorted)."""

    models: dict[str, list[Any]]
    estimate: dict[str, np.ndarray]
    sd: dict[str, np.ndarray]
    ci_low: dict[str, np.ndarray]
    ci_high: dict[str, np.ndarray]
    r_hat: dict[str, np.ndarray]
    ess: dict[str, np.ndarray]
    draws: dict[str, np.ndarray]  # (chains, draws, models) normalised draws
    scale: float  # lambda: the posterior mean of mean(c) the draws were divided by
    divergences: int
    chains: int
    n_draws: int
    n_cells: int
    n_games: int
    undetermined: dict[str, list[str]]  # per parameter, the models the design does not place (`undetermined`)
    # What NUTS moved in (`_sampler`: the same posterior either way), per part of the design (`components`),
    # largest first: "gauge" on the published design, "gauge + reference" on the demo's.
    coordinates: str = "reference"
    mean_steps: float = 0.0  # leapfrog steps a draw, averaged, summed over the parts: the sampler's cost

    @property
    def max_r_hat(self) -> float:
        return float(max(np.nanmax(x) for x in self.r_hat.values()))

    @property
    def min_ess(self) -> float:
        return float(min(np.nanmin(x) for x in self.ess.values()))

    @property
    def converged(self) -> bool:
        return self.max_r_hat <= MAX_R_HAT and self.min_ess >= MIN_ESS


_SAMPLERS: dict[tuple[int, int, int, int, int, float, str], Any] = {}


def _jax() -> Any:
    """Import JAX on the CPU in double precision, with one host device per chain so the chains run in parallel, and
    XLA's compiled sampler kept on disk between processes (JAX's persistent compilation cache), so the NUTS compile
    is paid once per machine and sampler shape, not once per build (issue 37 item 1)."""
    if "jax" not in sys.modules:  # the device count and platform are read once, when JAX starts
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={CHAINS}".strip()
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", str(_cache_dir("jax-compilation")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return jax


def _cache_dir(name: str) -> Path:
    return fit_cache.folder(name)


# What changes a NUTS fit besides its cells and settings: this module's code (the model and its normalisation) and
# the libraries that sample and summarise it. Part of every fit's cache key.
def _fit_code_key() -> dict[str, str]:
    return fit_cache.code_key({"module": __file__}, ("jax", "jaxlib", "numpyro", "numpy"))


def fit_cache_key(cells: Sequence[tuple[str, str, str, int, int]], **settings: Any) -> str:
    """The NUTS fit's identity: its input rows in order, the sampler settings and seed, the model's code and the
    sampling libraries' versions. Two builds with the same key get byte-identical fits, so the second reuses the
    first's (`fit_latent_nuts`)."""
    return fit_cache.key({"cells": [list(c) for c in cells], "settings": settings, "code": _fit_code_key()})


def _cached_fit(key: str) -> NutsFit | None:
    return fit_cache.load("latent-fits", key, NutsFit)


def _store_fit(key: str, fit: NutsFit) -> None:
    fit_cache.store("latent-fits", key, fit)


def _pad(size: int, floor: int) -> int:
    return max(floor, 1 << (max(size, 1) - 1).bit_length())


COORDINATES = ("reference", "gauge")  # what NUTS moves in; the posterior is the same (`_sampler`)


def _sampler(
    n_models: int, n_cells: int, chains: int, warmup: int, draws: int, target_accept: float,
    coordinates: str = "reference",
) -> Any:
    """The compiled sampler of one padded shape. Both `coordinates` sample the reference's posterior over (a, b, c):

    - `reference`: a, b, c themselves, as the reference's PyMC script does. The likelihood depends on them only
      through c_k (a_i - b_j), so it is flat along a common shift of a and b and along a scale traded between c and
      a - b; only the N(0, 2) priors bound those directions. With many games the posterior is a thin curved ridge:
      NUTS takes 41 leapfrog steps a draw on the published 14,000 games and 187 on fifty times as many, and
      diverges (13 of 4,000 draws on the published design), which biases it (posterior sds about 5% below the
      study's own).
    - `gauge`: the two directions the data do not set, t = mean(a) and s = mean(c) > 0 (sampled as log s: the
      reference's sum(c) > 0 is s > 0), and the shape the data do set, a~ = (a - t) s, b~ = (b - t) s and
      c~ = c / s (mean(a~) = 0, mean(c~) = 1), which the likelihood reads as c~_k (a~_i - b~_j). The change of
      variables' Jacobian is s^(n_c - n_a - n_b + 1) (n_* the models of each role); the priors are the reference's,
      on the a, b, c it gives back. a~ and c~ are sampled as unconstrained vectors minus their mean, each mean a
      standard normal of its own that enters nothing else (so their margins are exact). On the published design:
      16 steps a draw, no divergence, a bulk ESS of 3,900 of 4,000 draws against 610, posterior sds within 2% of
      the study's (tests/transform/test_latent_coordinates.py, BENCHMARKS.md).

    `gauge` is used on each part of the design (`components`, sampled apart) that places all its own parameters:
    the published design (one part) and the demo's two (the models', and the policy baselines' who meet only each
    other), where the reference coordinates on the whole design gave ESS 347 and R-hat 1.017 (not converged) and
    the gauge ones on each part give 2,920 and 1.0006 (BENCHMARKS.md). A part with parameters its own data leave to
    their priors (a person who played one cell twice against models the rest placed) keeps `reference`: those
    parameters' curved ridges stay either way, and tied to the part's s they sampled worse (on the demo's cells as
    one part: ESS 45 and R-hat 1.067 against 347 and 1.017)."""
    key = (n_models, n_cells, chains, warmup, draws, target_accept, coordinates)
    if key not in _SAMPLERS:
        jax = _jax()
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import MCMC, NUTS, init_to_value

        prior = dist.Normal(0.0, PRIOR_SD)
        standard = dist.Normal(0.0, 1.0)
        vector = standard.expand([n_models]).to_event(1)

        def likelihood(a: Any, b: Any, c: Any, mafioso: Any, villager: Any, detective: Any, n: Any, w: Any) -> None:
            eta = c[villager] * (a[mafioso] - b[detective])
            numpyro.factor("mafia_wins", jnp.sum(w * eta - n * jax.nn.softplus(eta)))

        def reference(mafioso: Any, villager: Any, detective: Any, n: Any, w: Any, real: Any) -> None:
            a = numpyro.sample("a", prior.expand([n_models]).to_event(1))
            b = numpyro.sample("b", prior.expand([n_models]).to_event(1))
            c = numpyro.sample("c", prior.expand([n_models]).to_event(1))
            numpyro.factor("c_sum_positive", jnp.where(jnp.sum(c * real[2]) > 0, 0.0, -jnp.inf))
            likelihood(a, b, c, mafioso, villager, detective, n, w)

        def gauge(mafioso: Any, villager: Any, detective: Any, n: Any, w: Any, real: Any) -> None:
            ra, rb, rc = real[0], real[1], real[2]  # 1 for a role's models, 0 for the padding
            # Sampled standard normal, then each real entry's N(0, 1) replaced below by the reference's prior on
            # the a, b, c it gives; the padding keeps N(0, 1) and enters nothing.
            za = numpyro.sample("za", vector)
            zb = numpyro.sample("zb", vector)
            zc = numpyro.sample("zc", vector)
            t = numpyro.sample("t", dist.ImproperUniform(dist.constraints.real, (), ()))
            log_s = numpyro.sample("log_s", dist.ImproperUniform(dist.constraints.real, (), ()))
            na, nb, nc = jnp.sum(ra), jnp.sum(rb), jnp.sum(rc)
            mean_a, mean_c = jnp.sum(za * ra) / na, jnp.sum(zc * rc) / nc
            s = jnp.exp(log_s)
            a = numpyro.deterministic("a", jnp.where(ra > 0, t + (za - mean_a) / s, za))
            b = numpyro.deterministic("b", jnp.where(rb > 0, t + zb / s, zb))
            c = numpyro.deterministic("c", jnp.where(rc > 0, s * (zc - mean_c + 1.0), zc))
            numpyro.factor("prior", jnp.sum(prior.log_prob(a) * ra) + jnp.sum(prior.log_prob(b) * rb)
                           + jnp.sum(prior.log_prob(c) * rc))
            numpyro.factor("placeholders", standard.log_prob(mean_a) + standard.log_prob(mean_c)
                           - jnp.sum(standard.log_prob(za) * ra) - jnp.sum(standard.log_prob(zb) * rb)
                           - jnp.sum(standard.log_prob(zc) * rc))
            numpyro.factor("jacobian", (nc - na - nb + 1.0) * log_s)
            likelihood(a, b, c, mafioso, villager, detective, n, w)

        if coordinates == "reference":
            model: Any = reference
            start = {"a": jnp.zeros(n_models), "b": jnp.zeros(n_models), "c": jnp.ones(n_models)}
        elif coordinates == "gauge":
            model = gauge
            start = {"za": jnp.zeros(n_models), "zb": jnp.zeros(n_models), "zc": jnp.zeros(n_models),
                     "t": jnp.zeros(()), "log_s": jnp.zeros(())}
        else:
            raise ValueError(f"coordinates: expected one of {list(COORDINATES)}, got {coordinates!r}")
        kernel = NUTS(model, target_accept_prob=target_accept, dense_mass=True,
                      init_strategy=init_to_value(values=start))
        method: Any = _parallel_chains if jax.local_device_count() >= chains else "sequential"
        _SAMPLERS[key] = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method=method,
                              progress_bar=False, jit_model_args=True)
    return _SAMPLERS[key]


def _parallel_chains(chain: Any) -> Any:
    """NumPyro's `chain_method="parallel"` with the model's data passed to the compiled program as arguments.

    NumPyro maps `chain` (its `_single_chain_mcmc` with the data bound by `functools.partial`) over one device per
    chain with `jax.pmap`; the bound data are then constants of the traced program, so every new count in a cell
    is a new program for XLA: JAX's persistent compilation cache missed on every build whose games changed (13
    compiles, 7.9 s of a 16.7 s `latent_tables` on 50,000 LLM-shaped games; BENCHMARKS.md). Here the data are
    pmap's broadcast arguments (`in_axes=None`): one program per padded shape, read from the cache on the next
    build. The same computation (`tests/transform/test_latent_fit_cache.py`, which counts JAX's cache events and so
    fails if a NumPyro upgrade changes how `MCMC.run` binds the data: NumPyro 0.22's `partial(..., args, kwargs)`)."""
    import jax

    bound = dict(chain.keywords)
    args, kwargs = bound.pop("args"), bound.pop("kwargs")

    def one_chain(map_args: Any, args: Any, kwargs: Any) -> Any:
        return chain.func(map_args, args=args, kwargs=kwargs, **bound)

    mapped = jax.pmap(one_chain, in_axes=(0, None, None))
    return lambda map_args: mapped(map_args, args, kwargs)


def fit_latent_nuts(
    cells: list[tuple[str, str, str, int, int]],
    *,
    chains: int | None = None,
    warmup: int | None = None,
    draws: int | None = None,
    target_accept: float | None = None,
    seed: int = SEED,
) -> NutsFit:
    """Sample the reference's model on (mafioso, villager, detective, games, mafia wins) cells; see the module.
    Settings left out are the module's (`CHAINS`, `WARMUP`, `DRAWS`, `TARGET_ACCEPT`), read at each call. A fit
    whose cells, settings, seed and code equal an earlier one's is read from the cache (`fit_cache_key`): the same
    bytes, without sampling again (a scheduled build whose Mini-Mafia games did not change pays nothing)."""
    chains = chains or CHAINS
    warmup = warmup or WARMUP
    draws = draws or DRAWS
    target_accept = target_accept or TARGET_ACCEPT
    cells = [c for c in cells if c[3] > 0]
    if not cells:
        raise ValueError("no games to fit")
    key = fit_cache_key(cells, chains=chains, warmup=warmup, draws=draws, target_accept=target_accept, seed=seed)
    cached = _cached_fit(key)
    if cached is not None:
        return cached
    fit = _sample(cells, chains=chains, warmup=warmup, draws=draws, target_accept=target_accept, seed=seed)
    _store_fit(key, fit)
    return fit


def components(cells: Sequence[tuple[str, str, str, int, int]]) -> list[list[tuple[str, str, str, int, int]]]:
    """The design's separate parts: two cells are in one part when a model plays the same role in both, and so on
    transitively. Parts share no parameter, so the likelihood and the priors factor over them (the demo's policy
    baselines, who only meet each other, are a part beside the models'). The largest part (most games) first."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(node: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for m, v, d, *_ in cells:
        for node in (("c", v), ("b", d)):
            parent[root(node)] = root(("a", m))
    parts: dict[tuple[str, str], list[tuple[str, str, str, int, int]]] = {}
    for cell in cells:
        parts.setdefault(root(("a", cell[0])), []).append(cell)
    return sorted(parts.values(), key=lambda part: (-sum(c[3] for c in part), part[0]))


def _sample(
    cells: list[tuple[str, str, str, int, int]], *, chains: int, warmup: int, draws: int, target_accept: float,
    seed: int, coordinates: str | None = None,
) -> NutsFit:
    # Each role's models get that role's parameter (a model that never played a role has none): on the published
    # design, where every model plays every role, this is the reference's model exactly; on a partial one a
    # prior-only parameter would take part in sum(c) > 0, mean(a) and mean(c), and let the sign flip back in.
    roles = _roles(cells)
    loose = undetermined(cells)
    jax = _jax()
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    # Each part of the design is sampled on its own (`components`): the posterior is their product, so a part
    # whose shift and scale no data set (an island of baselines) neither slows nor biases the placed models' NUTS.
    # One deviation, on parameters the mart already reports as not identified: each part's sum(c) > 0 fixes its
    # own sign, where the reference's one sum over every model would let a small island's sign follow the others'.
    parts = components(cells)
    # Every part padded to the largest's shape: one compiled sampler (and one trace) serves them all.
    p_models = _pad(max(len({str(c[pos]) for c in part}) for part in parts for pos in range(3)), 4)
    p_cells = _pad(max(len(part) for part in parts), 16)
    raw: dict[str, dict[str, np.ndarray]] = {k: {} for k in ("a", "b", "c")}
    used: list[str] = []
    divergences, steps = 0, 0.0
    for number, part in enumerate(parts):
        part_loose = undetermined(part) if len(parts) > 1 else loose
        chosen = coordinates or ("reference" if any(part_loose.values()) else "gauge")  # `_sampler` says why
        key = jax.random.PRNGKey(seed) if number == 0 else jax.random.fold_in(jax.random.PRNGKey(seed), number)
        samples, extra = _sample_part(part, key, (p_models, p_cells), chains=chains, warmup=warmup, draws=draws,
                                      target_accept=target_accept, coordinates=chosen)
        for kind in raw:
            raw[kind].update(samples[kind])
        used.append(chosen)
        divergences += int(np.asarray(extra["diverging"]).sum())
        steps += float(np.asarray(extra["num_steps"]).mean())
    stacked = {k: np.stack([raw[k][name] for name in roles[k]], axis=-1) for k in raw}
    # The reference's gauge: each draw shifted by its mean(a); every draw scaled by the posterior mean of mean(c);
    # both means over the models the design places (all of them in the reference's design): a prior-placed
    # parameter in them would move every model's estimate with its prior's draws.
    placed = {k: np.array([name not in loose[k] for name in roles[k]]) for k in ("a", "c")}
    shift = stacked["a"][..., placed["a"]].mean(axis=-1, keepdims=True)
    scale = float(stacked["c"][..., placed["c"]].mean(axis=(0, 1)).mean())
    normalised = {"m": (stacked["a"] - shift) * scale, "d": (stacked["b"] - shift) * scale,
                  "v": stacked["c"] / scale}
    names = {"m": roles["a"], "d": roles["b"], "v": roles["c"]}
    flat = {k: x.reshape(-1, x.shape[-1]) for k, x in normalised.items()}
    return NutsFit(
        models=names,
        estimate={k: x.mean(axis=0) for k, x in flat.items()},
        sd={k: x.std(axis=0) for k, x in flat.items()},
        ci_low={k: np.quantile(x, 0.025, axis=0) for k, x in flat.items()},
        ci_high={k: np.quantile(x, 0.975, axis=0) for k, x in flat.items()},
        r_hat={k: np.asarray(split_gelman_rubin(x)) for k, x in normalised.items()},
        ess={k: np.asarray(effective_sample_size(x)) for k, x in normalised.items()},
        draws=normalised,
        scale=scale,
        divergences=divergences,
        chains=chains,
        n_draws=draws,
        n_cells=len(cells),
        n_games=int(sum(c[3] for c in cells)),
        undetermined={"m": sorted(loose["a"]), "d": sorted(loose["b"]), "v": sorted(loose["c"])},
        coordinates=" + ".join(used),
        mean_steps=steps,
    )


def _sample_part(
    cells: list[tuple[str, str, str, int, int]], key: Any, padded: tuple[int, int], *, chains: int, warmup: int,
    draws: int, target_accept: float, coordinates: str,
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Any]]:
    """NUTS on one part of the design, padded to (models, cells): per parameter kind, each model's draws (chains x
    draws), and the sampler's extra fields (divergences, leapfrog steps)."""
    roles = _roles(cells)
    index = {k: {name: i for i, name in enumerate(names)} for k, names in roles.items()}
    p_models, p_cells = padded
    columns = np.zeros((5, p_cells), dtype=np.int64)
    for i, (m, v, d, n, w) in enumerate(cells):
        columns[:, i] = (index["a"][m], index["c"][v], index["b"][d], n, w)
    real = np.zeros((3, p_models))
    for row, kind in enumerate(("a", "b", "c")):
        real[row, : len(roles[kind])] = 1.0
    import jax.numpy as jnp

    mcmc = _sampler(p_models, p_cells, chains, warmup, draws, target_accept, coordinates)
    mcmc.run(key, *(jnp.asarray(x) for x in columns[:3]),
             jnp.asarray(columns[3], dtype=float), jnp.asarray(columns[4], dtype=float),
             jnp.asarray(real), extra_fields=("diverging", "num_steps"))
    samples = mcmc.get_samples(group_by_chain=True)
    by_name = {k: {name: np.asarray(samples[k])[..., i] for i, name in enumerate(roles[k])} for k in ("a", "b", "c")}
    return by_name, mcmc.get_extra_fields(group_by_chain=True)
