"""Import throughput: Mini-Mafia batch files read and landed per second.

Generates N game files in the batch format (games played by the real engine with random answers: messages,
silences, truncated messages and random votes, written by `to_batch_game`), spread over batches with different
model configurations, in a temporary folder; then times `run_import` into a fresh DuckDB file (reading, rebuilding
the transcripts from the memories, and landing), and reading alone for comparison.

    .venv/bin/python benchmarks/bench_import.py            # 10,000 games
    .venv/bin/python benchmarks/bench_import.py --games 2000 --batch-size 500
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from mafiabench.engine import Decision, GameEngine, make_game
from mafiabench.importers import read_mini_mafia, run_import, to_batch_game
from mafiabench.importers.mini_mafia_batch import models_by_role
from mafiabench.record import GameRecord, record_from_engine
from mafiabench.testing import play_random
from mafiabench.warehouse.raw import connect

MODELS = [
    {"type": "openai", "model": "gpt-4.1-mini", "temperature": 0.7},
    {"type": "openai", "model": "GPT-4.1-mini-2025-04-14", "temperature": 0.7},
    {"type": "anthropic", "model": "claude-3-5-haiku-20241022", "temperature": 0.7},
    {"type": "xai", "model": "grok-3-mini", "temperature": 0.7},
    {"type": "local", "model": "Qwen2.5-7B-Instruct-Q4_K_M.gguf", "temperature": 0.7},
]
PHRASES = ["I think {} is the mafioso.", "{} has been quiet, which is suspicious.", "I trust {} for now.",
           "Why did {} accuse me so fast?", "Let's all vote {}; the detective would have spoken by now."]


def play(seed: int, rounds: int) -> GameRecord:
    def say(rng: random.Random, d: Decision, g: GameEngine) -> str:
        others = [p.name for p in g.players if p.name != d.player]
        return rng.choice(PHRASES).format(rng.choice(others)) * (5 if rng.random() > 0.9 else 1)  # some truncated

    game = play_random(make_game("mini-mafia", {"discussion_rounds": rounds}, seed), random.Random(seed),
                       failure_rate=0.05, say=say)
    names = {p.name: "x/y" for p in game.players}
    return record_from_engine(f"bench-{seed}", game, names, names)


def generate(root: Path, games: int, batches: int) -> None:
    rng = random.Random(0)
    per_batch = -(-games // batches)
    n = 0
    for b in range(batches):
        batch_id = f"batch_20250101_{b:06d}_v4.1"
        folder = root / batch_id
        folder.mkdir(parents=True)
        configs = {role: rng.choice(MODELS) for role in ("detective", "mafioso", "villager")}
        (folder / "batch_config.json").write_text(json.dumps({
            "batch_id": batch_id, "timestamp": "2025-01-01T00:00:00", "game_type": "mini_mafia",
            "prompt_config": {"version": "v4.1", "message_limit": 200, "templates": {"discussion": "..."}},
            "model_configs": configs}))
        assert models_by_role(configs)
        for i in range(min(per_batch, games - n)):
            record = play(n, rounds=2)
            (folder / f"game_{i:04d}.json").write_text(json.dumps(to_batch_game(record, batch_id, i), indent=2))
            n += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=1000, help="records landed per transaction")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mafiabench-bench-import-") as tmp:
        root = Path(tmp) / "data"
        t0 = time.perf_counter()
        generate(root, args.games, args.batches)
        print(f"generated {args.games} game files in {args.batches} batches in {time.perf_counter() - t0:.1f} s")

        t0 = time.perf_counter()
        n_read = sum(1 for _ in read_mini_mafia(root))
        read_s = time.perf_counter() - t0
        print(f"read only:      {n_read} games in {read_s:.2f} s = {n_read / read_s:,.0f} games/s")

        con = connect(Path(tmp) / "bench.duckdb")
        report = run_import("mini-mafia", root, con, batch_size=args.batch_size)
        rate = report.games_read / report.seconds
        print(f"read + landing: {report.games_read} games in {report.seconds:.2f} s = {rate:,.0f} games/s "
              f"({report.landed} landed, {len(report.unreadable)} unreadable, {sum(report.invalid.values())} "
              "invalid)")
        events = con.execute("select count(*) from raw_events").fetchone()
        print(f"raw_events rows: {events[0] if events else 0}")

        again = run_import("mini-mafia", root, con, batch_size=args.batch_size)
        print(f"re-import:      {again.games_read} games in {again.seconds:.2f} s = "
              f"{again.games_read / again.seconds:,.0f} games/s ({again.skipped} skipped)")
        con.close()
        if report.landed != args.games or report.unreadable or report.invalid:
            print("unexpected: every generated game should land valid", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
