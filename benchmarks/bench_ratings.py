"""The leaderboard's marts at scale: `rating_tables` (mart_ratings and its siblings) on a million games.

Writes fct_games and fct_player_games for N synthetic Mini-Mafia games (M models drawn per role by hashing the game
number, the mafia winning with a probability set by the mafioso's and the villager's models; 2% unscored, some
self-play) into a DuckDB file, then, in a fresh process, opens it and times `rating_tables` on it, reporting the wall
time, the CPU time of all its threads and the process's peak resident memory above what it held before the call
(DuckDB runs in-process, so its memory is included). `--src` measures each tree given on the same warehouse.

    .venv/bin/python benchmarks/bench_ratings.py 1000000            # 12 models
    .venv/bin/python benchmarks/bench_ratings.py 100000 1000000 --models 20
    .venv/bin/python benchmarks/bench_ratings.py 1000000 --src /tmp/old/src --src src   # two trees, back to back
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

GAMES = """
create table fct_games as
select 'big' as study, 'g' || lpad(i::varchar, 8, '0') as game_id, 'finished' as status, true as valid,
       hash(i, 9) % 50 <> 0 as is_scored,
       (hash(i, 7) % 1000) / 1000.0 < 0.45 + 0.02 * (hash(i, 1) % {m}) - 0.01 * (hash(i, 3) % {m}) as mafia_won
from range({n}) as t(i)
"""
PLAYERS = """
create table fct_player_games as
select 'g' || lpad(i::varchar, 8, '0') as game_id, s.seat, s.team, s.role,
       'model-' || lpad((case s.role when 'mafioso' then hash(i, 1) when 'detective' then hash(i, 2)
                                     else hash(i, 3) end % {m})::varchar, 2, '0') as model,
       'mini-mafia' as variant
from range({n}) as t(i)
cross join (values (0, 'mafia', 'mafioso'), (1, 'town', 'detective'), (2, 'town', 'villager'),
                   (3, 'town', 'villager')) as s(seat, team, role)
"""


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(path: str) -> dict[str, float]:
    """In this (fresh) process: open the warehouse, then time rating_tables."""
    from mafiabench.transform.models.ratings import rating_tables

    con = duckdb.connect(path, read_only=True)
    con.execute("select count(*) from fct_player_games").fetchall()
    before = _peak_mb()
    start, cpu = time.perf_counter(), time.process_time()
    tables = rating_tables(con.cursor())
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu": cpu, "peak_mb": _peak_mb(), "before_mb": before,
            "rows": sum(t.height for t in tables.values()), "line_ups": tables["mart_rating_fit"]["line_ups"][0]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sizes", type=int, nargs="*", default=[1_000_000])
    p.add_argument("--models", type=int, default=12)
    p.add_argument("--src", action="append", default=[],
                   help="a tree's src directory to measure (repeat to compare trees on the same warehouse)")
    p.add_argument("--measure", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    print(f"load {os.getloadavg()[0]:.1f}; {args.models} models")
    print("| games | tree | line-ups | rating_tables (CPU) | peak RSS above the opened warehouse | peak RSS |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "w.duckdb")
            con = duckdb.connect(path)
            con.execute(GAMES.format(n=n, m=args.models))
            con.execute(PLAYERS.format(n=n, m=args.models))
            con.close()
            for src in args.src or [None]:
                # A first build: the fits' cache (rating-fits/) starts empty for each tree.
                cache = tempfile.mkdtemp(dir=tmp)
                env = {**os.environ, "MAFIABENCH_CACHE_DIR": cache,
                       **({"PYTHONPATH": str(Path(src).resolve())} if src else {})}
                out = subprocess.run([sys.executable, __file__, "--measure", path], check=True, capture_output=True,
                                     text=True, env=env)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"| {n:,} | {src or 'installed'} | {int(r['line_ups']):,} | {r['seconds']:.2f} s "
                      f"({r['cpu']:.2f} s) | {r['peak_mb'] - r['before_mb']:.0f} MB | {r['peak_mb']:.0f} MB |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
