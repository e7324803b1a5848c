"""Synthetic Mini-Mafia designs with known latent abilities: the calibration check of the top-down model (its 95%
intervals should hold the truth 95% of the time), shared by tests/test_marts_latent.py and
benchmarks/bench_latent_coverage.py."""

from __future__ import annotations

import time

import numpy as np

from mafiabench.transform.models.latent import Z95, dispersion, fit_latent, fit_latent_nuts
from mafiabench.transform.models.widening import widened


def published_like(
    rng: np.random.Generator, models: int, backgrounds: int, games: int, a: np.ndarray, b: np.ndarray,
    g: np.ndarray, misfit: float = 0.0,
) -> tuple[list[str], list[str], list[str], np.ndarray]:
    """Games of the published design from true abilities; `misfit` > 0 adds to each cell's logit a line-up effect
    drawn N(0, misfit^2), which the model has no term for (the model wrong, as a real line-up can make it)."""
    names = [f"m{i}" for i in range(models)]
    m: list[str] = []
    d: list[str] = []
    v: list[str] = []
    y: list[np.ndarray] = []

    def cell(i: int, j: int, k: int) -> None:
        eta = np.exp(g[k]) * (a[i] - b[j]) + (rng.normal(0, misfit) if misfit > 0 else 0.0)
        p = 1 / (1 + np.exp(-eta))
        m.extend([names[i]] * games)
        d.extend([names[j]] * games)
        v.extend([names[k]] * games)
        y.append(rng.random(games) < p)

    for bg in range(backgrounds):
        for t in range(models):
            cell(t, bg, bg)  # deceive (homogeneous when t == bg)
            if t != bg:
                cell(bg, bg, t)  # detect
                cell(bg, t, bg)  # disclose
    return m, d, v, np.concatenate(y)


def _cells(m: list[str], v: list[str], d: list[str], y: np.ndarray) -> list[tuple[str, str, str, int, int]]:
    """Games as (mafioso, villager, detective, games, mafia wins) cells, the latent fits' input."""
    cells: dict[tuple[str, str, str], list[int]] = {}
    for key, won in zip(zip(m, v, d, strict=True), y, strict=True):
        cell = cells.setdefault(key, [0, 0])
        cell[0] += 1
        cell[1] += int(won)
    return [(*key, n, w) for key, (n, w) in cells.items()]


