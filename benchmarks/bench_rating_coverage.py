"""Do the leaderboard's intervals hold when the model is wrong? Coverage of planted strengths, with line-up effects.

Each replicate plants strengths a, b ~ Normal(0, 1) for 8 models and h = -0.4, draws random Mini-Mafia cells (a
mafioso, a detective, two villagers of one model: three distinct models; a cell is a line-up) and plays each cell's
games from the team model of transform/models/ratings.py plus, when asked, a line-up effect u ~ Normal(0, sd) shared
by the cell's games (what the team means do not capture: real games have chi-square/df about 3 over line-ups). It
fits the side ratings as the mart does (`fit(kind='sides')`, `summarise`) and counts how often each *rated* model's 95%
interval holds its planted strength (centred over the models that played the side): the interval the page shows
(robust when the line-ups' chi-square says over-dispersed), and the model-based and robust ones each alone.

    .venv/bin/python benchmarks/bench_rating_coverage.py               # 6 rows x 200 replicates
    .venv/bin/python benchmarks/bench_rating_coverage.py --reps 50     # quicker
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from scipy import special

from mafiabench.transform.models.ratings import fit, line_ups, summarise

MODELS = 8
DESIGNS = {"few": (40, 10), "many": (100, 50)}  # cells, games per cell


def replicate(rng: np.random.Generator, cells: int, per_cell: int, sd: float) -> dict[str, list[bool]]:
    a, b, h = rng.normal(0, 1, MODELS), rng.normal(0, 1, MODELS), -0.4
    names = [f"m{i}" for i in range(MODELS)]
    trio = np.array([rng.choice(MODELS, 3, replace=False) for _ in range(cells)])
    eta = h + a[trio[:, 0]] - (b[trio[:, 1]] + 2 * b[trio[:, 2]]) / 3 + rng.normal(0, sd, cells) * (sd > 0)
    wins = rng.binomial(per_cell, special.expit(eta))
    games = []
    for (i, j, k), w in zip(trio, wins, strict=True):
        seats = ([names[i]], [names[j], names[k], names[k]])
        games += [(*seats, True)] * int(w) + [(*seats, False)] * int(per_cell - w)
    data = line_ups(games)
    post = fit(data, kind="sides", draws=200)
    out: dict[str, list[bool]] = {"shown": [], "model": [], "robust": [], "robust_chosen": [post.interval == "robust"]}
    for side, truth in (("mafia", a), ("town", b)):
        rows = summarise("s", side, data, post, side)
        played = np.array([r["n_games"] > 0 for r in rows])
        planted = truth - truth[played].mean()
        for r, t in zip(rows, planted, strict=True):
            if not r["rated"]:
                continue
            out["shown"].append(r["ci_low"] <= t <= r["ci_high"])
            out["model"].append(r["model_low"] <= t <= r["model_high"])
            out["robust"].append(r["robust_low"] <= t <= r["robust_high"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    print(f"load {os.getloadavg()[0]:.1f}; {MODELS} models, random Mini-Mafia cells; {args.reps} replicates a row")
    print("| design | line-up sd | games | shown | model-based | robust | robust chosen | rated | s/replicate |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    worst = 1.0
    for design, (cells, per_cell) in DESIGNS.items():
        for sd in (0.0, 0.3, 0.5):
            rng = np.random.default_rng([args.seed, cells, int(sd * 10)])
            tally: dict[str, list[bool]] = {"shown": [], "model": [], "robust": [], "robust_chosen": []}
            start = time.perf_counter()
            for _ in range(args.reps):
                for key, values in replicate(rng, cells, per_cell, sd).items():
                    tally[key] += values
            seconds = (time.perf_counter() - start) / args.reps
            shown, model, robust = (float(np.mean(tally[k])) for k in ("shown", "model", "robust"))
            worst = min(worst, shown)
            print(f"| {design}: {cells} cells x {per_cell} | {sd} | {cells * per_cell:,} | {shown:.3f} | {model:.3f} "
                  f"| {robust:.3f} | {np.mean(tally['robust_chosen']):.2f} | "
                  f"{len(tally['shown']) / (2 * MODELS * args.reps):.2f} | {seconds:.3f} |")
    print(f"lowest coverage of the shown intervals: {worst:.3f}")
    return 0 if worst >= 0.93 else 1


if __name__ == "__main__":
    sys.exit(main())
