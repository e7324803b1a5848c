"""What the landing writer's small row groups cost the readers: the marts build and raw-table scans over a warehouse
landed with DuckDB's default row groups (122,880 rows) and with the landing writer's (`LANDING_ROW_GROUP_SIZE`,
or each of `--sizes`), side by side in one process.

    .venv/bin/python benchmarks/bench_row_groups.py 100000
    .venv/bin/python benchmarks/bench_row_groups.py 100000 --rounds 2

Each warehouse gets the same synthetic raw rows (bench_marts.py's generator), landed in chunks of `--chunk` games
through `warehouse.raw.connect` (with `landing=True` for the small row groups), closed, then reopened directly as a
build does: the figures are the build (dbt + Python models, staged; no gate), a full scan of the raw tables, the
number of row groups of `raw_model_calls` and the file's size.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_marts import land_frames, synthetic_frames
from mafiabench.transform.build.marts import stage
from mafiabench.warehouse import raw
from mafiabench.warehouse.raw import connect

SCAN = """
select (select count(*) from raw_events where text is not null),
       (select sum(length(request_json)) from raw_model_calls),
       (select count(distinct game_id) from raw_players)
"""


def cpu_s() -> float:
    """CPU seconds of this process and its threads (DuckDB's included): steadier than wall time on a shared machine."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(n: int, chunk: int, *, row_group_size: int | None) -> dict[str, float]:
    landing = row_group_size is not None
    if landing:
        raw.LANDING_ROW_GROUP_SIZE = row_group_size  # what `connect(landing=True)` attaches with
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        t0 = time.perf_counter()
        for start in range(0, n, chunk):
            frames = synthetic_frames(min(chunk, n - start), seed=start, offset=start)
            con = connect(path, landing=landing)
            land_frames(con, frames)
            con.close()
        t_land = time.perf_counter() - t0
        con = connect(path)
        (groups,) = con.execute(
            "select count(distinct row_group_id) from pragma_storage_info('raw_model_calls')"
        ).fetchone() or (0,)
        t1 = time.perf_counter()
        con.execute(SCAN).fetchall()
        t_scan = time.perf_counter() - t1
        t2, c2 = time.perf_counter(), cpu_s()
        stage(con)
        t_build, c_build = time.perf_counter() - t2, cpu_s() - c2
        con.close()
        return {"land": t_land, "scan": t_scan, "build": t_build, "build_cpu": c_build, "groups": groups,
                "mb": path.stat().st_size / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("games", nargs="?", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=10_000, help="games per landing (one connection each)")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the layouts this many times")
    parser.add_argument("--sizes", type=int, nargs="+", default=[raw.LANDING_ROW_GROUP_SIZE],
                        help="landing row group sizes to compare with the default")
    args = parser.parse_args()
    print(f"{args.games:,} synthetic games landed in chunks of {args.chunk:,}; build without the gate")
    print("| row groups | round | land s | raw scan s | build s | build CPU s | raw_model_calls row groups | file MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in range(args.rounds):
        for size in (None, *args.sizes):
            label = "default (122,880 rows)" if size is None else f"landing ({size:,} rows)"
            m = measure(args.games, args.chunk, row_group_size=size)
            print(f"| {label} | {r + 1} | {m['land']:.1f} | {m['scan']:.2f} | {m['build']:.1f} | {m['build_cpu']:.1f} "
                  f"| {m['groups']:,.0f} | {m['mb']:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
