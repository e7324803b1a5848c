"""The latent model's NUTS in the reference's coordinates and in the gauge ones, on the published design.

The cells are the Mini-Mafia study's released counts (140 cells, 14,000 games; the fixture
tests/fixtures/published_mini_mafia/win_counts.csv), optionally with every count multiplied (`--scale 10 50`: the
same proportions from ten and fifty times the games, a study that keeps playing). For each scale it fits with each
coordinates forced on every part of the design, then with the fit's own choice (`latent._sample`: gauge on each
part that places all its parameters), and prints the mean leapfrog steps a draw, the divergences, the smallest bulk
ESS and largest split R-hat of the normalised a, b, c, the wall time of the fit (the sampler's compile included the
first time a shape is seen in the process, and said so), and the posterior sds of the gauge fit against the
reference fit's.

    .venv/bin/python benchmarks/bench_latent_coordinates.py                 # the published counts
    .venv/bin/python benchmarks/bench_latent_coordinates.py --scale 1 10 50
    .venv/bin/python benchmarks/bench_latent_coordinates.py --warehouse warehouse/mafiabench.duckdb --scale 1 93

`--warehouse` fits a warehouse's latent cells instead (`fct_games`, the games `mart_latent` fits, all studies
pooled): the demo's policy baselines meet no model, a part of the design sampled apart (`latent.components`).

Nothing is cached between fits (the fit cache is bypassed: `_sample` is called directly).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the published counts' reader (tests/support/published_mini_mafia.py)

from mafiabench.transform.models import latent  # noqa: E402
from support.published_mini_mafia import GAMES_PER_CELL, published_cells  # noqa: E402


def _run(cells: list[tuple[str, str, str, int, int]], coordinates: str | None) -> tuple[latent.NutsFit, float]:
    started = time.perf_counter()
    fit = latent._sample(cells, chains=latent.CHAINS, warmup=latent.WARMUP, draws=latent.DRAWS,
                         target_accept=latent.TARGET_ACCEPT, seed=latent.SEED, coordinates=coordinates)
    return fit, time.perf_counter() - started


def _warehouse_cells(path: Path) -> list[tuple[str, str, str, int, int]]:
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.sql(f"""select mafioso_model, villager_model, detective_model, count(*),
                                  count(*) filter (where mafia_won)
                           from fct_games where {latent._LATENT_GAMES} group by all order by all""").fetchall()
    return [(m, v, d, int(n), int(w)) for m, v, d, n, w in rows]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=int, nargs="+", default=[1], help="multiply every cell's games and wins")
    p.add_argument("--warehouse", type=Path, help="fit this warehouse's latent cells, not the published ones")
    args = p.parse_args(argv)
    base = _warehouse_cells(args.warehouse) if args.warehouse else [
        (m, v, d, GAMES_PER_CELL, w) for (m, v, d), (w, *_) in published_cells().items()]
    parts = latent.components(base)
    print(f"undetermined: {latent.undetermined(base)}; {len(parts)} part(s) of the design: "
          f"{[len(part) for part in parts]} cells")
    seen: set[str] = set()
    print(f"{len(base)} cells; {latent.CHAINS} chains x {latent.DRAWS} draws after {latent.WARMUP} warmup; "
          f"target_accept {latent.TARGET_ACCEPT}; seed {latent.SEED}")
    print("| games | coordinates | mean steps a draw | divergences | min bulk ESS | max R-hat | wall s |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for scale in args.scale:
        cells = [(m, v, d, n * scale, w * scale) for m, v, d, n, w in base]
        fits = {}
        for coordinates in (*latent.COORDINATES, None):
            fit, wall = _run(cells, coordinates)
            label = coordinates or f"the fit's own: {fit.coordinates}"
            fits[label] = fit
            compiled = "" if fit.coordinates in seen else " (compile included)"
            seen.add(fit.coordinates)
            print(f"| {fit.n_games:,} | {label} | {fit.mean_steps:.1f} | {fit.divergences} | "
                  f"{fit.min_ess:,.0f} | {fit.max_r_hat:.4f} | {wall:.1f}{compiled} |")
        ratio = np.concatenate([np.asarray(fits["gauge"].sd[k]) / np.asarray(fits["reference"].sd[k])
                                for k in ("m", "d", "v")])
        print(f"|  | gauge sd / reference sd | mean {ratio.mean():.3f}, range {ratio.min():.3f}-{ratio.max():.3f} "
              "|  |  |  |  |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
