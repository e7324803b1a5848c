"""Statement labels (`[statements]`, issue 39): after each public message, the speaker's own label and one per living
listener, through the ordinary call path; labels never change the game unless `memory = true` says so."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from mafiabench.agents.llm import ModelSettings
from mafiabench.agents.statements import StatementsConfig
from mafiabench.backends.backend import Message
from mafiabench.backends.scripted_backend import ScriptedBackend
from mafiabench.engine.claims import Claim
from mafiabench.play.runner import BackendPool, GameSpec, LimitedBackend, play_game
from mafiabench.record import GameRecord
from support import statement_games as hand

CLOCK = "2026-01-01T00:00:00.000+00:00"
GAMES = {
    "mini-mafia": {},
    "classic": {"n_players": 6, "n_mafia": 2, "detective": True, "decision": "belief"},
    "async": {"n_players": 6, "n_mafia": 2, "day_seconds": 20, "night_seconds": 10, "max_days": 2},
}


def play(variant: str, seed: int, statements: StatementsConfig | None, agents: dict[str, str] | None = None,
         pool: BackendPool | None = None, models: dict[str, ModelSettings] | None = None) -> GameRecord:
    spec = GameSpec.build("g", variant, GAMES[variant], seed, agents or {"default": "fake/a"},
                          statements=statements, models=models or {})
    return asyncio.run(play_game(spec, pool or BackendPool(), clock=lambda: CLOCK))


def messages(rec: GameRecord) -> list[Any]:
    return [e for e in rec.events if e.type == "message" and e.visibility == "public"]


@pytest.mark.parametrize("variant", sorted(GAMES))
def test_one_self_label_per_message_and_one_per_living_listener(variant: str) -> None:
    rec = play(variant, 1, StatementsConfig())
    assert rec.error is None and rec.statements is not None
    said = messages(rec)
    assert said and [s["seq"] for s in rec.statements] == [e.seq for e in said]
    gone: set[str] = set()
    by_seq = {s["seq"]: s for s in rec.statements}
    for e in rec.events:
        if e.type in ("death", "elimination"):
            gone.add(str(e.target))
        if e in said:
            s = by_seq[e.seq]
            living = [p.name for p in rec.players if p.name not in gone and p.name != e.actor]
            assert s["speaker"] == e.actor and s["listeners"] == living
            assert [(lb["assessor"], lb["kind"]) for lb in s["labels"]] == [(e.actor, "self")] + [
                (p, "peer") for p in living]
    # every label is one recorded call of its assessor, of its kind
    calls = {c["index"]: c for c in rec.calls}
    for s in rec.statements:
        for lb in s["labels"]:
            call = calls[lb["call"]]
            assert (call["player"], call["action"]) == (lb["assessor"], f"assess_{lb['kind']}")
            assert call["request"]["settings"]["max_tokens"] == 300
    assert sum(len(s["labels"]) for s in rec.statements) == sum(c["action"].startswith("assess") for c in rec.calls)


@pytest.mark.parametrize("variant", sorted(GAMES))
def test_labels_never_change_the_game(variant: str) -> None:
    """The same game with and without labels: the same events and the same game calls, prompt for prompt and answer
    for answer (the label calls have their own replay keys, so a fake model answers the game the same)."""
    for seed in range(2):
        plain, labelled = play(variant, seed, None), play(variant, seed, StatementsConfig())
        assert plain.statements is None and "statements" not in plain.to_dict()
        assert [e.to_dict() for e in plain.events] == [e.to_dict() for e in labelled.events]
        timeless = ("index", "latency_ms")  # the wall clock's, and the call's place among the label calls
        game_calls = [{k: v for k, v in c.items() if k not in timeless} for c in labelled.calls
                      if not c["action"].startswith("assess")]
        assert [{k: v for k, v in c.items() if k not in timeless} for c in plain.calls] == game_calls
        assert plain.prompt == {k: v for k, v in (labelled.prompt or {}).items() if k != "statements"}


def test_labels_reach_a_memory_only_when_the_experiment_says_so() -> None:
    """`memory = true` (a named deviation) shows each assessor its own labels, and only its own, in later prompts."""
    for memory in (False, True):
        rec = hand.play(statements=StatementsConfig(memory=memory))
        c = hand.cast()
        votes = {c2["player"]: c2["request"]["messages"][0]["content"] for c2 in rec.calls if c2["action"] == "vote"}
        mafioso_vote = votes[c["mafioso"]]
        if memory:
            assert "Your private look back at your message: deceptive (confidence 0.9)." in mafioso_vote
            assert f"Your private assessment of {c['detective']}'s message: deceptive (confidence 0.7)." in mafioso_vote
            assert "(confidence 0.8)" not in mafioso_vote  # the detective's label of the lie is the detective's
            assert (rec.prompt or {})["version"] == "mini-mafia/v4.1-full+label-memory"
        else:
            assert "look back" not in mafioso_vote and "assessment of" not in mafioso_vote
            assert (rec.prompt or {})["version"] == "mini-mafia/v4.1-full"
        assert (rec.prompt or {})["statements"]["memory"] is memory


def test_the_speaker_and_listeners_can_be_asked_alone() -> None:
    only_self = hand.play(statements=StatementsConfig(listeners=False))
    only_peers = hand.play(statements=StatementsConfig(speaker=False))
    assert {lb["kind"] for s in only_self.statements or [] for lb in s["labels"]} == {"self"}
    assert [len(s["labels"]) for s in only_peers.statements or []] == [2, 2, 2]


def test_policy_and_human_free_seats_are_not_asked() -> None:
    """Only seats played by a model are asked: a policy mafioso's messages get the listeners' labels, none its own."""
    rec = play("mini-mafia", 2, StatementsConfig(), agents={"mafioso": "policy/random", "default": "fake/a"})
    mafioso = next(p.name for p in rec.players if p.role == "mafioso")
    assessors = {lb["assessor"] for s in rec.statements or [] for lb in s["labels"]}
    assert mafioso not in assessors and assessors


def test_the_truth_columns_of_a_hand_built_game() -> None:
    """A known lie (the mafioso claims the detective's role) and a known truthful accusation (the detective names the
    mafioso): each claim as said, and true or false by the players' roles."""
    rec = hand.play()
    c, roles = hand.cast(), hand.roles()
    by_speaker = {s["speaker"]: s for s in rec.statements or []}
    lie = [Claim.from_dict(x) for x in by_speaker[c["mafioso"]]["claims"]]
    accusation = [Claim.from_dict(x) for x in by_speaker[c["detective"]]["claims"]]
    assert [(x.player, x.said, x.value, x.negated, x.hedged) for x in lie] == [
        (c["mafioso"], "role", "detective", False, False)]
    assert [x.holds(roles) for x in lie] == [False]
    assert [(x.player, x.value) for x in accusation] == [(c["mafioso"], "mafioso")]
    assert [x.holds(roles) for x in accusation] == [True]
    assert by_speaker[c["villager"]]["claims"] == []


