"""classic/v4 asks what the Strategema appendix asks (issue 35 item 3): the vote distribution only, never
P(player is mafia); classic/v4-belief asks a voting villager P(mafia) too (the opt-in extension, as classic/v3 did);
a limited-memory player reads a context heading that says it sees the current phase only, not "every vote, every
statement". Seeded 8-player games played by the fake provider (`fake/appendix`), every rendered prompt read."""

from __future__ import annotations

import asyncio

import pytest

from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord

FULL = "every vote, every statement"
PHASE_ONLY = "What you have seen in the current phase only (earlier phases are not shown):"


def play(version: str, seed: int, **rules: object) -> GameRecord:
    spec = GameSpec.build(f"v4-{version}-{seed}", "classic", {"n_players": 8, "n_mafia": 2, "max_days": 5, **rules},
                          seed, {"default": "fake/appendix"}, prompt_version=version)
    return asyncio.run(play_game(spec, BackendPool(), clock=lambda: "2026-01-01T00:00:00.000+00:00"))


def prompts(record: GameRecord) -> list[tuple[str, str, str]]:
    roles = {p.name: p.role for p in record.players}
    return [(roles[c["player"]], c["action"], c["request"]["messages"][0]["content"]) for c in record.calls]


@pytest.mark.parametrize("seed", range(2))
def test_v4_asks_the_vote_distribution_only(seed: int) -> None:
    record = play("v4", seed)
    assert record.prompt is not None and record.prompt["version"] == "classic/v4"
    read = prompts(record)
    assert any(a == "vote" for _, a, _ in read)
    assert not [p for _, _, p in read if "mafia_probability" in p]
    assert all(FULL in p and PHASE_ONLY not in p for _, _, p in read)
    beliefs = [e for e in record.events if e.type == "vote" and e.phase == "day"]
    assert beliefs and all("mafia_probability" not in e.data for e in beliefs)


def test_v4_belief_asks_the_voting_villagers_p_mafia() -> None:
    read = prompts(play("v4-belief", 0))
    asked = {(role, action) for role, action, p in read if '"mafia_probability"' in p}
    assert asked == {("villager", "vote")}


def test_a_limited_memory_player_is_not_told_it_has_the_whole_record() -> None:
    read = prompts(play("v4", 0, memory="current_phase"))
    assert read and all(PHASE_ONLY in p and FULL not in p for _, _, p in read)
    # classic/v3 told it so (the deviation the card names for v3's limited-memory cells)
    assert all(FULL in p for _, _, p in prompts(play("v3", 0, memory="current_phase")))
