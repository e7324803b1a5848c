"""Calibration of the top-down latent model: do its 95% intervals cover the truth 95% of the time?

Simulates designs like the published Mini-Mafia one (by default 10 models, 5 of them backgrounds; for every
background and target: a deceive cell, and where the target differs from the background a detect and a disclose
cell; 100 games per cell: 140 cells, 14,000 games) from known abilities, fits each replicate and counts how often
each parameter's interval holds its true value (in the model's identified parametrisation: sum(a) + sum(b) = 0,
mean log c = 0). Prints coverage (mean and range over parameters), the median and largest standard errors, the
share of parameters flagged not identified and the time per fit.

    .venv/bin/python benchmarks/bench_latent_coverage.py                    # 10 models, 5 backgrounds, 200 reps
    .venv/bin/python benchmarks/bench_latent_coverage.py --models 6 --backgrounds 3 --reps 100
    .venv/bin/python benchmarks/bench_latent_coverage.py --method nuts --reps 40   # the sampled model (slower)
    .venv/bin/python benchmarks/bench_latent_coverage.py --method nuts --reps 24 --misfit 0.3   # the model wrong

With `--method nuts` the fit is the Mini-Mafia study's model sampled by NUTS (`transform.models.latent`), its central
95% credible intervals checked against the truth in the study's gauge (mean(m) = 0, mean(v) = 1), with the share
of fits flagged as not converged.
"""

from __future__ import annotations

import argparse
import sys

from mafiabench.transform.models.calibration import coverage, coverage_nuts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", type=int, default=10)
    p.add_argument("--backgrounds", type=int, default=5)
    p.add_argument("--games", type=int, default=100, help="games per cell")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--method", choices=("map", "nuts"), default="map")
    p.add_argument("--misfit", type=float, default=0.0,
                   help="sd of a line-up effect on each cell's logit the model does not have")
    args = p.parse_args(argv)
    if args.method == "nuts":
        return _nuts(args)
    r = coverage(args.models, args.backgrounds, args.games, args.reps, args.seed, args.misfit)
    cells = args.backgrounds * (3 * args.models - 2)
    print(f"design (misfit sd {args.misfit}): {args.models} models, {args.backgrounds} backgrounds, {cells} cells x "
          f"{args.games} games; {args.reps} replicates")
    print(f"95% interval coverage: mean {r['coverage']:.3f}, range over parameters "
          f"{r['coverage_min']:.3f}-{r['coverage_max']:.3f}")
    print(f"widened for the scatter beyond the model (sqrt(phi) t_df / z, phi = chi-square / df over cells, median "
          f"{r['dispersion_median']:.2f}): coverage {r['widened']:.3f}, lowest parameter {r['widened_min']:.3f}")
    print(f"standard error (logit scale): median {r['median_se']:.3f}, largest {r['max_se']:.3f}; "
          f"not identified: {100 * r['not_identified']:.1f}% of parameters")
    print(f"time per fit: {r['seconds_per_fit']:.3f} s")
    return 0


def _nuts(args: argparse.Namespace) -> int:
    r = coverage_nuts(args.models, args.backgrounds, args.games, args.reps, args.seed, args.misfit)
    cells = args.backgrounds * (3 * args.models - 2)
    print(f"NUTS (misfit sd {args.misfit}); design: {args.models} models,"
          f" {args.backgrounds} backgrounds, {cells} cells x {args.games} games; "
          f"{args.reps} replicates")
    print(f"95% credible interval coverage: mean {r['coverage']:.3f} (m {r['coverage_m']:.3f}, "
          f"d {r['coverage_d']:.3f}, "
          f"v {r['coverage_v']:.3f}), range over parameters {r['coverage_min']:.3f}-{r['coverage_max']:.3f}")
    print(f"widened for the scatter beyond the model (sqrt(phi) t_df / z, phi = chi-square / df over cells, median "
          f"{r['dispersion_median']:.2f}): coverage {r['widened']:.3f} (m {r['widened_m']:.3f}, "
          f"d {r['widened_d']:.3f}, v {r['widened_v']:.3f}), lowest parameter {r['widened_min']:.3f}")
    print(f"the same draws normalised draw by draw (each draw's own mean(c)): coverage "
          f"{r['coverage_per_draw_gauge']:.3f}")
    print(f"posterior sd: median {r['median_se']:.3f}, largest {r['max_se']:.3f}; "
          f"fits not converged: {100 * r['not_converged']:.1f}%")
    print(f"time per fit: {r['seconds_per_fit']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
