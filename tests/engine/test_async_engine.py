"""The asynchronous variant's rules: properties over random seeds, rules and answers (valid and invalid)."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mafiabench.engine import Answer, make_game
from mafiabench.engine.async_mafia import AsyncMafia, AsyncRules, typing_seconds
from mafiabench.engine.events import MAFIA_TEAM, PUBLIC


def seconds(clock: str) -> int:
    h, m, s = (int(x) for x in clock.split(":"))
    return h * 3600 + m * 60 + s


def random_answer(d, rng: random.Random) -> Answer:  # type: ignore[no-untyped-def]
    if d.action == "schedule":
        return Answer(target=rng.choice(["send", "wait", "wait", "wait", "nonsense", None]))
    if d.action == "speak":
        return rng.choice(
            [
                Answer(text=" ".join(["word"] * rng.randint(1, 40))),
                Answer(text=None),
                Answer(format_failure=True),
                Answer(text="x" * 600),
            ]
        )
    return Answer(target=rng.choice([*d.choices, "nobody", d.player]))


def play_random(game: AsyncMafia, rng: random.Random) -> list:  # type: ignore[type-arg]
    game.reset()
    asked = []
    while not game.done:
        batch = game.pending()
        assert batch, "a batch is never empty"
        actions = {d.action for d in batch}
        assert len(actions) == 1, f"one kind of decision per batch, got {actions}"
        for d in batch:
            assert game.player(d.player).active, f"inactive {d.player} asked to {d.action}"
            asked.append((d, {p.name for p in game.players if p.active}))
        game.step({d.player: random_answer(d, rng) for d in batch})
    return asked


rules_strategy = st.builds(
    dict,
    n_players=st.integers(5, 12),
    n_mafia=st.integers(1, 3),
    day_seconds=st.integers(10, 200),
    night_seconds=st.integers(10, 90),
    tick_seconds=st.integers(1, 10),
    typing=st.booleans(),
    words_per_second=st.sampled_from([0.5, 1.0, 3.0]),
    max_days=st.integers(1, 6),
)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**63 - 1), options=rules_strategy)
def test_random_async_games_obey_the_rules(seed: int, options: dict) -> None:  # type: ignore[type-arg]
    if options["n_mafia"] * 2 >= options["n_players"]:
        options["n_mafia"] = 1
    game = make_game("async", options, seed)
    assert isinstance(game, AsyncMafia)
    rules = game.rules
    started = time.monotonic()
    asked = play_random(game, random.Random(seed))
    # No sleeping: a game of several virtual minutes takes well under a second of real time per virtual hour.
    assert time.monotonic() - started < 5.0

    # Every game ends, once, with the winner the rules say.
    assert game.done and game.log[-1].type == "game_end"
    assert sum(e.type == "game_end" for e in game.log) == 1
    assert [e.seq for e in game.log] == list(range(len(game.log)))
    mafia = {p.name for p in game.players if p.team == "mafia"}
    active = {p.name for p in game.players if p.active}
    if game.outcome.status == "finished":
        left = len(active & mafia)
        assert (game.outcome.winner == "town") == (left == 0)
        assert game.outcome.winner == "town" or left >= len(active - mafia)
    else:
        assert game.outcome.status == "unfinished" and game.outcome.days == rules.max_days

    # The game starts with a day.
    first_phase = next(e for e in game.log if e.type == "phase_start")
    assert first_phase.phase == "day" and first_phase.round == 1

    # The clock is monotone over every stamped event and never passes the phases' total length.
    clocks = [seconds(e.data["clock"]) for e in game.log if "clock" in e.data]
    assert clocks == sorted(clocks)
    assert clocks[-1] <= rules.max_days * (rules.day_seconds + rules.night_seconds)

    # Votes only by and for active players; day votes are public, night votes mafia-only and by mafia.
    gone: set[str] = set()
    for e in game.log:
        if e.type in ("message", "mafia_message", "vote", "schedule", "silence") and e.actor in gone:
            raise AssertionError(f"{e.actor} acted after leaving: {e}")
        if e.type == "vote":
            assert e.target not in gone and e.target != e.actor
            if e.phase == "day":
                assert e.visibility == PUBLIC
            else:
                assert e.visibility == MAFIA_TEAM and e.actor in mafia and e.target not in mafia
        if e.type in ("elimination", "death"):
            assert e.target not in gone
            gone.add(e.target)  # type: ignore[arg-type]
            assert e.data["role"] == game.player(e.target).role and e.visibility == PUBLIC  # type: ignore[arg-type]
            assert e.data["mafia_left"] == len(mafia - gone)
        # Night chat only among mafia, hidden from everyone else; day chat public.
        if e.type == "mafia_message":
            assert e.phase == "night" and e.actor in mafia and e.visibility == MAFIA_TEAM
        if e.type == "message":
            assert e.phase == "day" and e.visibility == PUBLIC
            assert e.text and len(e.text) <= rules.message_limit
    for p in game.players:
        if p.team == "town":
            assert not any(e.type == "mafia_message" for e in game.view(p.name))

    # A night chat is held only while two or more mafia are active; schedulers come in one batch per tick.
    for d, alive in asked:
        if d.phase == "night" and d.action in ("schedule", "speak"):
            assert d.player in mafia and len(alive & mafia) >= 2
        if d.action == "kill":
            assert d.player in mafia and set(d.choices) == alive - mafia
        if d.action == "vote":
            assert set(d.choices) == alive - {d.player}


def test_schedulers_of_a_tick_come_as_one_batch_then_generators() -> None:
    game = make_game("async", {"typing": False}, 1)
    game.reset()
    batch = game.pending()
    assert {d.action for d in batch} == {"schedule"} and len(batch) == 10
    assert all(d.clock == "00:00:00" and d.choices == ("send", "wait") for d in batch)
    senders = [d.player for d in batch[:3]]
    game.step({d.player: Answer(target="send" if d.player in senders else "wait") for d in batch})
    gen = game.pending()
    assert [d.action for d in gen] == ["speak"] * 3 and [d.player for d in gen] == senders
    game.step({s: Answer(text=f"hello from {s}") for s in senders})
    posted = [e for e in game.log if e.type == "message"]
    assert [e.actor for e in posted] == senders and all(e.data["clock"] == "00:00:00" for e in posted)
    nxt = game.pending()
    assert nxt[0].action == "schedule" and nxt[0].clock == "00:00:05"


def test_typing_time_delays_a_message_and_blocks_its_author() -> None:
    rules = AsyncRules()
    assert typing_seconds("one two three four", rules, "day") == 4
    assert typing_seconds("w " * 50, rules, "day") == 10  # capped
    assert typing_seconds("w " * 50, rules, "night") == 5  # halved at night
    assert typing_seconds("one two", AsyncRules(typing=False), "day") == 0
    game = make_game("async", {}, 2)
    game.reset()
    first = game.pending()
    author = first[0].player
    game.step({d.player: Answer(target="send" if d.player == author else "wait") for d in first})
    game.step({author: Answer(text="one two three four five six seven")})  # 7 s: appears at 00:00:07
    assert not any(e.type == "message" for e in game.log)
    second = game.pending()
    assert author not in {d.player for d in second}  # still typing at 00:00:05
    game.step({d.player: Answer(target="wait") for d in second})
    third = game.pending()
    msg = next(e for e in game.log if e.type == "message")
    assert msg.actor == author and msg.data["clock"] == "00:00:07" and third[0].clock == "00:00:10"
    assert author in {d.player for d in third}


def test_a_message_still_being_typed_at_the_end_of_the_phase_is_dropped_and_its_author_told() -> None:
    game = make_game("async", {"day_seconds": 10, "tick_seconds": 5}, 3)
    game.reset()
    game.step({d.player: Answer(target="wait") for d in game.pending()})
    batch = game.pending()
    author = batch[0].player
    assert batch[0].clock == "00:00:05"
    game.step({d.player: Answer(target="send" if d.player == author else "wait") for d in batch})
    game.step({author: Answer(text="a b c d e f g h")})  # would appear at 00:00:13, after the day ends at 10
    dropped = [e for e in game.log if e.type == "info" and e.data.get("kind") == "message_dropped"]
    assert len(dropped) == 1 and dropped[0].target == author and dropped[0].visibility == f"player:{author}"
    assert not any(e.type == "message" for e in game.log)
    assert {d.action for d in game.pending()} == {"vote"} and game.pending()[0].clock == "00:00:10"


def test_unusable_scheduler_answer_falls_back_as_configured_and_is_flagged() -> None:
    for fallback in ("send", "wait"):
        game = make_game("async", {"scheduler_fallback": fallback}, 4)
        game.reset()
        batch = game.pending()
        game.step({d.player: Answer(target=None, format_failure=True) for d in batch})
        flagged = [e for e in game.log if e.type == "schedule"]
        assert len(flagged) == 10 and all(e.format_failure and e.data["decision"] == fallback for e in flagged)
        assert {d.action for d in game.pending()} == ({"speak"} if fallback == "send" else {"schedule"})


def test_night_chat_is_skipped_with_one_mafioso_but_the_clock_runs() -> None:
    game = make_game("async", {"n_players": 5, "n_mafia": 1, "day_seconds": 10, "night_seconds": 20}, 5)
    game.reset()
    while not game.done:
        batch = game.pending()
        if batch[0].action == "kill":
            assert batch[0].clock == "00:00:30"  # 10 s day + 20 s night without chat
            break
        game.step({d.player: Answer(target="wait") if d.action == "schedule" else Answer(target=d.choices[0])
                   for d in batch})
    assert not any(e.type == "mafia_message" for e in game.log)


def test_rules_are_checked() -> None:
    with pytest.raises(ValidationError):
        AsyncRules(n_players=4, n_mafia=2)
    with pytest.raises(ValidationError):
        AsyncRules(tick_seconds=90, night_seconds=60)
    with pytest.raises(ValidationError):
        AsyncRules(n_players=3, n_mafia=1, names=("A", "B", "B"))


def test_same_seed_same_answers_same_log_and_no_event_loop_needed() -> None:
    logs = []
    for _ in range(2):
        game = make_game("async", {}, 77)
        play_random(game, random.Random(5))  # type: ignore[arg-type]
        logs.append([e.to_dict() for e in game.log])
    assert logs[0] == logs[1]
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # the engine ran with no event loop at all: nothing awaited, nothing slept


@pytest.mark.parametrize("seed", range(5))
def test_votes_as_cast_are_asked_one_at_a_time_and_each_is_logged_before_the_next(seed: int) -> None:
    """LLMafia posts votes as they arrive: with `votes_as_cast`, every vote batch holds one voter, every earlier vote
    of the phase is already in the log when the next voter is asked, and the order varies with the seed."""
    game = make_game("async", {"n_players": 6, "n_mafia": 1, "day_seconds": 10, "night_seconds": 10,
                               "votes_as_cast": True}, seed)
    game.reset()
    rng = random.Random(seed)
    orders: list[list[str]] = []
    while not game.done:
        batch = game.pending()
        if batch[0].action in ("vote", "kill"):
            assert len(batch) == 1, "one voter at a time"
            (d,) = batch
            logged = [e.actor for e in game.log if e.type == "vote" and e.phase == d.phase and e.round == d.round]
            if not logged:
                orders.append([])
            assert logged == orders[-1], "each earlier vote is logged before the next voter is asked"
            orders[-1].append(d.player)
        game.step({d.player: random_answer(d, rng) for d in batch})
    day1 = orders[0]
    assert sorted(day1) == sorted(p.name for p in game.players)  # everyone voted on day 1, once
    assert game.outcome.winner is not None


def test_votes_as_cast_order_is_drawn_from_the_seed() -> None:
    def first_day_order(seed: int) -> list[str]:
        game = make_game("async", {"n_players": 8, "day_seconds": 10, "night_seconds": 10, "votes_as_cast": True},
                         seed)
        game.reset()
        order = []
        while not game.done and not (order and game.pending()[0].action != "vote"):
            batch = game.pending()
            if batch[0].action == "vote":
                order.append(batch[0].player)
            game.step({d.player: Answer(target="wait") if d.action == "schedule" else Answer(target=d.choices[0])
                       for d in batch})
        return order
    assert first_day_order(1) == first_day_order(1)
    seats = {tuple(first_day_order(s)) for s in range(6)}
    assert len(seats) > 1


def test_names_are_drawn_per_game_from_the_pool() -> None:
    pool = tuple(f"N{i}" for i in range(14))
    games = [make_game("async", {"draw_names": True, "name_pool": pool}, seed) for seed in range(8)]
    casts = []
    for g in games:
        g.reset()
        names = [p.name for p in g.players]
        assert len(set(names)) == 10 and set(names) <= set(pool)
        casts.append(frozenset(names))
    assert len(set(casts)) > 1, "different games draw different names"
    again = make_game("async", {"draw_names": True, "name_pool": pool}, 0)
    again.reset()
    assert [p.name for p in again.players] == [p.name for p in games[0].players]  # the seed decides
    default = make_game("async", {"draw_names": True}, 3)
    default.reset()
    assert len({p.name for p in default.players}) == 10


@pytest.mark.parametrize(("options", "message"), [
    ({"draw_names": True, "names": tuple("ABCDEFGHIJ")}, "not both"),
    ({"name_pool": ("A", "B")}, "only read with draw_names"),
    ({"draw_names": True, "name_pool": ("A", "B", "C")}, "at least 10 distinct names"),
])
def test_bad_name_rules_are_refused(options: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError, match=message):
        AsyncRules(**options)


def test_a_later_voter_reads_the_votes_cast_before_theirs() -> None:
    """End to end with an LLM agent (the fake model) and prompt version v2: with `votes_as_cast`, each day-1 vote
    prompt holds exactly the votes logged before it was asked, in the order they were cast."""
    from mafiabench.play.runner import BackendPool, GameSpec, play_game

    spec = GameSpec.build("cast", "async", {"n_players": 6, "n_mafia": 1, "day_seconds": 10, "night_seconds": 10,
                                            "votes_as_cast": True}, 4, {"default": "fake/async-talker"},
                          prompt_version="v2")
    record = asyncio.run(play_game(spec, BackendPool()))
    votes = [e for e in record.events if e.type == "vote" and e.phase == "day" and e.round == 1]
    prompts = [c for c in record.calls if c["action"] == "vote" and c["round"] == 1]
    assert [c["player"] for c in prompts] == [v.actor for v in votes] and len(votes) == 6
    for i, call in enumerate(prompts):
        text = "\n".join(str(m.get("content")) for m in call["request"]["messages"])
        seen = [v for v in votes if f"{v.actor} voted for {v.target}" in text]
        assert seen == votes[:i], f"voter {i + 1} sees {len(seen)} earlier votes"
