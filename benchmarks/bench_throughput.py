"""Throughput of a study against a model server with a fixed latency, and Prefect's overhead per shard.

Games are played through the whole stack (agents → OpenAI SDK over HTTP → the local fake server → records written
atomically → DuckDB) by `mafiabench.study.run`, as `mafiabench run --no-prefect` does. The fake server runs in its own
process (so its threads do not share our GIL) and answers every call after `--latency` seconds.

Ideal throughput at c concurrent games is c ÷ (calls per game × latency) games per second (the figure asked for),
but a Mini-Mafia game makes its three votes at once, so its critical path is shorter than its calls: we also show
c ÷ (sequential steps × latency), the true ceiling.

Prefect's overhead per shard: the same scripted (zero-latency) games played with many small shards, through the flow
(on Prefect's temporary server, started and warmed before timing) and without it.

    .venv/bin/python benchmarks/bench_throughput.py                 # 1, 16, 64, 256 games in flight, 0.2 s calls
    .venv/bin/python benchmarks/bench_throughput.py --levels 1 16 --latency 0.5 --rounds 3
    .venv/bin/python benchmarks/bench_throughput.py --levels 64 256 --processes 2 --no-prefect   # worker processes
    .venv/bin/python benchmarks/bench_throughput.py --levels 256 --latency 0.5 --no-prefect \
        --src /tmp/before/src --src src --repeat 2          # two versions side by side, alternated

CPU per call is reported for both sides: the client (this process and its worker processes) and the fake server's
process, so one sees where the machine's cores go during the run (both share them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SERVER = """
import sys, time
from mafiabench.testing.fake_http_server import FakeModelServer
srv = FakeModelServer(latency_s=float(sys.argv[1]), record=False).start()
print(srv.port, flush=True)
sys.stdin.read()  # until the parent closes our stdin
srv.stop()
"""


def start_server(latency: float) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # the same sources as ours
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this process and its waited-for children (the worker processes, joined when a run ends)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def experiment(
    name: str, port: int, games: int, concurrency: int, shard_size: int, warehouse: Path, processes: int = 1
) -> Any:
    from mafiabench.study.spec import parse_experiment

    return parse_experiment(
        {
            "name": name,
            "games_per_cell": games,
            "shard_size": shard_size,
            "warehouse": str(warehouse),
            "cells": [{"name": "bench", "agents": {"default": "local/fake-model"}}],
            "endpoints": {
                "local": {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "key_required": False}
            },
            "models": {"default": {"timeout_s": 60, "max_attempts": 3}},
            "concurrency": {
                "games": concurrency,
                "providers": {"local": max(64, 4 * concurrency)},
                "processes": processes,
            },
        },
        "<bench>",
    )


def throughput(
    levels: list[int], latency: float, rounds: int, workdir: Path, processes: int = 1
) -> list[dict[str, float]]:
    from mafiabench.study.run import run_study

    proc, port = start_server(latency)
    rows = []
    try:
        # warm up (imports, first clients) so that the CPU per call below is the steady state's
        warm = experiment("warm", port, 2, 2, 2, workdir / "warm" / "w.duckdb", processes)
        asyncio.run(run_study(warm, progress=False))
        for c in levels:
            games = max(2, rounds * c)
            shard = max(1, min(50, games))
            exp = experiment(f"bench-c{c}", port, games, c, shard, workdir / f"c{c}" / "w.duckdb", processes)
            load = os.getloadavg()[0]
            server0, client0 = proc_cpu(proc.pid), own_cpu()
            t0 = time.perf_counter()
            s = asyncio.run(run_study(exp, progress=False))
            wall = time.perf_counter() - t0
            server_cpu, client_cpu = proc_cpu(proc.pid) - server0, own_cpu() - client0
            assert s.games_failed == 0, s.failures[:1]
            calls_per_game = s.usage.calls / s.games_played
            depth = calls_per_game - 2  # the three votes of a Mini-Mafia game are one step
            achieved = s.games_played / s.play_wall_s
            rows.append(
                {
                    "concurrency": c,
                    "games": s.games_played,
                    "calls_per_game": calls_per_game,
                    "play_s": s.play_wall_s,
                    "wall_s": wall,
                    "games_per_s": achieved,
                    "ideal_calls": c / (calls_per_game * latency),
                    "ideal_steps": c / (depth * latency),
                    "games_in_flight": s.games_concurrency,
                    "client_ms_per_call": client_cpu / s.usage.calls * 1000,
                    "server_ms_per_call": server_cpu / s.usage.calls * 1000,
                    "load": load,
                }
            )
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    return rows


def prefect_overhead(games: int, shard_size: int, workdir: Path) -> dict[str, float]:
    """Same scripted games with and without the flow; the difference per shard is Prefect's cost."""
    os.environ.setdefault("PREFECT_HOME", str(workdir / "prefect-home"))
    for key, value in {
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_TASKS_DEFAULT_NO_CACHE": "true",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }.items():
        os.environ.setdefault(key, value)
    from mafiabench.commands.run import flow_module
    from mafiabench.study.run import run_study

    module = flow_module()
    exp_file = workdir / "overhead.toml"
    text = (
        'name = "overhead"\ngames_per_cell = {g}\nshard_size = {s}\nwarehouse = "{w}"\n'
        '[[cells]]\nname = "naive"\nagents = {{ default = "scripted/naive" }}\n'
    )

    async def warm() -> None:
        from prefect import flow

        @flow
        async def noop() -> int:
            return 1

        await noop()

    t0 = time.perf_counter()
    asyncio.run(warm())
    startup = time.perf_counter() - t0

    results = {}
    for mode in ("local", "prefect"):
        wh = workdir / f"overhead-{mode}" / "w.duckdb"
        exp_file.write_text(text.format(g=games, s=shard_size, w=wh))
        t0 = time.perf_counter()
        if mode == "local":
            from mafiabench.study.spec import load_experiment

            asyncio.run(run_study(load_experiment(exp_file), progress=False))
        else:
            asyncio.run(module.study_flow(experiment_path=str(exp_file), progress=False))
        results[mode] = time.perf_counter() - t0
    shards = -(-games // shard_size)
    return {
        "games": games,
        "shards": shards,
        "local_s": results["local"],
        "prefect_s": results["prefect"],
        "per_shard_ms": (results["prefect"] - results["local"]) / shards * 1000,
        "server_startup_s": startup,
    }


HEADER = (
    f"{'src':<24} {'in flight':>9} {'games':>6} {'calls/game':>10} {'play s':>7} {'games/s':>8} {'ideal':>7} "
    f"{'share':>6} {'share (steps)':>13} {'client ms/call':>14} {'server ms/call':>14} {'load':>5}"
)


def row(label: str, r: dict[str, float]) -> str:
    return (
        f"{label[-24:]:<24} {r['concurrency']:>9} {r['games']:>6} {r['calls_per_game']:>10.1f} {r['play_s']:>7.2f} "
        f"{r['games_per_s']:>8.2f} {r['ideal_calls']:>7.2f} {r['games_per_s'] / r['ideal_calls']:>6.0%} "
        f"{r['games_per_s'] / r['ideal_steps']:>13.0%} {r['client_ms_per_call']:>14.2f} "
        f"{r['server_ms_per_call']:>14.2f} {r['load']:>5.1f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 16, 64, 256], help="concurrent games")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--rounds", type=int, default=2, help="games per concurrency slot")
    parser.add_argument("--overhead-games", type=int, default=600, help="scripted games for the Prefect overhead")
    parser.add_argument("--overhead-shard", type=int, default=10, help="shard size for the Prefect overhead")
    parser.add_argument("--no-prefect", action="store_true", help="skip the Prefect overhead measurement")
    parser.add_argument("--processes", type=int, default=1, help="worker processes (concurrency.processes)")
    parser.add_argument(
        "--src", type=Path, action="append", help="package sources to run (repeat to compare; default: this one)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="alternate the sources this many times")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one source, rows as JSON lines
    args = parser.parse_args()
    if args.json:
        sys.path.insert(0, str(args.src[0]))
        with tempfile.TemporaryDirectory(prefix="mafiabench-bench-") as tmp:
            for r in throughput(args.levels, args.latency, args.rounds, Path(tmp), args.processes):
                print(json.dumps(r), flush=True)
        return 0
    srcs = [p.resolve() for p in args.src or [ROOT / "src"]]
    print(
        f"Throughput: fake OpenAI-compatible server, {args.latency:.3f} s per call, {os.cpu_count()} CPUs, "
        f"{args.processes} process(es) playing; ideal = games in flight / (calls per game x latency)"
    )
    print(HEADER, flush=True)
    common = ["--levels", *map(str, args.levels), "--latency", str(args.latency), "--rounds", str(args.rounds)]
    for _ in range(args.repeat):
        for src in srcs:
            # each version in a fresh interpreter: imports, SDK clients and the fake server are its own
            cmd = [sys.executable, __file__, "--json", "--src", str(src), "--processes", str(args.processes), *common]
            env = {**os.environ, "PYTHONPATH": str(src)}
            out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=True).stdout
            for line in out.splitlines():
                print(row(str(src), json.loads(line)), flush=True)
    if not args.no_prefect:
        sys.path.insert(0, str(srcs[-1]))
        with tempfile.TemporaryDirectory(prefix="mafiabench-bench-") as tmp:
            o = prefect_overhead(args.overhead_games, args.overhead_shard, Path(tmp))
        print(
            f"\nPrefect overhead: {o['games']} scripted games in {o['shards']} shards of {args.overhead_shard}: "
            f"{o['local_s']:.2f} s without Prefect, {o['prefect_s']:.2f} s as a flow (server already started; "
            f"starting it took {o['server_startup_s']:.1f} s) → {o['per_shard_ms']:.0f} ms per shard "
            f"(a play task and a land task)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
