"""Benchmark landing and the mart build at scale.

    .venv/bin/python benchmarks/bench_marts.py 100000 1000000         # synthetic raw rows, then build + gate
    .venv/bin/python benchmarks/bench_marts.py 2000 --engine           # real engine games through load_records
    .venv/bin/python benchmarks/bench_marts.py 1000000 --src /tmp/before/src   # another checkout's code
    .venv/bin/python benchmarks/bench_marts.py 1000000 --src /tmp/before/src --src src   # side by side, in turn

Two generators:
- `synthetic` (default): a vectorised numpy/polars generator that writes the same raw rows a scripted Mini-Mafia
  game lands (scripted night, two discussion rounds, random votes with uniform tie-break and 5% format failures,
  one fake model call per decision), straight into the raw tables. It exists because playing a million games
  through the engine takes far longer than building marts over them; the gate checks that its rows are sound.
- `--engine`: plays games through the real engine with random answers and lands them with
  `warehouse.load_records` (the production landing path), to measure that path's rate at smaller sizes.

Prints, per size: rows landed, landing time, build time (dbt models + Python marts, staged, plus the publishing
renames), gate time (dbt data tests + Great Expectations on the staged build), and the process's peak
resident memory (resource.getrusage; DuckDB runs in-process, so its memory is included). Several `--src` run one after
another, each in a fresh process (peak RSS is per process), with the load average before each. dbt's parsed project
is cached between processes (`transform.build.dbt_runner`); `--cold-parse` gives each process an empty cache.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

if sys.argv[:-1].count("--src") == 1:  # measure another checkout's code: its src/ goes first
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--src") + 1]).resolve()))

from mafiabench.transform.build.marts import publish, stage, staged_views
from mafiabench.warehouse import raw as warehouse
from mafiabench.warehouse.raw import _schema, connect

NAMES = np.array(["Alice", "Bob", "Charlie", "Diana"])
ROLES = np.array(["mafioso", "detective", "villager", "villager"])
MODELS = np.array(["m0", "m1", "m2", "m3", "m4"])
FAILURE_RATE = 0.05


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    """User + system CPU of the process so far (DuckDB's threads included): steadier than wall time on a shared
    machine."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _frame(table: str, columns: dict[str, object]) -> pl.DataFrame:
    schema = _schema(table)
    return pl.DataFrame({c: columns.get(c) for c in schema}, schema=schema) if columns else pl.DataFrame(schema=schema)


def synthetic_frames(n: int, seed: int = 0, offset: int = 0) -> dict[str, pl.DataFrame]:
    """Raw-table frames for `n` scripted Mini-Mafia games (vectorised; about 22 events per game)."""
    rng = np.random.default_rng(seed)
    gid = np.char.add("s", np.char.zfill((np.arange(n) + offset).astype(str), 8))
    seat_names = NAMES[np.argsort(rng.random((n, 4)), axis=1)]  # name in each seat
    seat_roles = ROLES[np.argsort(rng.random((n, 4)), axis=1)]  # role in each seat
    role_models = MODELS[rng.integers(0, len(MODELS), size=(n, 3))]  # model of mafioso, detective, villagers
    role_idx = np.select([seat_roles == "mafioso", seat_roles == "detective"], [0, 1], 2)
    seat_models = np.take_along_axis(role_models, role_idx, axis=1)
    rows = np.arange(n)
    maf = np.argmax(seat_roles == "mafioso", axis=1)
    det = np.argmax(seat_roles == "detective", axis=1)
    vill = np.argsort(seat_roles != "villager", axis=1, kind="stable")[:, :2]
    victim = vill[rows, rng.integers(0, 2, n)]
    alive = np.ones((n, 4), bool)
    alive[rows, victim] = False
    active = np.argsort(~alive, axis=1, kind="stable")[:, :3]  # the three seats still playing, in seat order

    events: list[pl.DataFrame] = []
    seq = 0

    def add(phase: str, rnd: int, type_: str | np.ndarray, actor=None, target=None, text=None,
            visibility="public", ff=None, data=None, tie=None) -> None:
        nonlocal seq
        cols: dict[str, object] = {
            "game_id": gid, "seq": np.full(n, seq, np.int32), "phase": np.full(n, phase),
            "round": np.full(n, rnd, np.int32), "type": np.full(n, type_) if isinstance(type_, str) else type_,
            "actor": actor, "target": target, "text": text,
            "visibility": visibility if not isinstance(visibility, str) else np.full(n, visibility),
            "format_failure": ff if ff is not None else np.zeros(n, bool),
            "random_fallback": ff if ff is not None else np.zeros(n, bool), "truncated": np.zeros(n, bool),
            "tie_break": tie if tie is not None else np.zeros(n, bool), "data_json": data,
        }
        events.append(_frame("raw_events", cols))
        seq += 1

    add("setup", 0, "game_start")
    for s in range(4):
        add("setup", 0, "role_assigned", actor=seat_names[:, s], visibility=np.char.add("player:", seat_names[:, s]))
    add("night", 1, "phase_start", text=np.full(n, "Night 1 begins."))
    add("night", 1, "kill", actor=seat_names[rows, maf], target=seat_names[rows, victim], visibility="team:mafia")
    add("night", 1, "death", target=seat_names[rows, victim], data=np.full(n, '{"cause": "night_kill"}'))
    add("night", 1, "investigate", actor=seat_names[rows, det], target=seat_names[rows, maf],
        visibility=np.char.add("player:", seat_names[rows, det]),
        data=np.full(n, '{"result": "mafioso", "scripted": true}'))
    add("day", 1, "phase_start", text=np.full(n, "Day 1 begins."))
    calls: list[dict[str, object]] = []
    call_index = 0

    def add_call(seat: np.ndarray, action: str, failed: np.ndarray) -> None:
        nonlocal call_index
        prompt = 1500 + 120 * call_index + rng.integers(0, 50, n)
        calls.append({
            "game_id": gid, "call_index": np.full(n, call_index, np.int32), "player": seat_names[rows, seat],
            "action": np.full(n, action), "phase": np.full(n, "day"), "round": np.ones(n, np.int32),
            "provider": np.full(n, "fake"), "model": seat_models[rows, seat], "latency_ms": rng.gamma(2.0, 200.0, n),
            "attempts": np.ones(n, np.int32), "input_tokens": (prompt // 4).astype(np.int64),
            "output_tokens": rng.integers(5, 50, n).astype(np.int64), "cached_tokens": np.zeros(n, np.int64),
            "format_failure": failed, "prompt_chars": prompt.astype(np.int32),
            "prefix_reuse_chars": np.where(call_index > 0, prompt - 200, 0).astype(np.int32),
        })
        call_index += 1

    for r in (1, 2):
        order = np.take_along_axis(active, np.argsort(rng.random((n, 3)), axis=1), axis=1)
        for i in range(3):
            speaker = seat_names[rows, order[:, i]]
            failed = rng.random(n) < FAILURE_RATE
            named = seat_names[rows, active[rows, rng.integers(0, 3, n)]]
            text = np.where(failed, np.char.add(speaker, " remained silent."), np.char.add("I suspect ", named))
            kind = np.where(failed, "silence", "message")
            add("day", 1, kind, actor=speaker, text=text, ff=failed, data=np.full(n, f'{{"discussion_round": {r}}}'))
            add_call(order[:, i], "speak", failed)
    # Votes: each active seat votes uniformly for one of the other two; 5% are random fallbacks (same draw).
    pick = rng.integers(0, 2, (n, 3))
    votes = np.empty((n, 3), np.int64)
    for i in range(3):
        others = np.stack([active[:, j] for j in range(3) if j != i], axis=1)
        votes[:, i] = others[rows, pick[:, i]]
        failed = rng.random(n) < FAILURE_RATE
        add("day", 1, "vote", actor=seat_names[rows, active[:, i]], target=seat_names[rows, votes[:, i]], ff=failed)
        add_call(active[:, i], "vote", failed)
    counts = np.zeros((n, 4), np.int64)
    for i in range(3):
        np.add.at(counts, (rows, votes[:, i]), 1)
    top = counts.max(axis=1)
    tied = counts == top[:, None]
    tie = tied.sum(axis=1) > 1
    # Uniform tie-break among the tied seats.
    weights = tied * rng.random((n, 4))
    arrested = np.argmax(weights, axis=1)
    arrested_role = seat_roles[rows, arrested]
    winner = np.where(arrested_role == "mafioso", "town", "mafia")
    add("day", 1, "elimination", target=seat_names[rows, arrested], tie=tie,
        data=np.char.add(np.char.add('{"role": "', arrested_role), '", "role_revealed": false}'))
    add("end", 1, "game_end", data=np.char.add(np.char.add('{"winner": "', winner), '"}'))

    players = _frame("raw_players", {
        "game_id": np.repeat(gid, 4), "seat": np.tile(np.arange(4, dtype=np.int32), n),
        "name": seat_names.ravel(), "role": seat_roles.ravel(),
        "team": np.where(seat_roles.ravel() == "mafioso", "mafia", "town"),
        "agent": np.char.add("fake/", seat_models.ravel()), "provider": np.full(4 * n, "fake"),
        "model": seat_models.ravel(), "model_raw": seat_models.ravel(),
    })
    games = _frame("raw_games", {
        "game_id": gid, "record_version": np.ones(n, np.int32), "variant": np.full(n, "mini-mafia"),
        "seed": np.arange(offset, offset + n, dtype=np.uint64), "experiment": np.full(n, "bench"),
        "cell": np.char.add(np.char.add(np.char.add(role_models[:, 0], "|"), np.char.add(role_models[:, 1], "|")),
                            role_models[:, 2]),
        "game_index": np.arange(offset, offset + n, dtype=np.int32), "capabilities": [[] for _ in range(n)],
        "status": np.full(n, "finished"), "winner": winner, "tie_decided": tie, "days": np.ones(n, np.int32),
        "n_players": np.full(n, 4, np.int32), "n_mafia": np.ones(n, np.int32), "valid": np.ones(n, bool),
        "prompt_version": np.full(n, "v4.1"), "source": np.full(n, "simulation"),
        "rules_json": np.full(n, '{"discussion_rounds": 2, "night": "scripted"}'),
        "landed_at": np.full(n, np.datetime64("2026-01-01T00:00:00", "us")),
    })
    return {
        "raw_games": games,
        "raw_players": players,
        "raw_events": pl.concat(events),
        "raw_model_calls": pl.concat([_frame("raw_model_calls", c) for c in calls]),
        "raw_beliefs": _frame("raw_beliefs", {}),
    }


def land_frames(con, frames: dict[str, pl.DataFrame]) -> int:
    total = 0
    con.execute("begin transaction")
    for table, frame in frames.items():
        if frame.height:
            con.register("_bench", frame.to_arrow())
            con.execute(f"insert into {table} select * from _bench")
            con.unregister("_bench")
            total += frame.height
    con.execute("commit")
    return total


def engine_records(n: int) -> list:
    from mafiabench.engine import make_game
    from mafiabench.record import Provenance, record_from_engine
    from mafiabench.testing import play_random

    out = []
    for i in range(n):
        game = play_random(
            make_game("mini-mafia", {}, seed=i),
            random.Random(i),
            failure_rate=FAILURE_RATE,
            say=lambda rng, d, g: "I suspect someone",
        )
        models = {p.name: str(MODELS[(i + p.seat) % len(MODELS)]) for p in game.players}
        out.append(record_from_engine(f"e{i:08d}", game, {k: f"fake/{v}" for k, v in models.items()}, models,
                                      design={"experiment": "bench", "cell": "c", "capabilities": []},
                                      provenance=Provenance(git_commit=None)))
    return out


def run(n: int, *, engine: bool, gate: bool, chunk: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        con = connect(path)
        t_gen = t_land = 0.0
        landed_rows = 0
        if engine:
            t0 = time.perf_counter()
            recs = engine_records(n)
            t_gen = time.perf_counter() - t0
            t1 = time.perf_counter()
            warehouse.load_records(con, recs)
            t_land = time.perf_counter() - t1
            landed_rows = sum(con.execute(f"select count(*) from {t}").fetchall()[0][0] for t in warehouse.RAW_SCHEMA)
            del recs
        else:
            for start in range(0, n, chunk):
                t0 = time.perf_counter()
                frames = synthetic_frames(min(chunk, n - start), seed=start, offset=start)
                t1 = time.perf_counter()
                landed_rows += land_frames(con, frames)
                t_gen += t1 - t0
                t_land += time.perf_counter() - t1
                del frames
        rss_land = peak_rss_mb()
        c2 = cpu_s()
        t2 = time.perf_counter()
        staged = stage(con)  # the dbt models and the Python models, under staged names
        runs = staged.models
        t_build = time.perf_counter() - t2
        c_build = cpu_s() - c2
        rss_build = peak_rss_mb()
        slowest = sorted(runs, key=lambda r: -r.seconds)[:5]
        t_gate = c_gate = float("nan")
        passed = None
        if gate:
            from mafiabench.publish import dbt_test_results
            from mafiabench.quality.gate import gate_suites, run_suites
            from mafiabench.transform.build.catalogue import model_docs

            # The gate runs on the staged build (dbt data tests + GX), as `mafiabench build` does.
            t3, c3 = time.perf_counter(), cpu_s()
            results = dbt_test_results(con, staged)
            with staged_views(con, staged) as cur:
                results += run_suites(cur, suites=gate_suites(model_docs(staged.project)))
            t_gate, c_gate = time.perf_counter() - t3, cpu_s() - c3
            passed = all(r.success for r in results)
            for r in results:
                if not r.success:
                    print(f"  FAILED {r.describe()}: {r.failing_rows[:2]}", file=sys.stderr)
        t4, c4 = time.perf_counter(), cpu_s()
        publish(con, staged)  # renames, in one transaction
        t_build += time.perf_counter() - t4
        c_build += cpu_s() - c4
        con.close()
        size_mb = path.stat().st_size / 2**20
    print(
        f"{'engine' if engine else 'synthetic'} n={n:,}: generate {t_gen:.1f}s, land {landed_rows:,} rows in "
        f"{t_land:.1f}s ({landed_rows / max(t_land, 1e-9):,.0f} rows/s), build {len(runs)} models in {t_build:.1f}s "
        f"({c_build:.1f} CPU s), gate {t_gate:.1f}s ({c_gate:.1f} CPU s, passed={passed}), peak RSS after landing "
        f"{rss_land:,.0f} MB, after build {rss_build:,.0f} MB, after gate {peak_rss_mb():,.0f} MB, "
        f"file {size_mb:,.0f} MB"
    )
    print("  slowest models: " + ", ".join(f"{r.name} {r.seconds:.1f}s" for r in slowest))
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, default=[100_000])
    parser.add_argument("--engine", action="store_true", help="play games through the engine and load_records")
    parser.add_argument("--no-gate", action="store_true", help="skip the quality gate")
    parser.add_argument("--src", type=Path, action="append", default=[],
                        help="import mafiabench (and its dbt project) from this src/ folder; repeat to compare")
    parser.add_argument("--chunk", type=int, default=250_000, help="synthetic games generated per landing batch")
    parser.add_argument("--cold-parse", action="store_true", help="no cached dbt manifest (an empty cache folder)")
    args = parser.parse_args()
    if args.cold_parse:
        os.environ["MAFIABENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-marts-cache-")
    if len(args.src) > 1:
        flags = [f for f, on in (("--engine", args.engine), ("--no-gate", args.no_gate),
                                 ("--cold-parse", args.cold_parse)) if on]
        for n in args.sizes:
            for src in args.src:
                load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                print(f"--src {src} (load average {load})", flush=True)
                subprocess.run([sys.executable, __file__, str(n), "--src", str(src), "--chunk", str(args.chunk),
                                *flags], check=True)
        return
    for n in args.sizes:
        run(n, engine=args.engine, gate=not args.no_gate, chunk=args.chunk)


if __name__ == "__main__":
    main()
