"""A run's fixed cost: `mafiabench run` on an experiment whose games are all landed (nothing to play), the whole
command timed from outside (interpreter start-up, imports, Prefect, the plan, landing nothing, the summary, exit).

Each source (`--src`, repeatable: e.g. a worktree of the previous commit and this one) runs in its own Prefect home,
in fresh interpreters, alternated `--repeat` times back to back so that both see the same load; the first run in a
home plays the games (not timed) and, on the shared local server, starts it. Reported per source: the median and
range of the wall time and of the CPU time (user + system, the command and its children), the summary's own wall
time, and the load average. `--no-prefect` times the same runs without Prefect.

`--games N --in-flight C` times instead whole runs that play N games, C in flight, against the fake OpenAI-compatible
server of `bench_throughput.py` answering each call after `--latency` seconds (a fresh warehouse each time, the
Prefect server warmed by a first run): the rate is N over the command's wall time, against the ideal
C / (calls per game x latency), so the fixed cost counts.

    .venv/bin/python benchmarks/bench_fixed_cost.py --src /tmp/before/src --src src --repeat 5
    .venv/bin/python benchmarks/bench_fixed_cost.py --src /tmp/before/src --src src --repeat 2 \
        --games 768 --in-flight 256 --latency 0.5
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

HTTP_EXPERIMENT = """
name = "rate"
games_per_cell = {games}
shard_size = 50
warehouse = "{warehouse}"

[[cells]]
name = "bench"
agents = {{ default = "local/fake-model" }}

[endpoints.local]
kind = "openai"
base_url = "http://127.0.0.1:{port}/v1"
key_required = false

[models.default]
timeout_s = 60
max_attempts = 3

[concurrency]
games = {in_flight}
providers = {{ local = {calls} }}
"""

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


def rates(args: argparse.Namespace, srcs: list[Path], work: Path) -> None:
    """Whole runs playing `args.games` games against a fake server with fixed latency, alternated per source."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_throughput import start_server

    proc, port = start_server(args.latency)
    rows: dict[Path, list[tuple[float, float, float, float]]] = {s: [] for s in srcs}
    try:
        for i, src in enumerate(srcs):  # warm: the shared server started, the venv's files cached
            folder = work / f"src{i}"
            folder.mkdir()
            exp = folder / "warm.toml"
            exp.write_text(HTTP_EXPERIMENT.format(games=4, warehouse=folder / "warm" / "w.duckdb", port=port,
                                                  in_flight=4, calls=64))
            run_once(src, exp, folder / "prefect-home", args.no_prefect)
        for r in range(args.repeat):
            for i, src in enumerate(srcs):
                folder = work / f"src{i}"
                exp = folder / f"rate{r}.toml"
                exp.write_text(HTTP_EXPERIMENT.format(games=args.games, warehouse=folder / f"r{r}" / "w.duckdb",
                                                      port=port, in_flight=args.in_flight,
                                                      calls=max(64, 4 * args.in_flight)))
                load = os.getloadavg()[0]
                wall, cpu, summary, out = run_once(src, exp, folder / "prefect-home", args.no_prefect)
                calls = int(re.search(r"model calls +([\d,]+)", out).group(1).replace(",", ""))  # type: ignore[union-attr]
                ideal = args.in_flight / (calls / args.games * args.latency)
                rate = args.games / wall
                rows[src].append((wall, rate, rate / ideal, load))
                print(f"  {src}: {args.games} games in {wall:.2f} s (summary {summary:.1f} s): {rate:.2f} games/s, "
                      f"{rate / ideal:.0%} of the ideal {ideal:.2f}; CPU {cpu:.2f} s; load {load:.1f}", flush=True)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    print(f"\n{args.games} games, {args.in_flight} in flight, {args.latency} s a call, whole command:")
    for src, r in rows.items():
        walls, rs, shares, loads = zip(*r, strict=True)
        print(f"{str(src)[-40:]:<40} wall {min(walls):.2f}-{max(walls):.2f} s, {min(rs):.2f}-{max(rs):.2f} games/s, "
              f"{min(shares):.0%}-{max(shares):.0%} of ideal, load {min(loads):.1f}-{max(loads):.1f}")


def stop_shared_server(home: Path) -> None:
    """The shared local servers a newer source started in this home (mafiabench.prefect_server), if any: one per
    Python environment (`mafiabench-server/<environment>/`), or one for the home in sources before issue 40."""
    for state in [home / "mafiabench-server" / "state.json", *home.glob("mafiabench-server/*/state.json")]:
        _stop_keeper(state)


def _stop_keeper(state: Path) -> None:
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
    parser.add_argument("--games", type=int, default=0, help="time runs playing this many games instead")
    parser.add_argument("--in-flight", type=int, default=256, help="games in flight (with --games)")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call (with --games)")
    args = parser.parse_args()
    srcs = [p.resolve() for p in args.src or [ROOT / "src"]]
    work = Path(tempfile.mkdtemp(prefix="bench-fixed-cost-"))
    if args.games:
        try:
            rates(args, srcs, work)
        finally:
            for i in range(len(srcs)):
                stop_shared_server(work / f"src{i}" / "prefect-home")
            shutil.rmtree(work, ignore_errors=True)
        return 0
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
