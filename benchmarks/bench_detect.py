"""Mafia Detector step throughput: detections per second through the real `openai` SDK against the local fake
server at a fixed latency, at several concurrency limits, beside the ideal wall time (the calls in full waves of
`concurrency` at the latency, plus the fixed cost of reading, cleansing and landing, measured by the offline
`policy/most-voted` detector, which makes no call).

Plays N asynchronous games (10 players, 2 mafia, the default 150-second days; `scripted/naive` in every seat) into a
warehouse once, then copies it for each measurement, so every run detects every (game, day cut) afresh.

    .venv/bin/python benchmarks/bench_detect.py                        # 20 games, latency 0.2 s, 1 8 32 in flight
    .venv/bin/python benchmarks/bench_detect.py --games 40 --levels 8 64 --latency 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import math
import shutil
import tempfile
import time
from pathlib import Path

from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.detect.detection_runs import DetectorSpec, run_detection
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.testing import FakeModelServer
from mafiabench.warehouse.raw import connect, load_records


async def play(n: int) -> list:  # type: ignore[type-arg]
    pool = BackendPool()
    specs = [GameSpec.build(f"bench-detect-{i}", "async", None, i, {"default": "scripted/naive"},
                            design={"experiment": "bench-detect", "cell": "c", "game_index": i}) for i in range(n)]
    return list(await asyncio.gather(*(play_game(s, pool) for s in specs)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-detect-"))
    try:
        t0 = time.perf_counter()
        records = asyncio.run(play(args.games))
        base = folder / "base.duckdb"
        con = connect(base)
        load_records(con, records)
        con.close()
        print(f"{args.games} async games played and landed in {time.perf_counter() - t0:.1f} s")

        def fresh(name: str) -> Path:
            path = folder / f"{name}.duckdb"
            shutil.copy(base, path)
            return path

        wh = fresh("policy")
        t0 = time.perf_counter()
        rep = run_detection(wh, DetectorSpec(models=("policy/most-voted",)))
        wall = time.perf_counter() - t0
        print(f"policy/most-voted: {rep.landed} detections ({args.games} games) in {wall:.2f} s = "
              f"{rep.landed / wall:.0f}/s (read, cleanse, rank, land)")
        print()
        fixed = wall  # reading the games, cleansing and landing: what every run pays besides the calls
        print("| in flight | detections | wall s | detections/s | ideal wall s | share of ideal |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        with FakeModelServer(latency_s=args.latency, seed=1) as srv:
            endpoints = {"local": EndpointConfig("local", "openai", base_url=srv.base_url_openai, key_required=False)}
            for level in args.levels:
                wh = fresh(f"llm-{level}")
                spec = DetectorSpec(models=("local/detector",), concurrency=level)
                t0 = time.perf_counter()
                rep = run_detection(wh, spec, endpoints=endpoints)
                wall = time.perf_counter() - t0
                ideal = math.ceil(rep.landed / level) * args.latency + fixed  # calls in full waves, plus the fixed part
                assert not rep.failed, rep.failed[:3]
                print(f"| {level} | {rep.landed} | {wall:.2f} | {rep.landed / wall:.1f} | {ideal:.2f} | "
                      f"{ideal / wall:.0%} |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
