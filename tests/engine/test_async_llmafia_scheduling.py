"""`scheduling = "llmafia"`: LLMafia's real-time scheduling (niveck/LLMafia llm_interface.py: each player's own loop,
wait_writing_time, get_vote_from_llm / update_vote) replayed on the virtual clock, seeded. Hand-timed cases with a
fixed call latency, then properties over random seeds and answers."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mafiabench.engine import Answer, make_game
from mafiabench.engine.async_mafia import AsyncMafia, AsyncRules, timing_model, typing_seconds

FIXED = {"scheduling": "llmafia", "call_seconds": (2, 2)}


def seconds(clock: str) -> int:
    h, m, s = (int(x) for x in clock.split(":"))
    return h * 3600 + m * 60 + s


def test_a_player_is_asked_again_as_soon_as_its_last_call_returns() -> None:
    """Calls of 2 s: a waiting player is asked at 0, 2, 4, ...; a sender of a 7-word message at 00:00 is asked again
    when it has posted: 2 s (scheduler) + 2 s (generation) + 7 s (typing) = 00:00:11, where the message appears."""
    game = make_game("async", {**FIXED, "day_seconds": 30}, 1)
    game.reset()
    batch = game.pending()
    assert {d.action for d in batch} == {"schedule"} and len(batch) == 10
    assert {d.clock for d in batch} == {"00:00:00"}
    author = batch[0].player
    game.step({d.player: Answer(target="send" if d.player == author else "wait") for d in batch})
    (gen,) = game.pending()
    assert gen.action == "speak" and gen.player == author and gen.clock == "00:00:00"
    game.step({author: Answer(text="one two three four five six seven")})
    asked_at: dict[str, list[int]] = {}
    while True:
        batch = game.pending()
        if batch[0].action != "schedule":
            break
        for d in batch:
            asked_at.setdefault(d.player, []).append(seconds(d.clock))  # type: ignore[arg-type]
        game.step({d.player: Answer(target="wait") for d in batch})
    others = [p for p in asked_at if p != author]
    assert all(asked_at[p] == list(range(2, 30, 2)) for p in others)
    assert asked_at[author] == list(range(11, 30, 2))
    (msg,) = [e for e in game.log if e.type == "message"]
    assert msg.actor == author and msg.data["clock"] == "00:00:11"


def test_typing_is_min_words_and_ten_seconds_by_day_and_by_night() -> None:
    """LLMafia's wait_writing_time: min(words // words_per_second, MAX_TIME_TO_WAIT = 10), not halved at night (the
    tick scheduling halves it: ours)."""
    llmafia = AsyncRules(scheduling="llmafia")
    assert typing_seconds("w " * 7, llmafia, "night") == typing_seconds("w " * 7, llmafia, "day") == 7
    assert typing_seconds("w " * 50, llmafia, "night") == 10
    assert typing_seconds("w " * 7, AsyncRules(), "night") == 3


def test_every_voter_is_asked_as_its_loop_comes_around_and_each_vote_is_posted_as_it_arrives() -> None:
    """Day of 10 s, calls of 2 s, LLMafia's 5 s pause: the players waiting at 00:00:08 return at 10 and vote at
    once, their votes posted at 10 + 2 + 5 = 17; a sender whose 5-word message was dropped (8 + 4 + 5 = 17 > 10)
    returns at 17, after those votes are posted, sees them, and its vote is posted at 24."""
    game = make_game("async", {**FIXED, "n_players": 6, "n_mafia": 1, "day_seconds": 10}, 3)
    game.reset()
    late = None
    while True:
        batch = game.pending()
        if batch[0].action == "vote":
            break
        if batch[0].action == "speak":
            game.step({d.player: Answer(text="one two three four five") for d in batch})
            continue
        late = late or (batch[0].player if batch[0].clock == "00:00:08" else None)
        game.step({d.player: Answer(target="send" if d.player == late else "wait") for d in batch})
    assert late is not None
    dropped = [e for e in game.log if e.data.get("kind") == "message_dropped"]
    assert [e.target for e in dropped] == [late]
    assert {d.clock for d in batch} == {"00:00:10"} and late not in {d.player for d in batch}
    assert len(batch) == 5
    game.step({d.player: Answer(target=d.choices[0]) for d in batch})
    (last,) = game.pending()
    assert last.player == late and last.clock == "00:00:17"
    posted = [e for e in game.log if e.type == "vote"]
    assert len(posted) == 5 and {e.data["clock"] for e in posted} == {"00:00:17"}
    seats = {p.name: p.seat for p in game.players}
    assert [seats[e.actor] for e in posted] == sorted(seats[e.actor] for e in posted)  # same second: seat order
    assert all(e in game.view(late) for e in posted)  # the late voter reads them
    game.step({late: Answer(target=last.choices[0])})
    vote = next(e for e in game.log if e.type == "vote" and e.actor == late)
    assert vote.data["clock"] == "00:00:24"
    assert next(e for e in game.log if e.type == "elimination").data["clock"] == "00:00:24"


def test_latencies_come_from_the_seed_and_leave_the_games_other_draws_alone() -> None:
    def log(seed: int) -> list[str]:
        game = make_game("async", {"scheduling": "llmafia", "n_players": 6, "n_mafia": 1, "day_seconds": 20}, seed)
        game.reset()
        rng = random.Random(0)
        while not game.done:
            batch = game.pending()
            game.step({d.player: Answer(target=rng.choice(["send", "wait"])) if d.action == "schedule"
                       else Answer(text="a b c") if d.action == "speak" else Answer(target=d.choices[0])
                       for d in batch})
        return [f"{e.type} {e.actor} {e.data.get('clock')}" for e in game.log]
    assert log(7) == log(7) and log(7) != log(8)
    ticks = make_game("async", {"n_players": 6, "n_mafia": 1}, 7)
    llmafia = make_game("async", {"scheduling": "llmafia", "n_players": 6, "n_mafia": 1}, 7)
    ticks.reset()
    llmafia.reset()
    assert [p.name for p in ticks.players] == [p.name for p in llmafia.players]  # the seats are drawn alike


def test_tick_scheduled_rules_record_exactly_what_they_did_before() -> None:
    """The llmafia fields appear in a record (and a card, a cell fingerprint) only when the game uses them."""
    assert "scheduling" not in AsyncRules().model_dump() and "call_seconds" not in AsyncRules().model_dump_json()
    on = AsyncRules(scheduling="llmafia").model_dump()
    assert (on["scheduling"], on["call_seconds"], on["vote_wait_seconds"]) == ("llmafia", (1, 3), 5)
    assert AsyncRules(**AsyncRules(scheduling="llmafia", call_seconds=(2, 4)).model_dump()).call_seconds == (2, 4)
    assert on["votes_as_cast"] and not AsyncRules().votes_as_cast  # later voters see the votes posted before
    timing = timing_model(AsyncRules(scheduling="llmafia"))
    assert timing["votes"] == ("each voter asked when its loop comes around after voting starts; each vote posted as "
                               "it arrives, 5 s after its answer")
    assert timing["typing"] == "min(words // 1, 10) seconds, by day and by night"
    assert timing_model(AsyncRules())["typing"] == "min(words // 1, 10) seconds, halved at night"


@pytest.mark.parametrize(("options", "message"), [
    ({"votes_as_cast": False}, "votes_as_cast cannot be false there"),
    ({"call_seconds": (0, 2)}, "1 <= low <= high"),
    ({"call_seconds": (3, 2)}, "1 <= low <= high"),
])
def test_bad_llmafia_rules_are_refused(options: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError, match=message):
        AsyncRules(scheduling="llmafia", **options)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**63 - 1), low=st.integers(1, 4), spread=st.integers(0, 3),
       day=st.integers(10, 120), night=st.integers(10, 60), players=st.integers(5, 10))
def test_random_llmafia_games_keep_time_and_order(seed: int, low: int, spread: int, day: int, night: int,
                                                   players: int) -> None:
    """Every player's next question comes no sooner than its last call could return; messages and votes appear in
    time order, within their phase; the clock never runs back."""
    rules = {"scheduling": "llmafia", "call_seconds": (low, low + spread), "day_seconds": day, "night_seconds": night,
             "n_players": players, "n_mafia": 2 if players >= 7 else 1, "max_days": 4}
    game = make_game("async", rules, seed)
    assert isinstance(game, AsyncMafia)
    rng = random.Random(seed)
    game.reset()
    last_asked: dict[tuple[str, str, int], int] = {}
    while not game.done:
        batch = game.pending()
        assert len({d.clock for d in batch}) == 1, "one batch, one moment"
        for d in batch:
            if d.action == "schedule":
                key = (d.player, d.phase, d.round)
                now = seconds(d.clock)  # type: ignore[arg-type]
                assert now - last_asked.get(key, now - low) >= low, "asked again before its call returned"
                last_asked[key] = now
        game.step({d.player: Answer(target=rng.choice(["send", "wait", "nonsense"])) if d.action == "schedule"
                   else Answer(text=" ".join(["w"] * rng.randint(1, 30))) if d.action == "speak"
                   else Answer(target=rng.choice([*d.choices, "nobody"])) for d in batch})
    clocks = [seconds(e.data["clock"]) for e in game.log if "clock" in e.data]
    assert clocks == sorted(clocks)
    starts = {(e.phase, e.round): seconds(e.data["clock"]) for e in game.log if e.type == "phase_start"}
    for e in game.log:
        if e.type in ("message", "mafia_message"):
            begin = starts[(e.phase, e.round)]
            assert begin <= seconds(e.data["clock"]) < begin + (day if e.phase == "day" else night)
        if e.type == "vote":
            begin = starts[(e.phase, e.round)]
            assert seconds(e.data["clock"]) >= begin + (day if e.phase == "day" else night) + low + 5
