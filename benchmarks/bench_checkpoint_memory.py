"""Why landing model-call games grows DuckDB's peak memory, and what bounds it: the checkpoint rewrites the table's
last, partly filled row group, so with ~30 KB prompts per call the peak grows with that row group (default 122,880
rows, ~3.6 GB of prompt text) until it is full. A smaller row group (an ATTACH option) bounds it.

Each "shard" appends 450 rows (50 games x 9 calls) of ~30 KB strings on a fresh connection, checkpoints and closes,
as a landing does; the process's peak RSS is printed every 30 shards, for the default row group and for 2,048 rows,
each in its own process.

    .venv/bin/python benchmarks/bench_checkpoint_memory.py            # 150 shards each
    .venv/bin/python benchmarks/bench_checkpoint_memory.py --shards 60
"""

from __future__ import annotations

import argparse
import random
import resource
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb


def land(path: Path, shards: int, row_group_size: int | None) -> list[tuple[int, int]]:
    """(shards landed, peak RSS in MB) every 30 shards."""
    text = "".join(random.Random(0).choice(string.ascii_letters) for _ in range(30_000))

    def connect() -> duckdb.DuckDBPyConnection:
        if row_group_size is None:
            return duckdb.connect(str(path))
        con = duckdb.connect()
        con.execute(f"attach '{path}' as w (row_group_size {row_group_size})")
        con.execute("use w")
        return con

    con = connect()
    con.execute("create table calls (i integer, request_json varchar)")
    con.close()
    out = []
    for shard in range(shards):
        con = connect()
        rows = [(shard * 450 + k, text[: 29_000 + k % 1_000] + str(k)) for k in range(450)]
        con.executemany("insert into calls values (?, ?)", rows)
        con.execute("checkpoint")
        con.close()
        if shard % 30 == 29:
            out.append((shard + 1, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=150)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048], help="row group sizes to compare")
    parser.add_argument("--row-group-size", type=int, default=None, help=argparse.SUPPRESS)  # one child's setting
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory() as tmp:
            for shards, peak in land(Path(tmp) / "w.duckdb", args.shards, args.row_group_size):
                print(f"{shards} {peak}", flush=True)
        return 0
    results = {}
    for label, size in (("default (122,880 rows)", None), *((f"{n:,} rows", n) for n in args.sizes)):
        cmd = [sys.executable, __file__, "--child", "--shards", str(args.shards)]
        if size is not None:
            cmd += ["--row-group-size", str(size)]
        lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
        results[label] = dict(zip(map(int, lines[::2]), map(int, lines[1::2]), strict=True))
    shards = sorted(next(iter(results.values())))
    print(f"Peak RSS (MB) while landing shards of 450 ~30 KB rows, duckdb {duckdb.__version__}")
    print("| row group | " + " | ".join(f"{n} shards" for n in shards) + " |")
    print("| --- |" + " ---: |" * len(shards))
    for label, peaks in results.items():
        print(f"| {label} | " + " | ".join(str(peaks[n]) for n in shards) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
