"""The latent mart's rule for intervals when the games scatter beyond the model: the one home of `widened` and of
the words the protocol card compares with the study's. Light on purpose (no numpy, no polars): the card
(`study.protocol.experiment_facts`) reads `SHOWN_INTERVAL` at a run's start."""

from __future__ import annotations

import math
from typing import Any

Z95 = 1.959963984540054

# What the latent mart shows, as the Mini-Mafia protocol card compares it with the study's (statistics.latent_interval).
SHOWN_INTERVAL = ("posterior mean and sd, and a central 95% interval widened by sqrt(chi-square / df) t_df / z when "
                  "the games scatter beyond the model (Pearson chi-square / df over the cells above 1); the model's "
                  "own interval beside it")


def widened(estimate: Any, low: Any, high: Any, phi: float, df: int) -> tuple[Any, Any]:
    """The interval that allows for the scatter beyond the model (quasi-likelihood, McCullagh and Nelder 1989 ch.
    9): the model's about its estimate, stretched by sqrt(phi) t_df / z, phi = chi-square / df (`latent.dispersion`),
    t_df the Student quantile that allows for phi being estimated from df cells; never narrowed, and left as it is
    with no degrees of freedom (nothing measured). To first order, the posterior under the likelihood tempered by
    1 / phi. An addition to the published model's intervals, counted as a deviation on the protocol card. Simulated
    with line-up effects of sd 0.3-0.5 on a cell's logit, which the model has no term for, it holds the truth 0.94-0.99
    of the time where the model's own interval holds it 0.58-0.93 (BENCHMARKS.md, bench_latent_coverage.py
    --misfit)."""
    if df <= 0:
        return low, high
    from scipy.special import stdtrit  # Student's t quantile; here, not at import (0.3 s; scipy.stats 1.0 s)

    scale = max(1.0, math.sqrt(phi) * float(stdtrit(df, 0.975)) / Z95)
    return estimate + scale * (low - estimate), estimate + scale * (high - estimate)
