"""Async agents: tolerant parsing, what each role's prompts show, flagged fallbacks, concurrent schedulers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from mafiabench.agents.llm import LLMAgent
from mafiabench.agents.parsing import parse_chat_message, parse_schedule
from mafiabench.backends.backend import Completion, GenerateSettings, Message
from mafiabench.engine.core import Decision
from mafiabench.play.runner import BackendPool, GameSpec, LimitedBackend, play_game
from mafiabench.testing.fake_model import FakeBrain

SHORT = {"n_players": 8, "n_mafia": 2, "day_seconds": 30, "night_seconds": 20, "max_days": 3}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("<send>", "send"),
        ("<wait>", "wait"),
        ("  <SEND>\n", "send"),
        ("[[speak]]", "send"),
        ("pass", "wait"),
        ("I will <wait> for now", "wait"),
        ("**<send>**", "send"),
        ("<quiet>", "wait"),
    ],
)
def test_scheduler_answers_are_read_tolerantly(text: str, want: str) -> None:
    assert parse_schedule(text) == (want, None)


@pytest.mark.parametrize("text", ["", "   ", "hmm", "<<|endoftext|>> ### {{{ garbled \ufffd output"])
def test_unusable_scheduler_answers_are_failures(text: str) -> None:
    choice, error = parse_schedule(text)
    assert choice is None and error


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("i think finn is lying", "i think finn is lying"),
        ('"Finn is sus"', "Finn is sus"),
        ("[00:01:05] Ada: finn is sus", "finn is sus"),
        ("Ada: finn is sus\nreasoning: ...", "finn is sus"),
        ("ada:   ada: hi all", "hi all"),
        ("“quoted”", "quoted"),
    ],
)
def test_generator_answers_are_read_tolerantly(text: str, want: str) -> None:
    assert parse_chat_message(text, "Ada") == (want, None)


def test_empty_generator_answer_is_a_failure() -> None:
    assert parse_chat_message("  ", "Ada")[0] is None
    assert parse_chat_message('""', "Ada")[0] is None


def prompts_of(record, player: str, action: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [c["request"]["messages"][0]["content"] for c in record.calls if c["player"] == player
            and c["action"] == action]


def test_each_role_sees_what_the_protocol_says() -> None:
    """Bystanders see day chat and eliminated players' roles; mafia also see their teammates and the night chat."""
    spec = GameSpec.build("roles", "async", SHORT, 21, {"default": "scripted/naive"})
    rec = asyncio.run(play_game(spec, BackendPool()))
    assert rec.outcome["status"] == "finished", rec.error
    mafia = [p.name for p in rec.players if p.role == "mafioso"]
    town = [p.name for p in rec.players if p.role != "mafioso"]
    night = [e for e in rec.events if e.type == "mafia_message"]
    day = [e for e in rec.events if e.type == "message"]
    assert night and day, "the seed should give both chats"
    for name in town:
        for prompt in prompts_of(rec, name, "schedule") + prompts_of(rec, name, "vote"):
            assert "You are a bystander" in prompt
            assert not any(f"[{e.data['clock']}] {e.actor}: {e.text}" in prompt for e in night)
            assert not any(m in prompt.split("CHAT HISTORY:")[1].split("\n")[1] for m in mafia)
    last_vote = {p: prompts_of(rec, p, "vote")[-1] for p in town if prompts_of(rec, p, "vote")}
    later = [q for n in town for q in prompts_of(rec, n, "schedule") + prompts_of(rec, n, "vote")]
    assert any("they were a" in q for q in later)  # roles of eliminated players are announced
    for name in mafia:
        kills = prompts_of(rec, name, "kill")
        if not kills:
            continue
        mate = next(m for m in mafia if m != name)
        assert f"together with {mate}" in kills[0] and f"Your fellow mafia: {mate}" in kills[0]
        assert "choose whom to kill" in kills[0] and "lynch" not in kills[0].rsplit("\n\n", 1)[1]
        assert any(f"[{e.data['clock']}] {e.actor}: {e.text}" in kills[-1] for e in night)
    vote = next(iter(last_vote.values()))
    assert "vote to lynch" in vote.rsplit("\n\n", 1)[1] and "kill" not in vote.rsplit("\n\n", 1)[1]