def test_a_broken_label_is_a_flagged_failure_with_no_verdict_and_a_re_ask_when_set() -> None:
    def answer(msgs: Sequence[Message], key: str | None) -> str:
        request = msgs[-1].content.rsplit("\n\n", 1)[-1]
        if "could not be used" in request:
            return json.dumps({"is_deceptive": 1, "confidence": "80%"})
        if '"is_deceptive"' in request:
            return '{"is_deceptive": "maybe", "confidence": 7}'
        if "from:" in request:
            return request.split("from:")[1].split(",")[0].strip().rstrip(".")
        return '"hello"'

    for reprompt in (False, True):
        pool = BackendPool()
        pool._backends["scripted/odd"] = LimitedBackend(ScriptedBackend.answering(answer), asyncio.Semaphore(4))  # type: ignore[arg-type]
        rec = play("mini-mafia", 0, StatementsConfig(), {"default": "scripted/odd"}, pool,
                   {"scripted/odd": ModelSettings(reprompt_on_failure=reprompt)})
        label = (rec.statements or [])[0]["labels"][0]
        call = next(c for c in rec.calls if c["index"] == label["call"])
        if reprompt:
            assert (label["is_deceptive"], label["confidence"], label["format_failure"]) == (True, 0.8, False)
            assert sum(c["action"] == "assess_self" for c in rec.calls) == 2 * len(rec.statements or [])
        else:
            assert label["is_deceptive"] is None and label["format_failure"]
            assert label["error"] == "'is_deceptive' is 'maybe', not 0 or 1" == call["parse"]["error"]
            assert label["confidence"] == 0.07 and call["parse"]["format_failure"]


def test_a_label_call_that_fails_for_good_fails_the_game_and_keeps_its_calls() -> None:
    def answer(msgs: Sequence[Message], key: str | None) -> str:
        if '"is_deceptive"' in msgs[-1].content.rsplit("\n\n", 1)[-1]:
            raise RuntimeError("never")
        return '"hello"'

    class Failing(ScriptedBackend):
        async def generate(self, messages: Any, settings: Any) -> Any:
            from mafiabench.backends.backend import BackendError

            if '"is_deceptive"' in messages[-1].content:
                raise BackendError("down", error_class="server_error", attempts=3)
            return await super().generate(messages, settings)

    pool = BackendPool()
    pool._backends["scripted/down"] = LimitedBackend(Failing(['"hi"'] * 50), asyncio.Semaphore(4))  # type: ignore[arg-type]
    rec = play("mini-mafia", 0, StatementsConfig(), {"default": "scripted/down"}, pool)
    assert rec.outcome["status"] == "failed" and "server_error" in (rec.error or "")
    failed = [c for c in rec.calls if c["action"].startswith("assess")]
    assert failed and all(c["response"] is None and c["error_class"] == "server_error" for c in failed)
    assert [c["index"] for c in rec.calls] == list(range(len(rec.calls)))


def test_a_record_with_labels_round_trips() -> None:
    rec = hand.play()
    again = GameRecord.from_json(rec.to_json())
    assert again.statements == rec.statements and again.to_json() == rec.to_json()
