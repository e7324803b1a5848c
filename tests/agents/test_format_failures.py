"""The format-failure policy on malformed, empty and over-long answers, through the real agent path."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from mafiabench.agents.llm import LLMAgent
from mafiabench.agents.parsing import parse_belief, parse_message, parse_name
from mafiabench.backends.backend import Message
from mafiabench.backends.scripted_backend import ScriptedBackend
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.record import GameRecord


class Pool(BackendPool):
    """Routes one agent spec to a scripted backend with answers chosen by the test."""

    def __init__(self, answer) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.backend = ScriptedBackend(lambda messages: answer(messages[-1].content))

    def get(self, spec: str):  # type: ignore[no-untyped-def]
        return self.backend


def run(answer, rules=None, seed=1) -> GameRecord:  # type: ignore[no-untyped-def]
    spec = GameSpec.build("ff", "mini-mafia", rules or {"discussion_rounds": 1}, seed, {"default": "scripted/x"})
    return asyncio.run(play_game(spec, Pool(answer)))


def test_malformed_answers_become_flagged_silence_and_random_votes() -> None:
    rec = run(lambda prompt: "<<garbage>> no quotes, no name")
    silences = [e for e in rec.events if e.type == "silence"]
    votes = [e for e in rec.events if e.type == "vote"]
    assert len(silences) == 3 and all(e.format_failure and e.random_fallback for e in silences)
    assert len(votes) == 3 and all(e.format_failure and e.random_fallback for e in votes)
    assert all(c["parse"]["format_failure"] for c in rec.calls)
    assert rec.outcome["status"] == "finished"


def test_empty_answers_are_format_failures() -> None:
    rec = run(lambda prompt: "")
    assert all(e.format_failure for e in rec.events if e.type in ("silence", "vote"))
    assert all(c["parse"]["error"] == "empty answer" for c in rec.calls)


def test_over_long_message_is_truncated_and_flagged_when_the_rules_cut() -> None:
    long = "A" * 500

    def answer(prompt: str) -> str:
        return f'"{long}"' if "What message" in prompt else prompt.rsplit("from: ", 1)[1].split(",")[0]

    rec = run(answer, {"discussion_rounds": 1, "cut_messages": True})
    messages = [e for e in rec.events if e.type == "message"]
    assert len(messages) == 3 and all(e.truncated and len(e.text or "") == 200 for e in messages)
    assert not any(e.format_failure for e in rec.events)
    rec = run(answer)  # the reference's rules: the prompt states 200, nothing is cut
    messages = [e for e in rec.events if e.type == "message"]
    assert len(messages) == 3 and all(not e.truncated and e.text == long for e in messages)


def test_vote_for_an_invalid_player_falls_back() -> None:
    rec = run(lambda prompt: '"hi"' if "What message" in prompt else "Zed\nbecause")
    votes = [e for e in rec.events if e.type == "vote"]
    assert all(e.random_fallback for e in votes)


def test_parsers_are_tolerant_where_they_should_be() -> None:
    assert parse_message('  **"I trust Bob."**\nreasoning') == ("I trust Bob.", None)
    assert parse_message("“Curly quotes work”") == ("Curly quotes work", None)
    assert parse_message('"cut off by the token cap') == ("cut off by the token cap", None)
    assert parse_message("I think Bob")[0] is None
    assert parse_name("**Bob**\nHe lied.", ["Alice", "Bob"]) == ("Bob", None)
    assert parse_name("bob.", ["Alice", "Bob"]) == ("Bob", None)
    assert parse_name("Vote: Alice", ["Alice", "Bob"]) == ("Alice", None)
    assert parse_name("Bobby", ["Alice", "Bob"])[0] is None
    assert parse_name("I am not sure", ["Alice", "Bob"])[0] is None
    dist, why, err = parse_belief(
        'Sure! {"reasoning": "x", "probability": {"Player 3": 60, "1": "40%", "9": 0.5}}', ["Player 1", "Player 3"]
    )
    assert err is None and why == "x"
    assert dist is not None and abs(dist["Player 3"] - 0.6) < 1e-9 and abs(dist["Player 1"] - 0.4) < 1e-9
    assert parse_belief("{not json", ["A"])[2] is not None
    assert parse_belief('{"probability": {"Z": 1}}', ["A"])[2] == "no probability on a valid choice"


def test_unparseable_belief_falls_back_to_uniform_and_is_flagged() -> None:
    spec = GameSpec.build("b", "classic", {"n_players": 6, "decision": "belief", "max_days": 1}, 2,
                          {"default": "scripted/x"})
    rec = asyncio.run(play_game(spec, Pool(lambda prompt: "I refuse to answer in JSON")))
    beliefs = [e for e in rec.events if e.type == "belief"]
    assert beliefs and all(e.format_failure and e.random_fallback for e in beliefs)
    for e in beliefs:
        probs = list(e.data["probability"].values())
        assert all(abs(p - probs[0]) < 1e-12 for p in probs)


def test_reprompt_once_when_enabled() -> None:
    from mafiabench.agents.llm import ModelSettings
    from mafiabench.agents.prompts import load_prompts
    from mafiabench.engine import Decision

    answers = iter(["nonsense", "Bob"])
    backend = ScriptedBackend(lambda messages: next(answers))
    agent = LLMAgent("scripted/x", backend, load_prompts("mini-mafia"), ModelSettings(reprompt_on_failure=True))
    from mafiabench.agents.agent import PlayerView
    from mafiabench.engine import MiniMafiaRules

    view = PlayerView("Alice", "villager", "town", "mini-mafia", MiniMafiaRules(), ("Alice", "Bob", "Cy", "Di"), ())
    turn = asyncio.run(agent.act(Decision("Alice", "vote", "day", 1, ("Bob", "Cy")), view))
    assert turn.answer.target == "Bob" and len(turn.calls) == 2
    assert "could not be used" in turn.calls[1]["request"]["messages"][0]["content"]


def _unused(messages: Sequence[Message]) -> str:
    return ""
