"""A run's fixed cost: `mafiabench run` on an experiment whose games are all landed (nothing to play), the whole
command timed from outside (interpreter start-up, imports, Prefect, the plan, landing nothing, the summary, exit).

Each source (`--src`, repeatable: e.g. a worktree of the previous commit and this one) runs in its own Prefect home,
in fresh interpreters, alternated `--repeat` times back to back so that both see the same load; the first run in a
home plays the games (not timed) and, on the shared local server, starts it. Reported per source: the median and
range of the wall time and of the CPU time (user + system, the command and its children), the summary's own wall
time, and the load average. `--no-prefect` times the same runs without Prefect.

    .venv/bin/python benchmarks/bench_fixed_cost.py --src /tmp/before/src --src src --repeat 5
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXPERIMENT = """
name = "fixed-cost"
games_per_cell = 8
shard_size = 4
warehouse = "{warehouse}"

[[cells]]
name = "fake"
agents = {{ mafioso = "fake/alpha", default = "scripted/naive" }}
"""


def run_once(src: Path, exp: Path, home: Path, no_prefect: bool) -> tuple[float, float, float, str]:
    """(wall s, CPU s of the command and its children, the summary's wall time, stdout)."""
    env = {**os.environ, "PYTHONPATH": str(src), "PREFECT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    cmd = [sys.executable, "-m", "mafiabench.cli", "run", str(exp), "--no-progress"]
    if no_prefect:
        cmd.append("--no-prefect")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{src}: exit {done.returncode}\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    match = re.search(r"wall time +([\d.]+) s", done.stdout)
    return wall, cpu, float(match.group(1)) if match else float("nan"), done.stdout + done.stderr


def stop_shared_server(home: Path) -> None:
    """The shared local server a newer source started in this home (mafiabench.flows.server), if any."""
    state = home / "mafiabench-server" / "state.json"
    if state.exists():
        import json
        import signal

        pid = json.loads(state.read_text())["keeper_pid"]
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(200):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, action="append", help="package sources (repeat to compare)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per source, alternated")
    parser.add_argument("--no-prefect", action="store_true", help="time `run --no-prefect` instead")
    args = parser.parse_args()
    srcs = [p.resolve() for p in args.src or [ROOT / "src"]]
    work = Path(tempfile.mkdtemp(prefix="bench-fixed-cost-"))
    rows: dict[Path, list[tuple[float, float, float, float]]] = {s: [] for s in srcs}
    try:
        exps, homes = {}, {}
        for i, src in enumerate(srcs):
            folder = work / f"src{i}"
            folder.mkdir()
            exps[src] = folder / "fixed-cost.toml"
            exps[src].write_text(EXPERIMENT.format(warehouse=folder / "wh" / "w.duckdb"))
            homes[src] = folder / "prefect-home"
            t0 = time.perf_counter()
            run_once(src, exps[src], homes[src], args.no_prefect)  # plays the 8 games (and starts a shared server)
            print(f"{src}: first run (plays 8 games) {time.perf_counter() - t0:.1f} s", flush=True)
        for _ in range(args.repeat):
            for src in srcs:
                load = os.getloadavg()[0]
                wall, cpu, summary, out = run_once(src, exps[src], homes[src], args.no_prefect)
                assert "played                    0 " in out, out
                rows[src].append((wall, cpu, summary, load))
                print(f"  {src}: wall {wall:.2f} s, CPU {cpu:.2f} s, summary {summary:.1f} s, load {load:.1f}",
                      flush=True)
    finally:
        for src in srcs:
            stop_shared_server(work / f"src{srcs.index(src)}" / "prefect-home")
        shutil.rmtree(work, ignore_errors=True)
    mode = "--no-prefect" if args.no_prefect else "through Prefect"
    print(f"\nFixed cost of `mafiabench run` with nothing to play ({mode}), {args.repeat} runs per source:")
    print(f"{'source':<40} {'wall median':>11} {'wall range':>13} {'CPU median':>10} {'summary says':>12} "
          f"{'load':>9}")
    for src, r in rows.items():
        walls, cpus, summaries, loads = zip(*r, strict=True)
        print(f"{str(src)[-40:]:<40} {statistics.median(walls):>10.2f}s {min(walls):>5.2f}-{max(walls):<5.2f}s "
              f"{statistics.median(cpus):>9.2f}s {statistics.median(summaries):>11.1f}s "
              f"{min(loads):>4.1f}-{max(loads):<4.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
