"""Import a Mini-Mafia release folder and compare its cells with a published `win_counts.csv`.

For the published v4.1 release of bastoscostadavi/llm-mafia-game (commit 4d515da6, `mini-mafia/data/batch/`) and
its `mini-mafia-benchmark/results/bottom_up_background/win_counts.csv`. Neither is in this repository: check the
repository out (or `git archive 4d515da6 mini-mafia/data/batch | tar -x`) and point this at both.

    .venv/bin/python tools/compare_mini_mafia_release.py RELEASE/mini-mafia/data/batch win_counts.csv
    .venv/bin/python tools/compare_mini_mafia_release.py ... --first 100   # only each cell's first 100 games

Prints the games read, why any are not scored, the games flagged by the importer (a game id naming another
batch), and for each published cell the release covers whether its count is the published one. `--first N` counts
only each cell's first N games in batch and game order, as the study's benchmark table (100 games a cell) did for a
cell the release holds more games of.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter, defaultdict
from pathlib import Path

from mafiabench.importers import UnreadableGame, read_mini_mafia

# The study's display names (`get_display_name` in its analysis scripts) of the models as the importer names them.
MODELS = {
    "Claude Opus 4.1": "anthropic/claude-opus-4.1",
    "Claude Sonnet 4": "anthropic/claude-sonnet-4",
    "DeepSeek V3.1": "deepseek/deepseek-chat",
    "Gemini 2.5 Flash Lite": "google/gemini-2.5-flash-lite",
    "GPT-4.1 Mini": "openai/gpt-4.1-mini",
    "GPT-5 Mini": "openai/gpt-5-mini",
    "Grok 3 Mini": "xai/grok-3-mini",
    "Llama 3.1 8B Instruct": "local/llama-3.1-8b-instruct",
    "Mistral 7B Instruct": "local/mistral-7b-instruct-v0.2",
    "Qwen2.5 7B Instruct": "local/qwen2.5-7b-instruct",
}
WINNER = {"deceive": "mafia", "detect": "town", "disclose": "town"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("release", type=Path, help="the folder of batch_* folders")
    p.add_argument("win_counts", type=Path, help="the published win_counts.csv")
    p.add_argument("--first", type=int, default=None, help="count only each cell's first N games")
    args = p.parse_args(argv)
    unscored: Counter[str] = Counter()
    flagged = read = 0
    games: dict[tuple[str, str, str], list[tuple[str, int, str]]] = defaultdict(list)
    for g in read_mini_mafia(args.release):
        read += 1
        if isinstance(g, UnreadableGame):
            unscored["unreadable"] += 1
            continue
        if not g.validity["valid"] or g.outcome.get("winner") is None:
            unscored[str(g.validity.get("reason") or "no winner")] += 1
            continue
        design = g.design or {}
        flagged += "source_game_id" in design
        for capability in design["capabilities"]:
            games[(capability, design["target"], design["background"])].append(
                (str(design["batch_id"]), int(design["game_index"]), str(g.outcome["winner"])))
    print(f"{read} games read; not scored: {dict(unscored) or 0}; game id naming another batch (counted in its "
          f"folder's cell): {flagged}")
    equal, different, missing = 0, [], 0
    with args.win_counts.open() as f:
        for row in csv.DictReader(f):
            capability, target = row["capability"].lower(), MODELS[row["model"]]
            for background in (c for c in row if c not in ("capability", "model")):
                cell = sorted(games.get((capability, target, MODELS[background]), []))[: args.first]
                if not cell:
                    missing += 1
                    continue
                wins = sum(w == WINNER[capability] for _, _, w in cell)
                if wins == int(float(row[background])):
                    equal += 1
                else:
                    different.append(f"  {capability} {row['model']} / {background}: {wins} of {len(cell)} games, "
                                     f"published {int(float(row[background]))}")
    print(f"published cells the release covers: {equal + len(different)}; equal {equal}, different "
          f"{len(different)}; not in the release: {missing}")
    print("\n".join(different))
    return 0


if __name__ == "__main__":
    sys.exit(main())
