"""Peak memory of a whole `mafiabench run` as the number of games grows: it must stay flat.

    .venv/bin/python benchmarks/bench_run_memory.py 15000 30000 60000
    .venv/bin/python benchmarks/bench_run_memory.py 15000 --src /path/to/other/checkout/src   # compare a version

Each size is a fresh warehouse and a fresh `mafiabench run --no-prefect` process playing scripted Mini-Mafia games
(`scripted/naive` in every seat: real model calls through the backend interface, no network), in shards of 50 with
64 games in flight, landing every shard. The figure is the run process's peak resident set size (`os.wait4`'s
`ru_maxrss`: DuckDB runs in-process, so its memory is included). A run that kept every shard's records until its
end grew by about 55 KB per game.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXPERIMENT = """
name = "memory"
games_per_cell = {per_cell}
shard_size = 50
warehouse = "{warehouse}"

[[cells]]
name = "a"
agents = {{ default = "scripted/naive" }}

[[cells]]
name = "b"
agents = {{ mafioso = "scripted/naive", default = "policy/random" }}

[concurrency]
games = 64
"""


def run_mafiabench(experiment: str, src: Path, *extra: str) -> tuple[float, float, float]:
    """`mafiabench run --no-prefect` of an experiment text (`{warehouse}` filled in) in a fresh folder and process:
    (wall s, CPU s of the process and its threads, peak RSS in MB)."""
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        exp = Path(tmp) / "bench.toml"
        exp.write_text(experiment.replace("{warehouse}", str(Path(tmp) / "w.duckdb")))
        env = {**os.environ, "PYTHONPATH": str(src)}
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mafiabench.cli", "run", str(exp), "--no-prefect", "--no-progress", *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 3):
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise SystemExit(f"run exited {code}: {err[-2000:]}")
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0  # Linux reports KB


def run_once(games: int, src: Path) -> tuple[float, float]:
    wall, _, rss = run_mafiabench(EXPERIMENT.format(per_cell=games // 2, warehouse="{warehouse}"), src)
    return wall, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="+", type=int, help="games per run")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="package sources to run (default: this one)")
    args = parser.parse_args()
    print(f"{'games':>8} {'wall s':>8} {'games/s':>8} {'peak RSS MB':>12} {'KB/game':>8}")
    for n in args.sizes:
        wall, rss = run_once(n, args.src)
        print(f"{n:>8,} {wall:>8.1f} {n / wall:>8.0f} {rss:>12.0f} {rss * 1024 / n:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