def identified_truth(a: np.ndarray, b: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The true parameters in the fit's parametrisation (shift and scale fixed by its constraints)."""
    shift = (a.sum() + b.sum()) / (len(a) + len(b))
    scale = np.exp(g.mean())
    return np.concatenate([(a - shift) * scale, (b - shift) * scale, g - g.mean()])


def coverage(models: int, backgrounds: int, games: int, reps: int, seed: int = 1,
             misfit: float = 0.0) -> dict[str, float]:
    """How often the point estimate's 95% Laplace intervals hold the true parameters (a, b, g) over `reps` designs
    drawn from one set of true abilities, and how often they do widened for the scatter beyond the model
    (`latent.widened`, on the scale the interval is made: g = log c); with `misfit`, line-up effects the model does
    not have (`published_like`)."""
    rng = np.random.default_rng(seed)
    a, b, g = rng.normal(0, 1, models), rng.normal(0, 1, models), rng.normal(0, 0.3, models)
    truth = identified_truth(a, b, g)
    hits = np.zeros(3 * models)
    hits_widened = np.zeros(3 * models)
    phis: list[float] = []
    ses: list[np.ndarray] = []
    not_identified = 0
    start = time.perf_counter()
    for _ in range(reps):
        m, d, v, y = published_like(rng, models, backgrounds, games, a, b, g, misfit)
        fit = fit_latent(m, d, v, y)
        se = fit.se()
        hits += np.abs(fit.theta - truth) <= Z95 * se
        chi2, df = dispersion(_cells(m, v, d, y), {"a": dict(zip(fit.mafiosos, fit.a, strict=True)),
                                                   "b": dict(zip(fit.detectives, fit.b, strict=True)),
                                                   "c": dict(zip(fit.villagers, fit.c, strict=True))})
        phis.append(chi2 / df)
        low, high = widened(fit.theta, fit.theta - Z95 * se, fit.theta + Z95 * se, phis[-1], df)
        hits_widened += (low <= truth) & (truth <= high)
        ses.append(se)
        not_identified += int((~fit.identified()).sum())
    per_fit = (time.perf_counter() - start) / reps
    rate = hits / reps
    all_se = np.concatenate(ses)
    return {"coverage": float(rate.mean()), "coverage_min": float(rate.min()), "coverage_max": float(rate.max()),
            "widened": float((hits_widened / reps).mean()), "widened_min": float((hits_widened / reps).min()),
            "dispersion_median": float(np.median(phis)),
            "median_se": float(np.median(all_se)), "max_se": float(all_se.max()),
            "not_identified": not_identified / (reps * 3 * models), "seconds_per_fit": per_fit}


def reference_truth(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    """The true parameters in the Mini-Mafia study's gauge (`latent.fit_latent_nuts`): mean(m) = 0, mean(v) = 1."""
    scale = c.mean()
    return {"m": (a - a.mean()) * scale, "d": (b - a.mean()) * scale, "v": c / scale}


def coverage_nuts(models: int, backgrounds: int, games: int, reps: int, seed: int = 1,
                  misfit: float = 0.0) -> dict[str, float]:
    """As `coverage`, for the sampled model: how often each central 95% credible interval holds the true value in
    the study's gauge, over `reps` designs drawn from one set of true abilities (c > 0: every villager detects);
    with `misfit`, line-up effects the model does not have (`published_like`)."""
    rng = np.random.default_rng(seed)
    a, b, g = rng.normal(0, 1, models), rng.normal(0, 1, models), rng.normal(0, 0.3, models)
    c = np.exp(g)
    truth = reference_truth(a, b, c)
    names = [f"m{i}" for i in range(models)]
    hits = {k: np.zeros(models) for k in truth}
    # The same draws in a gauge fixed draw by draw (each draw's own mean(c), not the posterior mean's): identified
    # quantities, for comparison with the study's gauge, which keeps the draws' scale drift in the intervals.
    hits_per_draw = {k: np.zeros(models) for k in truth}
    hits_widened = {k: np.zeros(models) for k in truth}  # the interval widened for the scatter beyond the model
    phis: list[float] = []
    sds: list[np.ndarray] = []
    not_converged = 0
    start = time.perf_counter()
    for _ in range(reps):
        m, d, v, y = published_like(rng, models, backgrounds, games, a, b, g, misfit)
        rows = _cells(m, v, d, y)
        fit = fit_latent_nuts(rows)
        not_converged += not fit.converged
        chi2, df = dispersion(rows, {p: dict(zip(fit.models[k], fit.estimate[k], strict=True))
                                     for k, p in (("m", "a"), ("d", "b"), ("v", "c"))})
        phis.append(chi2 / df)
        mean_v = fit.draws["v"].mean(axis=-1, keepdims=True).reshape(-1, 1)
        for k, true in truth.items():
            index = [names.index(x) for x in fit.models[k]]
            hits[k][index] += (fit.ci_low[k] <= true[index]) & (true[index] <= fit.ci_high[k])
            sds.append(fit.sd[k])
            low, high = widened(fit.estimate[k], fit.ci_low[k], fit.ci_high[k], phis[-1], df)
            hits_widened[k][index] += (low <= true[index]) & (true[index] <= high)
            flat = fit.draws[k].reshape(-1, len(index))
            per_draw = flat / mean_v if k == "v" else flat * mean_v
            low, high = np.quantile(per_draw, [0.025, 0.975], axis=0)
            hits_per_draw[k][index] += (low <= true[index]) & (true[index] <= high)
    per_fit = (time.perf_counter() - start) / reps
    rate = np.concatenate([h / reps for h in hits.values()])
    all_sd = np.concatenate(sds)
    return {"coverage": float(rate.mean()), "coverage_min": float(rate.min()), "coverage_max": float(rate.max()),
            **{f"coverage_{k}": float((h / reps).mean()) for k, h in hits.items()},
            **{f"widened_{k}": float((h / reps).mean()) for k, h in hits_widened.items()},
            "widened": float(np.concatenate([h / reps for h in hits_widened.values()]).mean()),
            "widened_min": float(np.concatenate([h / reps for h in hits_widened.values()]).min()),
            "dispersion_median": float(np.median(phis)),
            "coverage_per_draw_gauge": float(np.concatenate([h / reps for h in hits_per_draw.values()]).mean()),
            "median_se": float(np.median(all_sd)), "max_se": float(all_sd.max()),
            "not_converged": not_converged / reps, "seconds_per_fit": per_fit}
