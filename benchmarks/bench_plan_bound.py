"""The incremental plan's look at raw_games (`transform.build.increment._added_only`, else `_compared`) on the
first adding increment after a vacuum that followed a replacing increment, at a million games.

    .venv/bin/python benchmarks/bench_plan_bound.py --src /tmp/before/src --src src    # versions side by side
    .venv/bin/python benchmarks/bench_plan_bound.py 1000000 --added 10000 --repeat 5

Made outside the timing, in a fresh warehouse file per version, with only what the plan reads: raw_games and the
published fct_games (game id, landed mark, checksum), N games, and the publish's record of them (`GAMES_TABLE`:
their count, marks and raw_games' row number after the last). Then, as a scheduled study has it: the last
increment's games (`--added`) landed and published as a row group of their own, one of them replaced (its row
deleted and landed again, as the lander does; the record's bound after raw_games' last row, as a replacing
increment's publish keeps it), DuckDB's vacuum (a checkpoint with it on, as a whole build's publish, every 8th
increment's, a run's or a landing connection's), and `--added` new games landed. The vacuum merges the last
increments' row groups, renumbering the rows after the replaced game's. Timed, `--repeat` times: the plan's look,
`_added_only`, and `_compared` when that found nothing. Printed: where the vacuum left the rows and the bound, the
path taken, and the seconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PLAN = """
import sys, time
import duckdb
from mafiabench.transform.build import increment

path, n, added, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
con = duckdb.connect(path)
con.execute("set global max_vacuum_tasks = 0")  # the warehouse's writers (warehouse.raw.connect)
con.execute("create table raw_games (game_id VARCHAR PRIMARY KEY, landed_at TIMESTAMP, record_sha256 VARCHAR)")
games = "select 'g' || range, timestamp '2026-12-01' + to_seconds(range), md5(range::varchar) from range"
con.execute(f"insert into raw_games {games}(0, {n - added})")
con.execute("checkpoint")
con.execute(f"insert into raw_games {games}({n - added}, {n})")  # the last increment: a row group of its own
con.execute("create table fct_games as select * from raw_games")
increment._games_table(con)
con.execute("checkpoint")
replaced = f"g{n - added // 2}"  # one of the last increment's games
con.execute("delete from raw_games where game_id = ?", [replaced])
con.execute("insert into raw_games values (?, timestamp '2026-12-02', 'again')", [replaced])
con.execute("update fct_games set landed_at = timestamp '2026-12-02', record_sha256 = 'again' where game_id = ?",
            [replaced])
increment.record_games(con, "key", None, None)  # a replacing increment's publish: the bound after the last row
con.execute("checkpoint")  # its checkpoint, without the vacuum
before = con.execute("select max(rowid) + 1, count(*) from raw_games").fetchall()[0]
con.execute("reset global max_vacuum_tasks")
con.execute("create or replace table vacuum_now as select 1 as x")  # a change: a checkpoint with nothing skips
con.execute("checkpoint")
con.execute("set global max_vacuum_tasks = 0")
after = con.execute("select max(rowid) + 1, count(*) from raw_games").fetchall()[0]
con.execute(f"insert into raw_games select 'h' || range, timestamp '2026-12-03', md5('h' || range) from range({added})")
con.execute("checkpoint")
bound = con.execute(f"select n_rows, bound from {increment.GAMES_TABLE}").fetchall()[0]
print(f"  raw_games before the vacuum: rows numbered to {before[0]:,} for {before[1]:,} games; after: {after[0]:,} "
      f"for {after[1]:,}; recorded: {bound[0]:,} games below {bound[1]:,}")
for _ in range(repeat):
    t0 = time.perf_counter()
    found = increment._added_only(con)
    path_taken = "added only"
    if found is None:
        increment._compared(con)
        path_taken = "compared"
    games = con.execute(f"select count(*) from main.{increment.INCREMENT_GAMES}").fetchall()[0][0]
    print(f"  plan {time.perf_counter() - t0:.3f} s ({path_taken}; {games:,} games in the increment)")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("games", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--added", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--src", action="append", help="a tree's src folder (repeat to compare; default: src)")
    args = parser.parse_args()
    for src in args.src or [str(ROOT / "src")]:
        print(f"{src}:", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
            subprocess.run([sys.executable, "-c", PLAN, str(Path(tmp) / "w.duckdb"), str(args.games),
                            str(args.added), str(args.repeat)], env=env, check=True)


if __name__ == "__main__":
    main()
