"""Synthetic Mini-Mafia designs with known latent abilities: the calibration check of the top-down model (its 95%
intervals should hold the truth 95% of the time), shared by tests/test_marts_latent.py and
benchmarks/bench_latent_coverage.py."""

from __future__ import annotations

import time

import numpy as np

from mafiabench.transform.models.latent import Z95, fit_latent, fit_latent_nuts


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


def identified_truth(a: np.ndarray, b: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The true parameters in the fit's parametrisation (shift and scale fixed by its constraints)."""
    shift = (a.sum() + b.sum()) / (len(a) + len(b))
    scale = np.exp(g.mean())
    return np.concatenate([(a - shift) * scale, (b - shift) * scale, g - g.mean()])


def coverage(models: int, backgrounds: int, games: int, reps: int, seed: int = 1) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    a, b, g = rng.normal(0, 1, models), rng.normal(0, 1, models), rng.normal(0, 0.3, models)
    truth = identified_truth(a, b, g)
    hits = np.zeros(3 * models)
    ses: list[np.ndarray] = []
    not_identified = 0
    start = time.perf_counter()
    for _ in range(reps):
        fit = fit_latent(*published_like(rng, models, backgrounds, games, a, b, g))
        se = fit.se()
        hits += np.abs(fit.theta - truth) <= Z95 * se
        ses.append(se)
        not_identified += int((~fit.identified()).sum())
    per_fit = (time.perf_counter() - start) / reps
    rate = hits / reps
    all_se = np.concatenate(ses)
    return {"coverage": float(rate.mean()), "coverage_min": float(rate.min()), "coverage_max": float(rate.max()),
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
    sds: list[np.ndarray] = []
    not_converged = 0
    start = time.perf_counter()
    for _ in range(reps):
        m, d, v, y = published_like(rng, models, backgrounds, games, a, b, g, misfit)
        cells: dict[tuple[str, str, str], list[int]] = {}
        for key, won in zip(zip(m, v, d, strict=True), y, strict=True):
            cell = cells.setdefault(key, [0, 0])
            cell[0] += 1
            cell[1] += int(won)
        fit = fit_latent_nuts([(*key, n, w) for key, (n, w) in cells.items()])
        not_converged += not fit.converged
        mean_v = fit.draws["v"].mean(axis=-1, keepdims=True).reshape(-1, 1)
        for k, true in truth.items():
            index = [names.index(x) for x in fit.models[k]]
            hits[k][index] += (fit.ci_low[k] <= true[index]) & (true[index] <= fit.ci_high[k])
            sds.append(fit.sd[k])
            flat = fit.draws[k].reshape(-1, len(index))
            per_draw = flat / mean_v if k == "v" else flat * mean_v
            low, high = np.quantile(per_draw, [0.025, 0.975], axis=0)
            hits_per_draw[k][index] += (low <= true[index]) & (true[index] <= high)
    per_fit = (time.perf_counter() - start) / reps
    rate = np.concatenate([h / reps for h in hits.values()])
    all_sd = np.concatenate(sds)
    return {"coverage": float(rate.mean()), "coverage_min": float(rate.min()), "coverage_max": float(rate.max()),
            **{f"coverage_{k}": float((h / reps).mean()) for k, h in hits.items()},
            "coverage_per_draw_gauge": float(np.concatenate([h / reps for h in hits_per_draw.values()]).mean()),
            "median_se": float(np.median(all_sd)), "max_se": float(all_sd.max()),
            "not_converged": not_converged / reps, "seconds_per_fit": per_fit}
