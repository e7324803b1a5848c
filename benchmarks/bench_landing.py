"""Landing shard files in bulk: N games' shard files into a fresh warehouse, as a resume (or a run) lands them.

    .venv/bin/python benchmarks/bench_landing.py 1000000                 # land 1M games (written first, not timed)
    .venv/bin/python benchmarks/bench_landing.py 1000000 --build         # then `mafiabench build` on the result
    .venv/bin/python benchmarks/bench_landing.py 200000 --src /tmp/before/src --src src   # versions side by side
    .venv/bin/python benchmarks/bench_landing.py 1000000 --build --shards /tmp/shards     # write once, reuse after

Games: `--base` (default 20,000) Mini-Mafia games of policy players are played once with the engine, then copied
under new game ids and seeds until there are N, written as shard files of 500 games (what `mafiabench run` writes),
outside the timing (into `--shards` when given, unless it already holds shard files). `--same-seeds` keeps each
copy's seed (until 2026-11-26 the only way): the quality gate's copied-games check then has every game to
fingerprint, its worst case, and refuses the build.

Timed, in a fresh process (so its peak RSS is the lander's alone): `landing.land_pending`, which lands every shard
file with its landed mark, from its sidecar where it has a matching one, else by parsing its lines. `--build` then
times `mafiabench build` (staging, marts and the quality gate) in another process, and reports its exit code (2 when
the gate refused the build, after running whole). With several `--src`, the same files are landed by each version in
turn.

Each shard file also gets its columnar sidecar (`warehouse/sidecar.py`, Parquet next to the lines) when the sources
this script runs with have one (`--no-sidecars`: lines only); writing them is timed separately, as a shard writer's
extra CPU a game. A version without sidecars ignores them and parses the lines.
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

LAND = """
import sys, time
from pathlib import Path
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import connect
con = connect(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
r = landing.land_pending(con, Path(sys.argv[2]), "landing")
con.close()
print("FROM", getattr(r, "files_from_sidecar", 0), getattr(r, "files_from_lines", "all"))
print("LANDED", r.inserted, time.perf_counter() - t0, time.process_time() - c0)
"""


_GOLDEN = 0x9E3779B97F4A7C15  # a copy's seed: its original's plus a multiple of this, modulo 2**64


def write_shards(n: int, base: int, folder: Path, *, sidecars: bool = True, same_seeds: bool = False,
                 experiment: Path | None = None) -> float:
    """Write the shard files (and their sidecars); returns the CPU seconds the sidecars took. The games copied are
    `base` policy games, or `experiment`'s games when given."""
    from mafiabench.play.runner import BackendPool, play_game
    from mafiabench.record import Provenance, encode_record
    from mafiabench.study.design import iter_games
    from mafiabench.study.spec import load_experiment, parse_experiment
    from mafiabench.warehouse import landing

    write_sidecar = None
    if sidecars:
        try:
            import orjson

            from mafiabench.warehouse.raw import FlatBatch
            from mafiabench.warehouse.sidecar import write_sidecar
        except ImportError:  # sources without sidecars
            pass

    if experiment is None:
        exp = parse_experiment(
            {
                "name": "landing",
                "games_per_cell": base // 2,
                "cells": [
                    {"name": "a", "agents": {"default": "policy/random"}},
                    {"name": "b", "agents": {"detective": "policy/informed", "default": "policy/random"}},
                ],
            }
        )
    else:  # its games as it defines them (`--base` aside): model calls, faults, beliefs where it has them
        exp = load_experiment(experiment)
    models = exp.model_settings()
    pool = BackendPool(endpoints=exp.endpoint_configs())
    prov = Provenance(git_commit="bench")

    async def play() -> list[bytes]:
        in_flight = asyncio.Semaphore(64)  # a fake model's latency overlaps, as in a run

        async def one(game: Any) -> bytes:
            async with in_flight:
                return encode_record(await play_game(game.spec(exp, models), pool, provenance=prov))[1]

        return list(await asyncio.gather(*(one(g) for g in iter_games(exp))))

    lines = asyncio.run(play())
    ids = [line.split(b'"game_id":"', 1)[1].split(b'"', 1)[0] for line in lines]
    seeds = [int(line.split(b'"seed":', 1)[1].split(b",", 1)[0]) for line in lines]
    batch: list[bytes] = []
    index = 0
    sidecar_cpu = 0.0

    def flush() -> None:
        nonlocal sidecar_cpu
        path = landing.write_shard(batch, folder, index)
        if write_sidecar is not None:
            flat = FlatBatch.of([(orjson.loads(line), line) for line in batch], keep_lines=False)  # the worker has it
            c0 = time.process_time()
            write_sidecar(path, batch, flat)
            sidecar_cpu += time.process_time() - c0

    for i in range(n):
        k = i % len(lines)
        copy = i // len(lines)
        line = lines[k] if copy == 0 else lines[k].replace(ids[k], ids[k] + b"-c%d" % copy)
        if copy and not same_seeds:  # a study's games have seeds of their own; the copies' gate passes
            line = line.replace(b'"seed":%d,' % seeds[k], b'"seed":%d,' % ((seeds[k] + copy * _GOLDEN) % 2**64), 1)
        batch.append(line)
        if len(batch) == 500:
            flush()
            batch, index = [], index + 1
    if batch:
        flush()
    return sidecar_cpu


def timed(cmd: list[str], env: dict[str, str], *, may_fail: bool = False) -> tuple[str, float, float, float, int]:
    """Run `cmd`: its output, wall, CPU (user + system), peak RSS (MB) and exit code. Output goes to files, so a
    chatty child never blocks on a full pipe."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if code != 0 and not may_fail:
            raise SystemExit(f"{cmd[:4]} failed: {err.read()[-2000:]}")
        return out.read(), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("games", type=int)
    parser.add_argument("--base", type=int, default=20_000, help="games played with the engine, then copied")
    parser.add_argument("--build", action="store_true", help="then time `mafiabench build`")
    parser.add_argument("--experiment", type=Path,
                        help="copy this experiment's games (played once, as it defines them) rather than policy games")
    parser.add_argument("--src", type=Path, action="append", help="package sources (repeat to compare)")
    parser.add_argument("--no-sidecars", action="store_true", help="write the lines only")
    parser.add_argument("--shards", type=Path, help="keep the shard files in this folder; reuse them when it has some")
    parser.add_argument("--same-seeds", action="store_true",
                        help="copies keep their original's seed: the gate's copied-games check refuses the build")
    parser.add_argument("--machine-records", choices=("on", "off"), default="on",
                        help="whether a build may replay dbt's records kept on this machine by an earlier build of "
                             "the same shape (transform.build.replay; `off`: MAFIABENCH_REPLAY_CACHE=0, dbt runs)")
    args = parser.parse_args()
    srcs = args.src or [ROOT / "src"]
    with tempfile.TemporaryDirectory(prefix="bench-landing-") as tmp:
        folder = args.shards or Path(tmp) / "raw" / "landing"
        t0 = time.perf_counter()
        sidecar_cpu, reused = 0.0, bool(list(folder.glob("*.jsonl")))
        if not reused:
            if args.experiment is not None:
                print(f"--base ignored: {args.experiment}'s games are played as it defines them", flush=True)
            sidecar_cpu = write_shards(args.games, min(args.base, args.games), folder,
                                       sidecars=not args.no_sidecars, same_seeds=args.same_seeds,
                                       experiment=args.experiment)
        files = sorted(folder.glob("*.jsonl"))
        size = sum(p.stat().st_size for p in files)
        side = sum(p.stat().st_size for p in folder.glob("*.cols/*"))
        if reused:
            print(f"reused the {len(files)} shard files of {folder} ({size / 1e9:.2f} GB)", flush=True)
        else:
            print(f"wrote {args.games:,} games in {len(files)} shard files ({size / 1e9:.2f} GB; sidecars "
                  f"{side / 1e6:.0f} MB, {sidecar_cpu:.1f} s CPU to write, {sidecar_cpu / args.games * 1e3:.4f} ms a "
                  f"game) in {time.perf_counter() - t0:.1f} s (not timed below); load average {os.getloadavg()}",
                  flush=True)
        for k, src in enumerate(srcs):
            env = {**os.environ, "PYTHONPATH": str(src),
                   "MAFIABENCH_REPLAY_CACHE": "1" if args.machine_records == "on" else "0"}
            warehouse = Path(tmp) / f"w{k}.duckdb"
            out, wall, cpu, rss, _ = timed([sys.executable, "-c", LAND, str(warehouse), str(folder)], env)
            inserted, inner, _ = out.split()[-3:]
            from_side, from_lines = out.split()[-6:-4]
            n = int(inserted)
            print(f"{str(src)[-28:]}: land {n:,} games in {float(inner):.1f} s ({n / float(inner):,.0f} games/s), "
                  f"CPU {cpu:.1f} s ({n / cpu:,.0f} games per CPU s), process {wall:.1f} s, peak RSS {rss:.0f} MB, "
                  f"DuckDB file {warehouse.stat().st_size / 1e6:.0f} MB; files from sidecars {from_side}, "
                  f"from lines {from_lines}; load average {os.getloadavg()}", flush=True)
            if args.build:
                # With --same-seeds the copies share their originals' seeds and events, which the quality gate's
                # copied-games check refuses: the build runs whole (staging, marts, every check) and exits 2.
                said, wall, cpu, rss, code = timed(
                    [sys.executable, "-m", "mafiabench.cli", "build", "--warehouse", str(warehouse)], env,
                    may_fail=True,
                )
                how = "dbt replayed from the machine's records" if "replayed" in said else "dbt ran"
                print(f"build: {wall:.1f} s, CPU {cpu:.1f} s (staging, marts, quality gate; {how}), peak RSS "
                      f"{rss:.0f} MB, exit code {code}; load average {os.getloadavg()}", flush=True)
            warehouse.unlink()


if __name__ == "__main__":
    main()