def test_format_failures_are_flagged_not_fatal() -> None:
    """A model that answers garbage: schedulers fall back (flagged), messages become flagged silences, votes
    flagged random fallbacks; the game still ends."""
    spec = GameSpec.build("garbage", "async", {**SHORT, "scheduler_fallback": "send"}, 3,
                          {"default": "fake-garbage/m"})
    from mafiabench.backends.endpoints import EndpointConfig

    pool = BackendPool(endpoints={"fake-garbage": EndpointConfig("fake-garbage", "fake", options={"p_malformed": 1.0})})
    rec = asyncio.run(play_game(spec, pool))
    assert rec.outcome["status"] == "finished", rec.error
    sched = [e for e in rec.events if e.type == "schedule"]
    votes = [e for e in rec.events if e.type == "vote"]
    assert sched and all(e.format_failure for e in sched)
    assert votes and all(e.format_failure and e.random_fallback for e in votes)
    assert all(c["parse"]["format_failure"] for c in rec.calls if c["action"] in ("schedule", "vote", "kill"))


class InFlight:
    """A backend that answers like the fake brain after a short real delay and records the peak of concurrent
    calls per action."""

    provider = "probe"
    model = "probe"

    def __init__(self) -> None:
        self.now = 0
        self.peak: dict[str, int] = {}
        self.brain = FakeBrain("probe")

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        prompt = messages[-1].content
        action = "schedule" if "<send>" in prompt.rsplit("\n\n", 1)[-1] else "other"
        self.now += 1
        self.peak[action] = max(self.peak.get(action, 0), self.now)
        await asyncio.sleep(0.01)
        self.now -= 1
        return Completion(text=self.brain.answer(messages, settings.replay_key))


def test_the_runner_keeps_all_scheduler_calls_of_a_tick_concurrent() -> None:
    probe = InFlight()
    pool = BackendPool()
    pool._backends["probe/m"] = LimitedBackend(probe, asyncio.Semaphore(64))  # type: ignore[arg-type]
    spec = GameSpec.build("concurrent", "async", {**SHORT, "max_days": 1}, 8, {"default": "probe/m"})
    started = time.monotonic()
    rec = asyncio.run(play_game(spec, pool))
    elapsed = time.monotonic() - started
    assert rec.error is None
    assert probe.peak["schedule"] == 8  # all eight players' schedulers of the first tick at once
    ticks = 30 // 5
    # Sequential calls would take 8 players x 6 ticks x 10 ms alone; concurrent ticks take about 6 x 10 ms.
    assert elapsed < 8 * ticks * 0.01 + 1.0


def test_no_real_sleeping_in_a_whole_policy_game(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("the async variant slept")

    monkeypatch.setattr(time, "sleep", refuse)
    original = asyncio.sleep

    async def refuse_positive(delay: float, *a: object, **k: object) -> object:
        if delay > 0:
            raise AssertionError("the async variant slept")
        return await original(0)

    monkeypatch.setattr(asyncio, "sleep", refuse_positive)
    spec = GameSpec.build("nosleep", "async", {}, 1,
                          {"mafioso": "scripted/naive", "default": "policy/always-accuse:Avery"})
    rec = asyncio.run(play_game(spec, BackendPool()))
    assert rec.outcome["status"] in ("finished", "unfinished") and rec.error is None
    last = max(e.data["clock"] for e in rec.events if "clock" in e.data)
    assert last >= "00:03:30"  # at least one day and one night of virtual time passed


def test_record_replay_cache_serves_async_calls(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = GameSpec.build("cached", "async", SHORT, 4, {"default": "scripted/naive"})
    first = asyncio.run(play_game(spec, BackendPool(cache_dir=str(tmp_path))))
    assert any(tmp_path.rglob("*")), "the cache recorded the calls"
    again = asyncio.run(play_game(spec, BackendPool(cache_dir=str(tmp_path))))
    assert [e.to_dict() for e in first.events] == [e.to_dict() for e in again.events]


def test_decision_clock_reaches_the_prompt() -> None:
    agent = LLMAgent("scripted/naive", None, __import__("mafiabench.agents.prompts", fromlist=["x"]).load_prompts(
        "async"))  # type: ignore[arg-type]
    from mafiabench.agents.agent import PlayerView
    from mafiabench.engine.async_mafia import AsyncRules

    view = PlayerView("Ada", "bystander", "town", "async", AsyncRules(n_players=5, n_mafia=1,
                      names=("Ada", "Bo", "Cy", "Di", "Ed")), ("Ada", "Bo", "Cy", "Di", "Ed"), ())
    prompt, prefix = agent.build_prompt(Decision("Ada", "schedule", "day", 1, ("send", "wait"), 3, 30,
                                                 clock="00:00:10"), view)
    assert "The time is now [00:00:10]" in prompt and prompt.rstrip().endswith("<wait> to wait.")
    assert "The players are: Ada, Bo, Cy, Di and Ed." in prompt[:prefix]
