"""The multi-night belief protocol (Strategema, games.md section 3): defaults, context, tolerant belief answers,
memory lines true for every reader, and the report of belief answers cut by their token cap."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence

import pytest

from mafiabench.agents.llm import ModelSettings
from mafiabench.agents.parsing import parse_belief
from mafiabench.backends.backend import Completion, GenerateSettings, Message
from mafiabench.backends.fake import estimate_tokens
from mafiabench.engine.classic import ClassicRules
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord
from mafiabench.testing.fake_model import FakeBrain
from support.records import landed, rows

CLOCK = "2026-01-01T00:00:00.000+00:00"


class CappedBrain:
    """A model with a real token cap: the FakeBrain's answer cut at `max_tokens` (four characters a token), with
    `finish_reason = "length"` when cut, as a provider reports it."""

    provider = "capped"

    def __init__(self) -> None:
        self.model = "capped-model"
        self.brain = FakeBrain("capped")

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        text = self.brain.answer(messages, settings.replay_key)
        cap = (settings.max_tokens or 10_000) * 4
        cut = len(text) > cap
        return Completion(text=text[:cap], input_tokens=estimate_tokens(messages[-1].content),
                          output_tokens=min(estimate_tokens(text), settings.max_tokens or 10_000),
                          finish_reason="length" if cut else "stop")


def play(rules: dict[str, object], seed: int, cap: int | None = None) -> GameRecord:
    pool = BackendPool()
    pool._backends["capped/m"] = CappedBrain()  # type: ignore[assignment]
    models = {"capped/m": ModelSettings(max_tokens_belief=cap)} if cap else {}
    spec = GameSpec.build(f"classic-{seed}", "classic", rules, seed, {"default": "capped/m"}, models=models)
    return asyncio.run(play_game(spec, pool, clock=lambda: CLOCK))


def test_defaults_follow_the_reference() -> None:
    rules = ClassicRules()
    assert (rules.decision, rules.sampling, rules.memory, rules.memory_k) == ("belief", "sample", "last_k", 3)
    assert rules.speaking and rules.speaking_rounds == 1


def test_context_holds_role_players_phase_votes_statements_and_last_three_reasonings() -> None:
    record = next(r for s in range(20) if (r := play({"n_players": 10, "n_mafia": 2, "max_days": 5}, seed=s))
                  .outcome["days"] >= 3)
    assert record.prompt is not None and record.prompt["version"] == "classic/v3"
    roles = {p.name: p.role for p in record.players}
    last_day_votes = [c for c in record.calls if c["action"] == "vote" and c["round"] == record.outcome["days"]]
    assert last_day_votes, "the game must reach a vote"
    kept = []
    for call in last_day_votes:
        prompt = call["request"]["messages"][0]["content"]
        me = call["player"]
        assert f"You're {me}, the {roles[me]}." in prompt
        assert re.search(rf"Day {call['round']}, voting\. Players alive: .+\. Out of the game: .+\.", prompt)
        reasonings = [ln for ln in prompt.splitlines() if ln.startswith("Your reasoning: ")]
        earlier = [e for e in record.events if e.type == "belief" and e.actor == me and e.text
                   and (e.round < call["round"] or e.phase == "night")]
        assert len(reasonings) == min(3, len(earlier))
        assert reasonings == [f"Your reasoning: {e.text}" for e in earlier[-3:]]
        kept.append(len(reasonings))
        assert prompt.count("Votes: ") == call["round"] - 1  # the full voting history
        statements = [e for e in record.events if e.type == "message" and e.round < call["round"]]
        assert statements and all(e.text in prompt for e in statements)  # every earlier public statement
    assert max(kept) == 3


def test_every_mafioso_reads_a_true_line_about_the_kill() -> None:
    record = play({"n_players": 8, "n_mafia": 2}, seed=5)
    kills = [e for e in record.events if e.type == "kill"]
    mafia = [p.name for p in record.players if p.role == "mafioso"]
    for call in record.calls:
        if call["player"] not in mafia:
            continue
        prompt = call["request"]["messages"][0]["content"]
        for k in kills:
            if f"You killed {k.target}." in prompt:
                assert k.actor == call["player"], f"{call['player']} is told it killed {k.target}; {k.actor} did"
    seen_other = any(
        f"The Mafia member {k.actor} killed {k.target}" in c["request"]["messages"][0]["content"]
        for c in record.calls for k in kills if c["player"] in mafia and c["player"] != k.actor
    )
    assert seen_other


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"reasoning": "r", "probability": {"Player 3": 0.5, "Player 4": 0.5}}', {"Player 3": 0.5, "Player 4": 0.5}),
        ('{"reasoning": "r", "probability": {"3": 1, "4": 3}}', {"Player 3": 0.25, "Player 4": 0.75}),
        ('{"reasoning": "r", "probability": {"3": 0.2, "player 4": 0.2}}', {"Player 3": 0.5, "Player 4": 0.5}),
        ('{"reasoning": "r", "probability": {"Player 3": "40%", "Player 4": "60%"}}',
         {"Player 3": 0.4, "Player 4": 0.6}),
        ('{"reasoning": "r", "probability": {"Player 3": 30, "Player 4": 70}}', {"Player 3": 0.3, "Player 4": 0.7}),
        ('```json\n{"reasoning": "r", "probability": {"Player 4": 1}}\n```', {"Player 3": 0.0, "Player 4": 1.0}),
        ('<think>{"draft": 1}</think>{"reasoning": "r", "probability": {"4": 1}}', {"Player 3": 0.0, "Player 4": 1.0}),
    ],
)
def test_belief_answers_are_read_tolerantly(answer: str, expected: dict[str, float]) -> None:
    dist, reasoning, error = parse_belief(answer, ["Player 3", "Player 4"])
    assert error is None and reasoning == "r" and dist == pytest.approx(expected)


@pytest.mark.parametrize("answer", ['{"reasoning": "r", "probability": {"Player 3": 0.5, "Play',
                                    '{"reasoning": "r"}', "Player 3", '{"probability": {"Player 9": 1}}'])
def test_unusable_belief_answers_are_errors(answer: str) -> None:
    dist, _, error = parse_belief(answer, ["Player 3", "Player 4"])
    assert dist is None and error


def test_belief_answers_cut_by_their_token_cap_are_counted() -> None:
    """With a 30-token cap most JSON answers are cut: they fall back to uniform, flagged, and the mart says the cap
    did it; counts are recomputed from the records' own calls and belief events."""
    records = [play({"n_players": 6, "n_mafia": 2, "max_days": 2}, seed=s, cap=30) for s in range(3)]
    records.append(play({"n_players": 6, "n_mafia": 2, "max_days": 2}, seed=9))  # default cap: no cut
    expected_n = expected_fallbacks = expected_cut = 0
    for r in records:
        last_call = {}
        for c in r.calls:
            last_call[(c["player"], c["phase"], c["round"], c["action"])] = c
        for e in r.events:
            if e.type != "belief":
                continue
            expected_n += 1
            c = last_call[(e.actor, e.phase, e.round, e.data["action"])]
            if e.random_fallback:
                expected_fallbacks += 1
                expected_cut += c["finish_reason"] == "length"
    con = landed(records, only=["mart_belief_fallbacks"])
    got = rows(con, "select sum(n_belief_answers) as n, sum(n_fallbacks) as f, sum(n_cut_by_cap) as c "
                    "from mart_belief_fallbacks")[0]
    assert (got["n"], got["f"], got["c"]) == (expected_n, expected_fallbacks, expected_cut)
    assert expected_cut > 10 and expected_cut == expected_fallbacks  # every fallback here is a cut answer
    assert json.loads(json.dumps(got))  # plain numbers
