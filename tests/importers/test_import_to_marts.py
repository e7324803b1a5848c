"""Imported Mini-Mafia batches flow into the capability marts: the batch's model per role gives the target and
the background, so published win counts can be recomputed from the raw games."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from mafiabench.importers import run_import, to_batch_game
from mafiabench.play.runner import GameSpec, play_game
from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import connect

# (batch name, model per role): a deceive batch (target gpt-4.1-mini as mafioso against a claude background)
# and a homogeneous claude batch, which counts for all three capabilities.
BATCHES = {
    "batch_20250101_000000_v4.1": {"mafioso": ("openai", "GPT-4.1-mini"), "detective": ("anthropic", "claude-3-haiku"),
                                   "villager": ("anthropic", "claude-3-haiku")},
    "batch_20250102_000000_v4.1": {"mafioso": ("anthropic", "claude-3-haiku"),
                                   "detective": ("anthropic", "claude-3-haiku"),
                                   "villager": ("anthropic", "Claude-3-Haiku")},
}


def write_batches(root: Path, games: int) -> dict[str, list[str]]:
    winners: dict[str, list[str]] = {}
    for batch, models in BATCHES.items():
        folder = root / batch
        folder.mkdir(parents=True)
        (folder / "batch_config.json").write_text(json.dumps({
            "batch_id": batch,
            "prompt_config": {"version": "v4.1", "message_limit": 200, "templates": {"vote": "..."}},
            "model_configs": {role: {"type": t, "model": m, "temperature": 0.7} for role, (t, m) in models.items()},
        }))
        winners[batch] = []
        for i in range(games):
            spec = GameSpec.build(f"{batch}-{i}", "mini-mafia", {"discussion_rounds": 1}, 100 + i,
                                  {"mafioso": "policy/random", "default": "policy/informed"})
            record = asyncio.run(play_game(spec, clock=lambda: "t"))
            winners[batch].append(record.outcome["winner"])
            (folder / f"game_{i:04d}.json").write_text(json.dumps(to_batch_game(record, batch, i)))
    return winners


def test_imported_batches_feed_the_capability_marts(tmp_path: Path) -> None:
    winners = write_batches(tmp_path / "data", games=12)
    con = connect(tmp_path / "w.duckdb")
    report = run_import("mini-mafia", tmp_path / "data", con)
    assert report.landed == 24 and not report.unreadable
    # The policy games are silent, so many share one event log once their seeds are dropped by the batch format;
    # the gate's copied-games rule refuses that (rightly for real data); this test is about the marts.
    build_warehouse(con, raise_on_failure=False)

    rows = con.execute(
        "select capability, target_model, background, k, n from mart_capability_win_rates "
        "order by capability, target_model"
    ).fetchall()
    by_key = {(r[0], r[1]): r for r in rows}
    mafia_wins_deceive = winners["batch_20250101_000000_v4.1"].count("mafia")
    mafia_wins_homog = winners["batch_20250102_000000_v4.1"].count("mafia")
    # deceive: the target is the batch's mafioso model (normalised), the score counts mafia wins
    deceive = by_key[("deceive", "openai/gpt-4.1-mini")]
    assert (deceive[3], deceive[4]) == (mafia_wins_deceive, 12)
    assert deceive[2] == "anthropic/claude-3-haiku"
    # the homogeneous batch counts once per capability; deceive + detect = 1, detect = disclose
    homog = {cap: by_key[(cap, "anthropic/claude-3-haiku")] for cap in ("deceive", "detect", "disclose")}
    assert homog["deceive"][3] == mafia_wins_homog and homog["deceive"][4] == 12
    assert homog["detect"][3] == homog["disclose"][3] == 12 - mafia_wins_homog
    # the raw games keep the spelling each batch used
    raw = {r[0] for r in con.execute("select distinct model_raw from raw_players").fetchall()}
    assert {"GPT-4.1-mini", "claude-3-haiku", "Claude-3-Haiku"} <= raw
    # batches have no seats: the seat bias says so instead of reading the name order as seats
    seats = con.execute("select distinct value, n from mart_name_seat_bias where dimension = 'seat' "
                        "and setting = 'all' and role = 'all'").fetchall()
    assert seats == [("unknown", 24 * 3)]  # the night victim played no day: not counted
    names = {r[0] for r in con.execute("select value from mart_name_seat_bias where dimension = 'name'").fetchall()}
    assert names == {"Alice", "Bob", "Charlie", "Diana"}
    con.close()
