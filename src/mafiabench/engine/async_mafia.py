"""Asynchronous Mafia (the "Hidden in Plain Text" / "Time to Talk" protocol): players decide *when* to talk.

Default 10 players (2 mafiosos, 8 bystanders); the game starts with a day. Time is a virtual clock in whole
seconds kept in the engine state (`self.clock`) and stamped on every timed event as `data.clock` (`HH:MM:SS`
since the chat opened), so nothing sleeps and a replay is byte-for-byte identical.

A phase is a run of ticks of `tick_seconds`. At each tick every participant who is not busy typing gets a
*scheduler* decision (`schedule`, choices `send`/`wait`) in one batch; then everyone who chose `send` gets a
*generator* decision (`speak`) in a second batch. A message appears after a simulated typing time proportional to
its length (`words / words_per_second`, capped at `max_typing_seconds`, as the reference agent waits before posting,
and halved at night, which LLMafia does not do: ours); a message that would appear after the phase ends is never
posted (the speaker is told). The day is public; the night chat is mafia-only (`mafia_message`, `team:mafia`) and is
held only while two or more mafiosos are active. Each phase ends with a vote: `vote` ("lynch") by every active
player by day, `kill` by the active mafiosos at night; plurality with a uniform random tie-break. The votes are
simultaneous, or, with `votes_as_cast`, asked one voter at a time in an order drawn from the seed, each vote posted
before the next voter is asked (LLMafia posts votes as they arrive, so later voters see them). The eliminated
player's name and role are announced with the number of mafia left. Ends at parity or when no mafioso is active;
after `max_days` days the game ends `unfinished`.

`scheduling = "llmafia"` replays LLMafia's real-time scheduling (niveck/LLMafia llm_interface.py: each player's own
loop) on the virtual clock instead of ticks: a player is asked whether to post again as soon as its last call
returns, every model call taking a latency drawn from the seed (`call_seconds`, LLMafia's is the API's); a sender's
message is generated from the same view and posted after both calls and the typing delay, min(words //
words_per_second, max_typing_seconds), not halved at night; when the phase ends every voter is asked as its loop
comes around (together with the others whose loops return then), and each vote is posted as it arrives, after the
call and LLMafia's `vote_wait_seconds` pause (VOTING_WAITING_TIME), so a voter asked later sees the votes posted
before. LLMafia asks no one until a player has spoken in the phase (`no_one_has_talked_yet_in_current_phase`), which
stalls a game of LLM players only: not replayed.
"""

from __future__ import annotations

import random
from collections.abc import Generator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from mafiabench.engine.core import Answer, Batch, Decision, GameEngine, Script
from mafiabench.engine.events import MAFIA_TEAM, PUBLIC, Phase, player_visibility

# Unisex first names, chosen for this project (ten per default game, shuffled into seats from the seed).
DEFAULT_NAMES = (
    "Avery", "Blair", "Casey", "Devon", "Emery", "Finn", "Harper", "Jordan", "Kendall", "Logan",
    "Morgan", "Noel", "Parker", "Quinn", "Reese", "Sawyer", "Taylor", "Rowan", "Skyler", "Jules",
)  # fmt: skip
# The pool `draw_names` draws each game's names from when no `name_pool` is given (the defaults and ten more).
NAME_POOL = (
    *DEFAULT_NAMES, "Ashton", "Dakota", "Hayden", "Jesse", "Marlow", "Peyton", "Riley", "Sage", "Tatum", "Wren",
)  # fmt: skip


