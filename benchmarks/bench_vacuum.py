"""What DuckDB's vacuum costs the checkpoint after an increment, with and without it (transform/build/marts.py
`VACUUM_EVERY`): on a copy of a built warehouse, the rows of `--games` published games are appended again to every
per-game table (the shape of an increment's deltas: one transaction, then a checkpoint), round after round.

Timed, each on a fresh copy: `--rounds` checkpoints with DuckDB's vacuum (its default); then `--every` - 1 rounds
without it and the `--every`-th with it, as a scheduled study's increments are published.

    .venv/bin/python benchmarks/bench_vacuum.py /path/to/built.duckdb --games 10000 --rounds 10 --every 24
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import duckdb


def per_game_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The published tables keyed by game that an increment appends to (the marts' per-game tables)."""
    return [r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary "
        "and table_name in (select table_name from duckdb_columns() where column_name = 'game_id') "
        "and not starts_with(table_name, 'raw_') and not starts_with(table_name, '__') "
        "and (starts_with(table_name, 'int_') or starts_with(table_name, 'fct_')) order by estimated_size desc"
    ).fetchall()]


class Rounds:
    def __init__(self, path: Path, games: int) -> None:
        self.con = duckdb.connect(str(path))
        self.con.execute("set checkpoint_threshold = '20GB'")
        self.tables = per_game_tables(self.con)
        self.con.execute(f"create temp table ids as select game_id from main.fct_games using sample {games} rows "
                         "(reservoir, 5)")
        for t in self.tables:
            self.con.execute(f'create temp table "d_{t}" as select * from main."{t}" '
                             "where game_id in (select game_id from ids)")

    def round(self, vacuum: bool) -> float:
        """Append the rows again in one transaction, then the checkpoint's seconds."""
        self.con.execute("reset max_vacuum_tasks" if vacuum else "set max_vacuum_tasks = 0")
        self.con.execute("begin transaction")
        for t in self.tables:
            self.con.execute(f'insert into main."{t}" select * from "d_{t}"')
        self.con.execute("commit")
        t0 = time.perf_counter()
        self.con.execute("checkpoint")
        return time.perf_counter() - t0


def summary(label: str, seconds: list[float]) -> str:
    return (f"{label}: {len(seconds)} checkpoints, {min(seconds):.2f}-{max(seconds):.2f} s, mean "
            f"{statistics.mean(seconds):.2f} s, summed {sum(seconds):.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", type=Path, help="a built warehouse (copied, never written)")
    parser.add_argument("--games", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=10, help="rounds with DuckDB's vacuum each time")
    parser.add_argument("--every", type=int, default=24, help="rounds until the one with the vacuum")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-vacuum-") as tmp:
        copy = Path(tmp) / "w.duckdb"
        shutil.copyfile(args.warehouse, copy)
        os.chmod(copy, 0o644)
        rounds = Rounds(copy, args.games)
        print(f"{len(rounds.tables)} per-game tables, {args.games:,} games' rows a round; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        print(summary("DuckDB's vacuum each round", [rounds.round(True) for _ in range(args.rounds)]), flush=True)
        rounds.con.close()
        shutil.copyfile(args.warehouse, copy)
        rounds = Rounds(copy, args.games)
        without = [rounds.round(False) for _ in range(args.every - 1)]
        print(summary("without the vacuum", without), flush=True)
        nth = rounds.round(True)
        print(f"the {args.every}th, with the vacuum: {nth:.2f} s; per round over the {args.every}: "
              f"{(sum(without) + nth) / args.every:.2f} s; load {os.getloadavg()[0]:.1f}")
        rounds.con.close()


if __name__ == "__main__":
    main()
