"""Scripted games per second through a whole `mafiabench run` (plan, play, shard files, landing), before/after.

    .venv/bin/python benchmarks/bench_scripted_run.py 20000
    .venv/bin/python benchmarks/bench_scripted_run.py 20000 --src /path/to/other/checkout/src   # compare a version
    .venv/bin/python benchmarks/bench_scripted_run.py 2000 --agents scripted/naive             # scripted model calls

Each run is a fresh warehouse and a fresh `mafiabench run --no-prefect` process playing Mini-Mafia games with policy
players (`policy/random`, and `policy/informed` detectives in the second cell: no model, what "scripted games" means
in issue 13) in shards of 500 with 256 games in flight, `concurrency.processes` as given (default `auto`: each
version's own choice; policy shards go to one worker per core since issue 13's shard workers). Reported: wall time
of the whole command (Python start and imports included), games per second, and the process's CPU time (user +
system, its threads, DuckDB's and its worker processes' included: they are reaped children), which is what a shared
machine does not distort. Note the load average (`uptime`) with the figures: other work inflates the wall time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_run_memory import run_mafiabench  # noqa: E402  (a sibling script)

EXPERIMENT = """
name = "scripted"
games_per_cell = {per_cell}
shard_size = {shard}
warehouse = "{warehouse}"

[[cells]]
name = "a"
agents = {{ default = "{agents}" }}

[[cells]]
name = "b"
agents = {{ detective = "policy/informed", default = "{agents}" }}

[concurrency]
games = 256
processes = {processes}
"""
# `auto` (the default) lets each version choose: one process before shard workers existed, one worker per core after.


def run_once(games: int, src: Path, agents: str, shard: int, processes: str) -> tuple[float, float, float]:
    text = EXPERIMENT.format(
        per_cell=games // 2,
        warehouse="{warehouse}",
        agents=agents,
        shard=shard,
        processes=processes if processes != "auto" else '"auto"',
    )
    return run_mafiabench(text, src)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="+", type=int, help="games per run")
    parser.add_argument("--src", type=Path, action="append", help="package sources to run (repeat to compare)")
    parser.add_argument("--agents", default="policy/random", help="agent of every other seat")
    parser.add_argument("--shard", type=int, default=500)
    parser.add_argument("--processes", default="auto", help='worker processes: a number, or "auto" (default)')
    parser.add_argument("--rounds", type=int, default=1, help="alternate the sources this many times")
    args = parser.parse_args()
    srcs = args.src or [ROOT / "src"]
    print(f"{'src':<28} {'games':>8} {'wall s':>8} {'games/s':>8} {'CPU s':>7} {'CPU ms/game':>11} {'RSS MB':>7}")
    for n in args.sizes:
        for _ in range(args.rounds):
            for src in srcs:
                wall, cpu, rss = run_once(n, src, args.agents, args.shard, args.processes)
                label = str(src)[-28:]
                row = f"{label:<28} {n:>8,} {wall:>8.1f} {n / wall:>8.0f} {cpu:>7.1f} {cpu * 1000 / n:>11.2f}"
                print(f"{row} {rss:>7.0f}", flush=True)


if __name__ == "__main__":
    main()