class AsyncRules(BaseModel):
    """Rules of one asynchronous game; every field is recorded with the game and rendered into the prompts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_players: int = Field(10, ge=3, le=20, description="Number of players.")
    n_mafia: int = Field(2, ge=1, description="Number of mafiosos; the rest are bystanders.")
    day_seconds: int = Field(150, ge=1, description="Virtual length of a day's discussion.")
    night_seconds: int = Field(60, ge=1, description="Virtual length of a night (mafia chat when 2+ mafia live).")
    tick_seconds: int = Field(5, ge=1, description="Virtual seconds between two scheduler rounds.")
    typing: bool = Field(True, description="Delay each message by a simulated typing time (reference: on).")
    words_per_second: float = Field(1.0, gt=0, description="Typing speed for the simulated delay.")
    max_typing_seconds: int = Field(10, ge=0, description="Cap on one message's typing delay.")
    message_limit: int = Field(300, ge=1, description="Characters per message; longer ones are cut and flagged.")
    scheduler_fallback: Literal["send", "wait"] = Field(
        "send", description="Decision when a scheduler answer names neither token (the reference sends)."
    )
    max_days: int = Field(10, ge=1, description="Days before a stuck game ends as unfinished.")
    names: tuple[str, ...] | None = Field(None, description="Player names; default the first N of a fixed list.")
    draw_names: bool = Field(
        False, description="Draw each game's names from `name_pool` with the game's seed (LLMafia draws per game)."
    )
    name_pool: tuple[str, ...] | None = Field(None, description="Names to draw from (default: a built-in 30).")
    votes_as_cast: bool = Field(
        False, description="Ask voters one at a time in a seeded order, each seeing the votes cast before (LLMafia); "
        "with scheduling = \"llmafia\", true: votes are posted as they arrive."
    )
    scheduling: Literal["ticks", "llmafia"] = Field(
        "ticks", description="`ticks`: every player not typing asked at each tick; `llmafia`: LLMafia's real-time "
        "loops replayed on the virtual clock (each player asked again when its last call returns, votes posted as "
        "they arrive)."
    )
    call_seconds: tuple[int, int] = Field(
        (1, 3), description="llmafia: a model call's virtual latency in seconds, drawn uniformly from [low, high] "
        "with the game's seed (LLMafia's is the API's own)."
    )
    vote_wait_seconds: int = Field(
        5, ge=0, description="llmafia: the pause before a vote is posted (LLMafia's VOTING_WAITING_TIME)."
    )

    @model_serializer(mode="wrap")
    def _omit_llmafia_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The `llmafia` fields are recorded only when the game uses them, so every tick-scheduled record, card and
        cell fingerprint made before them stays byte for byte."""
        data: dict[str, Any] = handler(self)
        if self.scheduling == "ticks" and self.call_seconds == (1, 3) and self.vote_wait_seconds == 5:
            for key in ("scheduling", "call_seconds", "vote_wait_seconds"):
                data.pop(key, None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _llmafia_posts_votes_as_cast(cls, data: Any) -> Any:
        """Under `llmafia` a later voter sees the votes posted before it: votes_as_cast holds unless said otherwise
        (and saying otherwise is refused below)."""
        if isinstance(data, dict) and data.get("scheduling") == "llmafia" and "votes_as_cast" not in data:
            return {**data, "votes_as_cast": True}
        return data

    @model_validator(mode="after")
    def _check(self) -> AsyncRules:
        town = self.n_players - self.n_mafia
        low, high = self.call_seconds
        if not 1 <= low <= high:
            raise ValueError(f"call_seconds must be [low, high] with 1 <= low <= high, got {list(self.call_seconds)}")
        if self.scheduling == "llmafia" and not self.votes_as_cast:
            raise ValueError("scheduling = \"llmafia\" posts each vote as it arrives, so later voters see it: "
                             "votes_as_cast cannot be false there")
        if self.n_mafia >= town:
            raise ValueError(f"n_mafia={self.n_mafia} must be fewer than the town ({town}) or mafia win at once")
        if self.tick_seconds > min(self.day_seconds, self.night_seconds):
            raise ValueError(f"tick_seconds={self.tick_seconds} is longer than a phase")
        if self.names is not None and (
            len(self.names) != self.n_players
            or len(set(self.names)) != len(self.names)
            or any(not n.strip() or ":" in n for n in self.names)
        ):
            raise ValueError(f"names must be {self.n_players} distinct names without ':', got {list(self.names)}")
        if self.names is None and not self.draw_names and self.n_players > len(DEFAULT_NAMES):
            raise ValueError(f"give names for more than {len(DEFAULT_NAMES)} players")
        if self.draw_names and self.names is not None:
            raise ValueError("give fixed names or draw_names, not both")
        if self.name_pool is not None and not self.draw_names:
            raise ValueError("name_pool is only read with draw_names = true")
        pool = self.pool
        if self.draw_names and (
            len(set(pool)) != len(pool) or len(pool) < self.n_players or any(not n.strip() or ":" in n for n in pool)
        ):
            raise ValueError(f"name_pool must hold at least {self.n_players} distinct names without ':', "
                             f"got {list(pool)}")
        return self

    @property
    def pool(self) -> tuple[str, ...]:
        return self.name_pool or NAME_POOL

    @property
    def player_names(self) -> tuple[str, ...]:
        return self.names or DEFAULT_NAMES[: self.n_players]

    @property
    def composition(self) -> dict[str, int]:
        return {"mafioso": self.n_mafia, "bystander": self.n_players - self.n_mafia}


def clock_text(seconds: int) -> str:
    """`HH:MM:SS` of a virtual clock reading (seconds since the chat opened)."""
    s = max(0, int(seconds))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def duration_text(seconds: int) -> str:
    """`2.5 minutes`, `1 minute`, `20 seconds`: how the announcements and the prompts say a phase's length."""
    if seconds % 60 == 0:
        return f"{seconds // 60} minute{'' if seconds == 60 else 's'}"
    if seconds < 60 or seconds % 6:
        return f"{seconds} seconds"
    return f"{seconds / 60:g} minutes"


def timing_model(rules: AsyncRules) -> dict[str, str]:
    """How this engine schedules play, in words, for the protocol card (kept beside the code that does it)."""
    typing = f"min(words // {rules.words_per_second:g}, {rules.max_typing_seconds}) seconds"
    if rules.scheduling == "llmafia":
        low, high = rules.call_seconds
        return {
            "scheduler": "in its own loop, again as soon as its last call returns, all players at once",
            "clock": f"virtual: a call takes {low}-{high} s, drawn from the game's seed",
            "typing": f"{typing}, by day and by night" if rules.typing else "none",
            "votes": "each voter asked when its loop comes around after voting starts; each vote posted as it "
                     f"arrives, {rules.vote_wait_seconds} s after its answer",
        }
    return {
        "scheduler": f"every {rules.tick_seconds} s of virtual time from 00:00, every player not typing asked in one "
                     "batch, the senders' messages generated in a second batch",
        "clock": f"virtual, in {rules.tick_seconds} s ticks: a call takes no time",
        "typing": f"{typing}, halved at night" if rules.typing else "none",
        "votes": ("one voter at a time, in an order drawn from the seed, each vote posted before the next voter is "
                  "asked" if rules.votes_as_cast else "all voters at once, the votes shown when all have voted"),
    }


def typing_seconds(text: str, rules: AsyncRules, phase: Phase) -> int:
    """The reference agent's delay before posting (whole words per second, capped); halved at night under the tick
    scheduling (ours), not under `llmafia` (LLMafia's)."""
    if not rules.typing:
        return 0
    delay = min(int(len(text.split()) // rules.words_per_second), rules.max_typing_seconds)
    return delay // 2 if phase == "night" and rules.scheduling == "ticks" else delay


class AsyncMafia(GameEngine):
    variant = "async"
    rules: AsyncRules

    def __init__(self, rules: AsyncRules, seed: int) -> None:
        super().__init__(rules, seed)
        self.clock = 0
        self._latency = random.Random(f"llmafia-latency:{seed}")
        self._loop_at: dict[str, int] = {}  # llmafia: when each player's loop asks next (after the chat)

    def reset(self) -> None:
        self.clock = 0
        self._latency = random.Random(f"llmafia-latency:{self.seed}")
        self._loop_at = {}
        super().reset()

    def _call(self) -> int:
        """llmafia: the virtual seconds one model call takes (seeded, its own stream: the game's draws stay put)."""
        return self._latency.randint(*self.rules.call_seconds)

    def script(self) -> Script:
        rules = self.rules
        roles = ["mafioso"] * rules.n_mafia + ["bystander"] * (rules.n_players - rules.n_mafia)
        names = self.rng.sample(rules.pool, rules.n_players) if rules.draw_names else rules.player_names
        self.seat_players(names, roles)
        self.log_setup(rules.composition)
        self.log[0].data["clock"] = clock_text(self.clock)

        for day in range(1, rules.max_days + 1):
            self.outcome.days = day
            self.emit(
                "day", day, "phase_start",
                text=f"Day {day} begins: {duration_text(rules.day_seconds)} of discussion for everyone, "
                "then a vote to lynch.",
                data={"clock": clock_text(self.clock), "seconds": rules.day_seconds},
            )  # fmt: skip
            yield from self._chat("day", day, [p.name for p in self.active()], rules.day_seconds)
            voters = [p.name for p in self.active()]
            decisions = [
                Decision(v, "vote", "day", day, tuple(n for n in voters if n != v), clock=clock_text(self.clock))
                for v in voters
            ]
            votes = yield from self._ask_votes(decisions, "day", day, PUBLIC)
            if self._eliminate(votes, "day", day):
                return

            mafia = [p.name for p in self.active(team="mafia")]
            chat = len(mafia) >= 2
            self.emit(
                "night", day, "phase_start",
                text=f"Night {day} begins: {duration_text(rules.night_seconds)}; "
                + ("only the mafia can talk, then they vote to kill." if chat else "the mafia choose whom to kill."),
                data={"clock": clock_text(self.clock), "seconds": rules.night_seconds, "mafia_chat": chat},
            )  # fmt: skip
            if chat:
                yield from self._chat("night", day, mafia, rules.night_seconds)
            else:
                self.clock += rules.night_seconds
            town = tuple(p.name for p in self.active(team="town"))
            decisions = [Decision(m, "kill", "night", day, town, clock=clock_text(self.clock)) for m in mafia]
            votes = yield from self._ask_votes(decisions, "night", day, MAFIA_TEAM)
            if self._eliminate(votes, "night", day):
                return
        self.finish(
            None, f"no winner after {rules.max_days} days", phase="end", rnd=rules.max_days, status="unfinished"
        )
        self.log[-1].data["clock"] = clock_text(self.clock)

    # -- one phase of timed chat -----------------------------------------------------------------------------------
    def _chat(self, phase: Phase, rnd: int, participants: list[str], seconds: int) -> Script:
        if self.rules.scheduling == "llmafia":
            yield from self._chat_llmafia(phase, rnd, participants, seconds)
            return
        rules = self.rules
        start, end = self.clock, self.clock + seconds
        visibility = PUBLIC if phase == "day" else MAFIA_TEAM
        kind = "message" if phase == "day" else "mafia_message"
        typing_until: dict[str, int] = {}
        queue: list[tuple[int, int, str, str, bool]] = []  # (appears at, order, speaker, text, truncated)
        order = 0
        ticks = -(-seconds // rules.tick_seconds)

        def release(now: int) -> None:
            self._release(queue, now, phase, rnd, kind, visibility)

        for tick in range(ticks):
            self.clock = start + tick * rules.tick_seconds
            release(self.clock)
            free = [p for p in participants if typing_until.get(p, -1) <= self.clock]
            if not free:
                continue
            batch = [
                Decision(p, "schedule", phase, rnd, ("send", "wait"), tick + 1, ticks, clock=clock_text(self.clock))
                for p in free
            ]
            answers = yield batch
            senders = [d.player for d in batch if self._schedule(d, answers[d.player], phase, rnd) == "send"]
            if not senders:
                continue
            gen = [Decision(s, "speak", phase, rnd, (), tick + 1, ticks, clock=clock_text(self.clock)) for s in senders]
            answers = yield gen
            for s in senders:
                answer = answers[s]
                if answer.text is None or not answer.text.strip():
                    if answer.format_failure:
                        self.emit(
                            phase, rnd, "silence", actor=s, visibility=player_visibility(s), format_failure=True,
                            random_fallback=True, text=f"{s} remained silent.", data={"clock": clock_text(self.clock)},
                        )  # fmt: skip
                    continue
                text = " ".join(answer.text.split())
                truncated = len(text) > rules.message_limit
                text = text[: rules.message_limit]
                at = self.clock + typing_seconds(text, rules, phase)
                if at >= end:
                    self.emit(
                        phase, rnd, "info", target=s, visibility=player_visibility(s),
                        text="Your message was not posted: the phase ended while you were typing.",
                        data={"clock": clock_text(self.clock), "kind": "message_dropped", "dropped_text": text},
                    )  # fmt: skip
                    continue
                typing_until[s] = at
                queue.append((at, order, s, text, truncated))
                order += 1
            release(self.clock)
        self.clock = end
        release(end - 1)  # every queued message appears before `end` by construction
        assert not queue

    def _release(self, queue: list[tuple[int, int, str, str, bool]], now: int, phase: Phase, rnd: int, kind: str,
                 visibility: str) -> None:
        """Post the queued messages whose typing has ended by `now`, in the order they appear (then in the order
        they were queued), and take them off the queue: both schedulers' one way of making a message public."""
        ready = sorted(q for q in queue if q[0] <= now)
        for item in ready:
            queue.remove(item)
            at, _, speaker, text, truncated = item
            self.emit(
                phase, rnd, kind, actor=speaker, text=text, visibility=visibility, truncated=truncated,
                data={"clock": clock_text(at)},
            )  # fmt: skip

    def _chat_llmafia(self, phase: Phase, rnd: int, participants: list[str], seconds: int) -> Script:
        """LLMafia's loops on the virtual clock: whoever's last call has returned is asked (those returning at the
        same second in one batch, from the same view); a sender's message is generated from that view and posted
        after the scheduler call, the generation call and the typing delay, unless the phase has ended by then."""
        rules = self.rules
        start, end = self.clock, self.clock + seconds
        visibility = PUBLIC if phase == "day" else MAFIA_TEAM
        kind = "message" if phase == "day" else "mafia_message"
        loop_at = dict.fromkeys(participants, start)
        queue: list[tuple[int, int, str, str, bool]] = []  # (appears at, order, speaker, text, truncated)
        order = 0

        def release(now: int) -> None:
            self._release(queue, now, phase, rnd, kind, visibility)

        while (now := min(loop_at.values())) < end:
            self.clock = now
            release(now)
            asked = [p for p in participants if loop_at[p] == now]
            batch = [Decision(p, "schedule", phase, rnd, ("send", "wait"), clock=clock_text(now)) for p in asked]
            answers = yield batch
            senders = []
            for d in batch:
                returned = now + self._call()
                if self._schedule(d, answers[d.player], phase, rnd) == "send":
                    senders.append((d.player, returned))
                else:
                    loop_at[d.player] = returned
            if not senders:
                continue
            gen = [Decision(s, "speak", phase, rnd, (), clock=clock_text(now)) for s, _ in senders]
            answers = yield gen
            for s, returned in senders:
                written = returned + self._call()
                loop_at[s] = written
                answer = answers[s]
                if answer.text is None or not answer.text.strip():
                    if answer.format_failure:
                        self.emit(
                            phase, rnd, "silence", actor=s, visibility=player_visibility(s), format_failure=True,
                            random_fallback=True, text=f"{s} remained silent.", data={"clock": clock_text(now)},
                        )  # fmt: skip
                    continue
                text = " ".join(answer.text.split())
                truncated = len(text) > rules.message_limit
                text = text[: rules.message_limit]
                at = written + typing_seconds(text, rules, phase)
                loop_at[s] = at
                if at >= end:
                    self.emit(
                        phase, rnd, "info", target=s, visibility=player_visibility(s),
                        text="Your message was not posted: the phase ended while you were typing.",
                        data={"clock": clock_text(now), "kind": "message_dropped", "dropped_text": text},
                    )  # fmt: skip
                    continue
                queue.append((at, order, s, text, truncated))
                order += 1
        release(end - 1)  # every queued message appears before `end` by construction
        assert not queue
        self.clock = end
        self._loop_at = loop_at

    def _schedule(self, decision: Decision, answer: Answer, phase: Phase, rnd: int) -> str:
        if answer.target in decision.choices and not answer.format_failure:
            return answer.target  # type: ignore[return-value]
        choice = self.rules.scheduler_fallback
        self.emit(
            phase, rnd, "schedule", actor=decision.player, visibility=player_visibility(decision.player),
            format_failure=True, random_fallback=False, text=f"Scheduler answer unusable; treated as {choice}.",
            data={"clock": clock_text(self.clock), "decision": choice},
        )  # fmt: skip
        return choice

    # -- votes and eliminations ---------------------------------------------------------------------------------------
    def _ask_votes(self, decisions: list[Decision], phase: Phase, rnd: int, visibility: str
                   ) -> Generator[Batch, Mapping[str, Answer], dict[str, str]]:
        """All voters at once, or (`votes_as_cast`) one at a time in a seeded order, each vote logged before the
        next voter is asked, so it is in their chat history; or (`llmafia`) each voter as its loop comes around."""
        if self.rules.scheduling == "llmafia":
            return (yield from self._ask_votes_llmafia(decisions, phase, rnd, visibility))
        if not self.rules.votes_as_cast:
            answers = yield decisions
            return self._votes(decisions, answers, phase, rnd, visibility)
        order = list(decisions)
        self.rng.shuffle(order)
        votes: dict[str, str] = {}
        for d in order:
            answer = yield [d]
            votes.update(self._votes([d], answer, phase, rnd, visibility))
        return votes

    def _ask_votes_llmafia(self, decisions: list[Decision], phase: Phase, rnd: int, visibility: str
                           ) -> Generator[Batch, Mapping[str, Answer], dict[str, str]]:
        """LLMafia's voting: a voter is asked when its loop comes around after voting starts (at once with those whose
        loops return then), and its vote is posted when it arrives, after the call and the pause; a voter asked
        later sees the votes posted before it. Votes arriving at the same second are posted in seat order."""
        start = self.clock
        asked_at = {d.player: max(start, self._loop_at.get(d.player, start)) for d in decisions}
        self._loop_at = {}
        posts: list[tuple[int, int, Decision, Answer]] = []  # (posted at, seat, decision, answer)
        votes: dict[str, str] = {}
        seat = {p.name: p.seat for p in self.players}

        def post(until: int | None) -> None:
            for item in sorted(p for p in posts if until is None or p[0] <= until):
                posts.remove(item)
                at, _, d, answer = item
                self.clock = at
                votes.update(self._votes([d], {d.player: answer}, phase, rnd, visibility))

        for moment in sorted(set(asked_at.values())):
            post(moment)
            self.clock = moment
            batch = [Decision(d.player, d.action, d.phase, d.round, d.choices, clock=clock_text(moment))
                     for d in decisions if asked_at[d.player] == moment]
            answers = yield batch
            for d in batch:
                posts.append((moment + self._call() + self.rules.vote_wait_seconds, seat[d.player], d,
                              answers[d.player]))
        post(None)
        return votes

    def _votes(
        self, decisions: list[Decision], answers: Mapping[str, Answer], phase: Phase, rnd: int, visibility: str
    ) -> dict[str, str]:
        resolved = []
        for d in decisions:
            target, failed, fallback = self.resolve_choice(d, answers[d.player], phase, rnd)
            resolved.append((d.player, target, failed, fallback))
        votes: dict[str, str] = {}
        for voter, target, failed, fallback in resolved:
            votes[voter] = target
            data: dict[str, object] = {"clock": clock_text(self.clock)}
            if phase == "night":
                data["kind"] = "night_proposal"
            self.emit(
                phase, rnd, "vote", actor=voter, target=target, visibility=visibility, format_failure=failed,
                random_fallback=fallback, data=data,
            )  # fmt: skip
        return votes

    def _eliminate(self, votes: dict[str, str], phase: Phase, rnd: int) -> bool:
        """Remove the plurality's target, announce name, role and mafia left; True if the game is over."""
        out, tie, counts = self.tally(votes)
        victim = self.player(out)
        victim.active = False
        left = len(self.active(team="mafia"))
        announce = f"{left} mafia player{'s' if left != 1 else ''} left."
        data = {
            "clock": clock_text(self.clock), "votes": counts, "role": victim.role, "role_revealed": True,
            "mafia_left": left,
        }  # fmt: skip
        if phase == "day":
            self.emit(
                "day", rnd, "elimination", target=out, tie_break=tie,
                text=f"{out} was lynched; they were a {victim.role}. {announce}", data=data,
            )  # fmt: skip
        else:
            killer = next(iter(votes)) if len(votes) == 1 else "mafia"
            self.emit(
                "night", rnd, "kill", actor=killer, target=out, visibility=MAFIA_TEAM, tie_break=tie,
                text=f"You killed {out}.", data={"clock": clock_text(self.clock), "votes": counts},
            )  # fmt: skip
            self.emit(
                "night", rnd, "death", target=out, tie_break=tie,
                text=f"{out} was killed during the night; they were a {victim.role}. {announce}",
                data={"cause": "night_kill", **data},
            )  # fmt: skip
        winner = self.parity_winner()
        if winner is None:
            return False
        self.outcome.tie_decided = tie
        reason = "no mafia left" if winner == "town" else "mafia reached parity"
        self.finish(winner, reason, phase="end", rnd=rnd)
        self.log[-1].data["clock"] = clock_text(self.clock)
        return True
