"""`mafiabench catalogue`'s wall and CPU time, cold (an empty cache folder: dbt parses the project and the scratch
warehouse is built) and warm (the same cache folder again), for each source tree given.

Each source (`--src`, repeatable: e.g. an export of the previous commit's `src/` and this one's) runs in fresh
interpreters with its own cache folder (`MAFIABENCH_CACHE_DIR`), alternated `--repeat` times back to back so that
both see the same load. A round empties the folder, runs the command once (cold), then `--warm` times (warm), then,
for a source also named by `--no-cache`, once with that flag (warm manifests, the build afresh). Every run writes
the catalogue to a temporary file, and all outputs must be the same bytes (the script fails otherwise). CPU = user +
system of the command (and its children). Prints a Markdown table: median and range per source and kind, and the
load average.

    git archive <before> src | tar -x -C /tmp/before
    .venv/bin/python benchmarks/bench_catalogue.py --src /tmp/before/src --src src --no-cache src --repeat 3
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(src: Path, cache: Path, out: Path, extra: list[str]) -> tuple[float, float, str]:
    env = {**os.environ, "PYTHONPATH": str(src), "MAFIABENCH_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-c", "from mafiabench.cli import run; run()", "catalogue", "--output", str(out), *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{src}: exit {done.returncode}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, action="append", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--no-cache", action="append", type=Path, default=[],
                        help="a source (as given to --src) also timed once more per round with --no-cache")
    args = parser.parse_args()
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    loads: list[float] = []
    texts: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="mafiabench-bench-catalogue-") as tmp:
        out = Path(tmp) / "catalogue.md"
        for _ in range(args.repeat):
            for src in args.src:
                cache = Path(tmp) / "cache" / str(args.src.index(src))
                shutil.rmtree(cache, ignore_errors=True)
                runs = [("cold", []), *[("warm", [])] * args.warm]
                if src in args.no_cache:
                    runs.append(("warm, --no-cache", ["--no-cache"]))
                for kind, extra in runs:
                    loads.append(os.getloadavg()[0])
                    wall, cpu, text = timed(src.resolve(), cache, out, extra)
                    texts.add(text)
                    times.setdefault((str(src), kind), []).append((wall, cpu))
                    print(f"{src} {kind}: wall {wall:.2f} s, CPU {cpu:.2f} s", file=sys.stderr, flush=True)
    if len(texts) != 1:
        raise SystemExit(f"the runs printed {len(texts)} different catalogues")
    print("| source | run | wall (median, range) | CPU (median, range) | runs |")
    print("| --- | --- | ---: | ---: | ---: |")
    for (src, kind), values in times.items():
        walls, cpus = [w for w, _ in values], [c for _, c in values]
        print(f"| `{src}` | {kind} | {statistics.median(walls):.1f} s ({min(walls):.1f}-{max(walls):.1f}) | "
              f"{statistics.median(cpus):.2f} s ({min(cpus):.2f}-{max(cpus):.2f}) | {len(values)} |")
    print(f"\nload average (1 min) during the runs: {min(loads):.1f}-{max(loads):.1f}; every run printed the same "
          f"catalogue ({len(next(iter(texts)))} characters)")


if __name__ == "__main__":
    main()
