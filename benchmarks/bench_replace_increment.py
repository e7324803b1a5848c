"""A scheduled run whose increment replays failed games, against one that only adds, on a published warehouse.

    PYTHONPATH=<tree>/src .venv/bin/python benchmarks/bench_replace_increment.py --base <published.duckdb> \
        --shards <bench_landing's shard folder> replace add

A game landed failed (a 429 past its retries, a timeout) counts as missing: the next run plays it again and the
lander replaces the failed record (warehouse.raw.load_flat), so the increment after it replaces published games.
Each arm, on its own copy of `--base` (a warehouse whose last build was a published whole one, for example
bench_landing.py's at a million, built again with `mafiabench build --full-refresh` by the tree measured): 10 games
landed failed and built (published); then 10,000 new games landed, with the 10 failed games' finished records
(`replace`: the lander replaces 10) or 10 more new games (`add`), and `mafiabench build` timed (a fresh process:
its wall, and the build's own summary); then 10,000 more new games and `mafiabench build` again (`then`: the
increment after the replacing one). The games are the shards' records under new ids (a suffix) and seeds (a shift
per copy, so the gate's copied-games check sees no two alike). Whether dbt ran or was replayed is in each summary:
the first build of a shape on a machine that keeps records pays dbt (`--machine-records` in bench_increment.py)."""

from __future__ import annotations

import argparse
import glob
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mafiabench.record import record_from_line
from mafiabench.warehouse.raw import connect, load_records


def copies(files: list[str], suffix: str, n: int, shift: int) -> list[dict[str, Any]]:
    """The first n records of `files` under new ids (`suffix`) and seeds (xor a multiple of `shift`)."""
    out: list[dict[str, Any]] = []
    for f in files:
        with open(f, "rb") as lines:
            for line in lines:
                d = json.loads(line)
                d["game_id"] += suffix
                d["seed"] = d["seed"] ^ (0x5DEECE66D1234567 * shift & (2**64 - 1))
                out.append(d)
                if len(out) >= n:
                    return out
    return out


def records(dicts: list[dict[str, Any]]) -> list[Any]:
    return [record_from_line(json.dumps(d).encode()) for d in dicts]


def build(warehouse: Path) -> tuple[float, int, str]:
    """`mafiabench build` in a process of its own: its wall, exit code and summary lines."""
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "mafiabench.cli", "build", "--warehouse", str(warehouse)],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    said = [line for line in (p.stdout + p.stderr).splitlines()
            if line.startswith("build ") or "quality gate" in line or "FAILED" in line]
    return wall, p.returncode, " | ".join(said)[:400]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("arms", nargs="+", choices=["replace", "add"])
    parser.add_argument("--base", type=Path, required=True,
                        help="a warehouse whose last build was a published whole one")
    parser.add_argument("--shards", type=Path, required=True, help="bench_landing.py's shard folder (*.jsonl)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-replace-increment"))
    args = parser.parse_args()
    files = sorted(glob.glob(str(args.shards / "*.jsonl")))
    if len(files) < 201:
        sys.exit(f"{args.shards}: {len(files)} shard files, 201 needed")
    finished = copies(files[100:101], ".f", 10, 3)
    failed = json.loads(json.dumps(finished))
    for d in failed:
        d["outcome"]["status"], d["outcome"]["winner"], d["error"] = "failed", None, "injected: ReadTimeout"
    new = copies(files[:20], ".n", 10000, 5)
    more = copies(files[200:201], ".g", 10, 7)
    next_new = copies(files[20:40], ".m", 10000, 9)
    for arm in args.arms:
        folder = args.out / arm
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        warehouse = folder / args.base.name
        shutil.copy(args.base, warehouse)
        con = connect(str(warehouse))
        load_records(con, records(failed))
        con.close()
        print(arm, "10 failed games landed; build:", build(warehouse), flush=True)
        con = connect(str(warehouse))
        landed = load_records(con, records(new))
        last = load_records(con, records(finished if arm == "replace" else more))
        con.close()
        print(arm, "landed", landed.inserted + last.inserted, "replaced", last.replaced, flush=True)
        wall, rc, said = build(warehouse)
        print(f"{arm}: build {wall:.1f} s (exit {rc}): {said}", flush=True)
        con = connect(str(warehouse))
        load_records(con, records(next_new))
        con.close()
        wall, rc, said = build(warehouse)
        print(f"{arm} then 10,000 new: build {wall:.1f} s (exit {rc}): {said}", flush=True)
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
