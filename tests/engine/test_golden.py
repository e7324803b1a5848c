"""Golden records: seeded games replayed byte for byte. Regenerate deliberately with UPDATE_GOLDEN=1.

The `*_v4_1_condensed` records pin the condensed ablation (`mini-mafia/v4.1-condensed`, the first rewrite without
what it told players beyond the reference), and `*_v2` the condensed classic prompt (`classic/v2`). The others use
the default prompts (`mini-mafia/v4.1-full` and `classic/v3`, information for information the reference's and the
Strategema paper's).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord, Provenance

GOLDEN = Path(__file__).parents[1] / "golden"
FIXED = Provenance(package_version="golden", git_commit=None)

POLICIES = {"mafioso": "policy/random", "detective": "policy/informed", "villager": "policy/random"}
CASES: dict[str, tuple[str, dict[str, object], int, dict[str, str], str | None]] = {
    "mini_mafia_policies": ("mini-mafia", {}, 11, POLICIES, None),
    "mini_mafia_agent_night_naive": ("mini-mafia", {"night": "agents"}, 7, {"default": "scripted/naive"}, None),
    "mini_mafia_naive": ("mini-mafia", {}, 5, {"default": "scripted/naive"}, None),
    "mini_mafia_policies_v4_1_condensed": ("mini-mafia", {}, 11, POLICIES, "v4.1-condensed"),
    "mini_mafia_agent_night_naive_v4_1_condensed": ("mini-mafia", {"night": "agents"}, 7,
                                                    {"default": "scripted/naive"}, "v4.1-condensed"),
    "classic_belief_naive": ("classic", {"n_players": 6, "n_mafia": 2, "detective": True, "decision": "belief"}, 3,
                             {"mafioso": "scripted/naive", "default": "policy/informed"}, None),
    "classic_belief_naive_v2": ("classic", {"n_players": 6, "n_mafia": 2, "detective": True, "decision": "belief"},
                                3, {"mafioso": "scripted/naive", "default": "policy/informed"}, "v2"),
    "async_naive": ("async", {"n_players": 6, "n_mafia": 2, "day_seconds": 20, "night_seconds": 10, "max_days": 4}, 5,
                    {"mafioso": "scripted/naive", "default": "policy/random"}, None),
    # LLMafia's real-time scheduling replayed on the virtual clock (seeded call latencies, votes as they arrive)
    "async_llmafia_naive": ("async", {"n_players": 6, "n_mafia": 2, "day_seconds": 20, "night_seconds": 10,
                                      "max_days": 4, "scheduling": "llmafia"}, 5,
                            {"mafioso": "scripted/naive", "default": "policy/random"}, None),
}


def play(name: str) -> str:
    variant, rules, seed, agents, version = CASES[name]
    game_id = f"golden-{name.removesuffix('_v4_1_condensed').removesuffix('_v2')}"  # pinned records keep their ids
    spec = GameSpec.build(game_id, variant, rules, seed, agents, prompt_version=version)
    record = asyncio.run(play_game(spec, BackendPool(), clock=lambda: "2026-01-01T00:00:00.000+00:00",
                                   provenance=FIXED))
    return record.to_json()


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_record_bytes(name: str) -> None:
    path = GOLDEN / f"{name}.json"
    text = play(name)
    if os.environ.get("UPDATE_GOLDEN") or not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"golden file {path} missing in CI")
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_record_round_trips(name: str) -> None:
    text = (GOLDEN / f"{name}.json").read_text(encoding="utf-8")
    assert GameRecord.from_json(text).to_json() == text


def test_different_seed_gives_different_record() -> None:
    a = play("mini_mafia_policies")
    variant, rules, seed, agents, _ = CASES["mini_mafia_policies"]
    spec = GameSpec.build("golden-mini_mafia_policies", variant, rules, seed + 1, agents)
    b = asyncio.run(play_game(spec, clock=lambda: "2026-01-01T00:00:00.000+00:00", provenance=FIXED)).to_json()
    assert a != b
