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
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SERVER = """
import sys, time
from mafiabench.testing.fake_server import FakeModelServer
srv = FakeModelServer(latency_s=float(sys.argv[1]), record=False).start()
print(srv.port, flush=True)
sys.stdin.read()  # until the parent closes our stdin
srv.stop()
"""


def start_server(latency: float) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


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
        for c in levels:
            games = max(2, rounds * c)
            shard = max(1, min(50, games))
            exp = experiment(f"bench-c{c}", port, games, c, shard, workdir / f"c{c}" / "w.duckdb", processes)
            t0 = time.perf_counter()
            s = asyncio.run(run_study(exp, progress=False))
            wall = time.perf_counter() - t0
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 16, 64, 256], help="concurrent games")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--rounds", type=int, default=2, help="games per concurrency slot")
    parser.add_argument("--overhead-games", type=int, default=600, help="scripted games for the Prefect overhead")
    parser.add_argument("--overhead-shard", type=int, default=10, help="shard size for the Prefect overhead")
    parser.add_argument("--no-prefect", action="store_true", help="skip the Prefect overhead measurement")
    parser.add_argument("--processes", type=int, default=1, help="worker processes (concurrency.processes)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    with tempfile.TemporaryDirectory(prefix="mafiabench-bench-") as tmp:
        work = Path(tmp)
        print(
            f"Throughput: fake OpenAI-compatible server, {args.latency:.3f} s per call, {os.cpu_count()} CPUs, "
            f"{args.processes} process(es) playing"
        )
        print(
            f"{'games in flight':>15} {'games':>6} {'calls/game':>10} {'play s':>7} {'games/s':>8} "
            f"{'ideal (calls)':>13} {'share':>6} {'ideal (steps)':>13} {'share':>6} {'mean in flight':>14}"
        )
        for r in throughput(args.levels, args.latency, args.rounds, work, args.processes):
            print(
                f"{r['concurrency']:>15} {r['games']:>6} {r['calls_per_game']:>10.1f} {r['play_s']:>7.2f} "
                f"{r['games_per_s']:>8.2f} {r['ideal_calls']:>13.2f} {r['games_per_s'] / r['ideal_calls']:>6.0%} "
                f"{r['ideal_steps']:>13.2f} {r['games_per_s'] / r['ideal_steps']:>6.0%} {r['games_in_flight']:>14.1f}"
            )
        if not args.no_prefect:
            o = prefect_overhead(args.overhead_games, args.overhead_shard, work)
            print(
                f"\nPrefect overhead: {o['games']} scripted games in {o['shards']} shards of {args.overhead_shard}: "
                f"{o['local_s']:.2f} s without Prefect, {o['prefect_s']:.2f} s as a flow (server already started; "
                f"starting it took {o['server_startup_s']:.1f} s) → {o['per_shard_ms']:.0f} ms per shard "
                f"(a play task and a land task)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
