"""A scheduled run whose games keep both cores busy, after a whole build: does the build after it replay dbt?

A run rehearses the next build's dbt while its games play, on the CPU they leave idle (`transform.build.rehearsal`);
a run of a model at 256 games in flight leaves none, so its own rehearsal gets no CPU. The rehearsal a whole build
leaves behind it (`rehearsal.after_build`) covers that run when it rehearses a run's shape too. Per arm, with a fresh
records folder of its own: a run of `--games` games of a model (the fake OpenAI-compatible server of
`bench_throughput.py` answering each call after `--latency` seconds, `--in-flight` games at once), a whole build, a
wait for the rehearsal it left (when on), a run of as many games more, and the build after it, each timed as a whole
command. Arms: `on` (the rehearsal after the build, as shipped) and `off` (`MAFIABENCH_REHEARSE_AFTER_BUILD=0`, as
before the build rehearsed anything), alternated; `--src` benchmarks another tree's sources.

    .venv/bin/python benchmarks/bench_saturated_run.py on off on off
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fixed_cost import HTTP_EXPERIMENT
from bench_increment import fresh_cache, wait_after_build
from bench_throughput import start_server

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("arms", nargs="+", choices=("on", "off"))
    parser.add_argument("--games", type=int, default=768)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-saturated-"))
    proc, port = start_server(args.latency)
    try:
        for i, arm in enumerate(args.arms):
            one(work / f"{i}-{arm}", arm, port, args)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


def one(folder: Path, arm: str, port: int, args: argparse.Namespace) -> None:
    folder.mkdir(parents=True)
    cache = fresh_cache(folder / "cache")
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve()), "PREFECT_HOME": str(folder.parent / "prefect-home"),
           "MAFIABENCH_CACHE_DIR": str(cache), "MAFIABENCH_REPLAY_CACHE": "1",
           "MAFIABENCH_REHEARSE_AFTER_BUILD": "1" if arm == "on" else "0"}
    env.pop("PREFECT_API_URL", None)
    warehouse = folder / "w.duckdb"

    def run(games: int) -> str:
        exp = folder / f"e{games}.toml"
        exp.write_text(HTTP_EXPERIMENT.format(games=games, warehouse=warehouse, port=port, in_flight=args.in_flight,
                                              calls=4 * args.in_flight))
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "mafiabench.cli", "run", str(exp), "--no-progress"], env=env,
                              capture_output=True, text=True)
        if done.returncode not in (0, 3):
            raise SystemExit(f"the run failed: {done.stderr[-2000:]}")
        own = "its own rehearsal replayed or recorded" if "rehearsed" in done.stdout else "no rehearsal of its own"
        return f"{time.perf_counter() - t0:.1f} s, {own}, load {os.getloadavg()[0]:.1f}"

    def build() -> str:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "mafiabench.cli", "build", "--warehouse", str(warehouse)],
                              env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the build failed: {done.stderr[-2000:]}")
        dbt = "dbt replayed" if "replayed" in done.stdout.split("\n")[0] else "dbt ran"
        return f"{time.perf_counter() - t0:.1f} s, {dbt}"

    print(f"{arm}: run of {args.games} games {run(args.games)}", flush=True)
    print(f"{arm}: whole build {build()}", flush=True)
    print(f"{arm}: {wait_after_build(env)}", flush=True)
    print(f"{arm}: run of {args.games} games more, {args.in_flight} in flight {run(2 * args.games)}", flush=True)
    print(f"{arm}: the build after it {build()}", flush=True)


if __name__ == "__main__":
    main()
