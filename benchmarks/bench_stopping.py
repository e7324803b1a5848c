"""Coverage and cost of the [stopping] rule by simulation (`mafiabench.study.stopping`), beside plain intervals.

    .venv/bin/python benchmarks/bench_stopping.py                      # ±0.05, 100..2000 games in waves of 100
    .venv/bin/python benchmarks/bench_stopping.py --half-width 0.08 --min 60 --wave 60 --max 3000

For each true mafia win rate p, `--reps` cells of Bernoulli(p) games are played through the rule; reported: how often
the interval where the cell stopped holds p (the rule: Clopper-Pearson at 1 - 0.05/K per look; plain: 95% at every
look, what optional stopping breaks), and the mean games played; and the games a fixed design needs for the same
width at p = 1/2.
"""

from __future__ import annotations

import argparse

import numpy as np

from mafiabench.study.stopping import Rule, fixed_n_games, simulate_coverage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half-width", type=float, default=0.05)
    parser.add_argument("--min", type=int, default=100)
    parser.add_argument("--wave", type=int, default=100)
    parser.add_argument("--max", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rule = Rule(args.half_width, args.min, args.max, args.wave)
    rng = np.random.default_rng(args.seed)
    print(rule.describe())
    print(f"fixed design, one look at 95%: {fixed_n_games(args.half_width)} games at p = 1/2")
    print(f"{'p':>5} {'rule coverage':>14} {'rule games':>11} {'plain coverage':>15} {'plain games':>12}")
    for p in (0.05, 0.2, 5 / 12, 0.5, 2 / 3, 0.9):
        cov, games, _ = simulate_coverage(rule, p, args.reps, rng)
        pcov, pgames, _ = simulate_coverage(rule, p, args.reps, rng, bonferroni=False)
        print(f"{p:>5.3f} {cov:>14.4f} {games:>11.0f} {pcov:>15.4f} {pgames:>12.0f}", flush=True)


if __name__ == "__main__":
    main()
