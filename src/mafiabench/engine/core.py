"""Variant-independent machinery: players, decisions, answers, seeding and the step driver.

Each variant writes its rules as a generator that yields *batches* of decisions (everyone who must act now) and
receives the answers. Batching is what lets the runner make simultaneous calls concurrently (votes, the async
variant's schedulers). The engine is pure: no I/O, no clock, no model SDK; every random choice comes from the
game's own `random.Random(seed)`, so the same seed and the same answers give the same log.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mafiabench.engine.events import MAFIA_TEAM, PUBLIC, Event, Phase, player_visibility

ROLE_TEAM: dict[str, str] = {
    "mafioso": "mafia",
    "detective": "town",
    "villager": "town",
    "bystander": "town",
    "doctor": "town",
}

Action = Literal["speak", "vote", "kill", "investigate", "schedule"]
DecisionMode = Literal["name", "belief"]


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts (experiment, cell, game index): stable across machines and Python versions."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


@dataclass
class Player:
    name: str
    seat: int
    role: str
    active: bool = True

    @property
    def team(self) -> str:
        return ROLE_TEAM[self.role]

    def to_dict(self) -> dict[str, Any]:
        return {"seat": self.seat, "name": self.name, "role": self.role, "team": self.team}


@dataclass(frozen=True, init=False)
class Decision:
    """A request for one player to act, with the valid choices (empty for `speak`; `send`/`wait` for the async
    variant's `schedule`).

    `step`/`steps` place the decision within its phase (discussion round r of R) for the prompt; `clock` is the
    virtual time (`HH:MM:SS`) of the async variant's decisions.
    """

    player: str
    action: Action
    phase: Phase
    round: int
    choices: tuple[str, ...] = ()
    step: int = 1
    steps: int = 1
    mode: DecisionMode = "name"
    clock: str | None = None

    def __init__(
        self,
        player: str,
        action: Action,
        phase: Phase,
        round: int,
        choices: tuple[str, ...] = (),
        step: int = 1,
        steps: int = 1,
        mode: DecisionMode = "name",
        clock: str | None = None,
    ) -> None:
        # Filled at once, as `Event` is: a frozen dataclass's generated `__init__` sets each field through
        # `object.__setattr__`, twice as slow, and a policy game makes ten decisions and ten answers.
        self.__dict__.update(
            player=player, action=action, phase=phase, round=round, choices=choices, step=step, steps=steps,
            mode=mode, clock=clock,
        )


@dataclass(frozen=True, init=False)
class Answer:
    """An agent's answer after parsing.

    For `speak`: `text` (None = silence; with `format_failure` it is flagged as a fallback).
    For choices: `target` (None or invalid = format failure, the engine draws a uniform fallback from the game's
    seed) or, in belief mode, `belief` (a distribution the engine samples or takes the argmax of).
    """

    text: str | None = None
    target: str | None = None
    belief: Mapping[str, float] | None = None
    format_failure: bool = False
    reasoning: str | None = None
    truncated: bool = False  # the agent's message was cut before the engine saw it (an unclosed quote)
    mafia_probability: Mapping[str, float] | None = None

    def __init__(
        self,
        text: str | None = None,
        target: str | None = None,
        belief: Mapping[str, float] | None = None,
        format_failure: bool = False,
        reasoning: str | None = None,
        truncated: bool = False,
        mafia_probability: Mapping[str, float] | None = None,
    ) -> None:
        self.__dict__.update(
            text=text, target=target, belief=belief, format_failure=format_failure, reasoning=reasoning,
            truncated=truncated, mafia_probability=mafia_probability,
        )


Batch = list[Decision]
Script = Generator[Batch, Mapping[str, Answer], None]


@dataclass
class Outcome:
    status: Literal["finished", "unfinished", "failed", "abandoned", "running"] = "running"
    winner: str | None = None
    reason: str | None = None
    tie_decided: bool = False
    days: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "winner": self.winner,
            "reason": self.reason,
            "tie_decided": self.tie_decided,
            "days": self.days,
        }


class GameEngine:
    """Drives a variant's rule script. Use: `reset()`, then while not `done`: `pending()` → answers → `step()`."""

    variant: str = ""

    def __init__(self, rules: Any, seed: int) -> None:
        self.rules = rules
        self.seed = seed
        self.rng = random.Random(seed)
        self._fresh_seed: int | None = seed  # `rng` is at the start of this seed's sequence
        self.players: list[Player] = []
        self.log: list[Event] = []
        self.outcome = Outcome()
        self._script: Script | None = None
        self._pending: Batch = []

    # -- driver -------------------------------------------------------------------------------------------------
    def reset(self) -> None:
        if self._fresh_seed != self.seed:  # seeding costs 5 us: a fresh engine's generator is used as it is
            self.rng = random.Random(self.seed)
        self._fresh_seed = None
        self.players = []
        self.log = []
        self.outcome = Outcome()
        self._script = self.script()
        self._advance(None)

    @property
    def done(self) -> bool:
        return self.outcome.status != "running"

    def pending(self) -> Batch:
        return list(self._pending)

    def step(self, answers: Mapping[str, Answer]) -> None:
        if self.done:
            raise RuntimeError("the game is over")
        missing = [d.player for d in self._pending if d.player not in answers]
        if missing:
            raise ValueError(f"answers missing for {missing}")
        self._advance(answers)

    def _advance(self, answers: Mapping[str, Answer] | None) -> None:
        assert self._script is not None
        try:
            batch = self._script.send(answers) if answers is not None else next(self._script)
        except StopIteration:
            self._pending = []
            if self.outcome.status == "running":
                raise RuntimeError("rule script ended without an outcome") from None
            return
        if not batch:
            raise RuntimeError("rule script yielded an empty batch")
        self._pending = batch

    def script(self) -> Script:
        raise NotImplementedError

    # -- helpers for rule scripts ---------------------------------------------------------------------------------
    def player(self, name: str) -> Player:
        for p in self.players:
            if p.name == name:
                return p
        raise KeyError(name)

    def active(self, *, role: str | None = None, team: str | None = None) -> list[Player]:
        return [
            p
            for p in self.players
            if p.active and (role is None or p.role == role) and (team is None or p.team == team)
        ]

    def emit(self, phase: Phase, rnd: int, type_: str, **kw: Any) -> Event:
        event = Event(seq=len(self.log), phase=phase, round=rnd, type=type_, **kw)
        self.log.append(event)
        return event

    def seat_players(self, names: Sequence[str], roles: Sequence[str]) -> None:
        """Shuffle names into seats and roles onto seats, both from the game's seed, and log them."""
        names = list(names)
        roles = list(roles)
        self.rng.shuffle(names)
        self.rng.shuffle(roles)
        self.players = [Player(name=n, seat=i, role=r) for i, (n, r) in enumerate(zip(names, roles, strict=True))]

    def log_setup(self, composition: Mapping[str, int]) -> None:
        self.emit(
            "setup",
            0,
            "game_start",
            data={
                "variant": self.variant,
                "players": [p.name for p in self.players],
                "composition": dict(composition),
            },
        )
        mafia = [p.name for p in self.players if p.team == "mafia"]
        for p in self.players:
            data: dict[str, Any] = {"role": p.role, "team": p.team}
            if p.team == "mafia":
                data["teammates"] = [m for m in mafia if m != p.name]
            self.emit("setup", 0, "role_assigned", actor=p.name, visibility=player_visibility(p.name), data=data)

    def resolve_choice(
        self, decision: Decision, answer: Answer, phase: Phase, rnd: int
    ) -> tuple[str, bool, bool]:
        """The target an answer picks: (target, format_failure, random_fallback).

        Belief answers are stored as a `belief` event and sampled (or argmaxed) here, with the game's rng.
        """
        choices = list(decision.choices)
        if decision.mode == "belief":
            dist, failed = normalise_belief(answer.belief, choices)
            failed = failed or answer.format_failure
            data: dict[str, Any] = {"action": decision.action, "probability": dist}
            if answer.mafia_probability is not None:
                data["mafia_probability"] = suspicion(answer.mafia_probability, choices)
            self.emit(
                phase,
                rnd,
                "belief",
                actor=decision.player,
                visibility=player_visibility(decision.player),
                format_failure=failed,
                random_fallback=failed,
                text=answer.reasoning,
                data=data,
            )
            sampling = getattr(self.rules, "sampling", "sample")
            if sampling == "argmax":
                best = max(dist.values())
                target = next(c for c in choices if dist[c] == best)
            else:
                target = self.rng.choices(choices, weights=[dist[c] for c in choices], k=1)[0]
            return target, failed, failed
        if answer.target in choices and not answer.format_failure:
            return answer.target, False, False  # type: ignore[return-value]
        return self.rng.choice(choices), True, True

    def tally(self, votes: Mapping[str, str]) -> tuple[str, bool, dict[str, int]]:
        """Plurality with a uniform random tie-break: (eliminated, tie_break_used, counts)."""
        counts = Counter(votes.values())
        top = max(counts.values())
        tied = sorted(name for name, c in counts.items() if c == top)
        order = [p.name for p in self.players]
        tied.sort(key=order.index)
        if len(tied) == 1:
            return tied[0], False, dict(counts)
        return self.rng.choice(tied), True, dict(counts)

    def view(self, name: str) -> list[Event]:
        """The events a player has seen: its memory, derived from the log by visibility."""
        p = self.player(name)
        return [e for e in self.log if e.visible_to(name, p.team)]

    def finish(self, winner: str | None, reason: str, *, phase: Phase, rnd: int, status: str = "finished") -> None:
        self.outcome.status = status  # type: ignore[assignment]
        self.outcome.winner = winner
        self.outcome.reason = reason
        self.emit(
            "end",
            rnd,
            "game_end",
            data={
                "winner": winner,
                "reason": reason,
                "status": status,
                "tie_decided": self.outcome.tie_decided,
                "roles": {p.name: p.role for p in self.players},
            },
        )

    def parity_winner(self) -> str | None:
        """Town wins when no mafioso is active; mafia when active mafia are at least as many as active town."""
        mafia = len(self.active(team="mafia"))
        town = len(self.active(team="town"))
        if mafia == 0:
            return "town"
        if mafia >= town:
            return "mafia"
        return None

    # -- rule steps shared by the variants ---------------------------------------------------------------------------
    def kill(
        self,
        killer: str,
        victim: str,
        rnd: int,
        *,
        format_failure: bool = False,
        random_fallback: bool = False,
        tie_break: bool = False,
    ) -> None:
        self.player(victim).active = False
        self.emit(
            "night",
            rnd,
            "kill",
            actor=killer,
            target=victim,
            visibility="team:mafia",
            format_failure=format_failure,
            random_fallback=random_fallback,
            tie_break=tie_break,
            text=f"You killed {victim}.",
        )
        self.emit("night", rnd, "death", target=victim, text=f"{victim} was found dead.", data={"cause": "night_kill"})

    def investigate(
        self,
        detective: str,
        target: str,
        rnd: int,
        *,
        scripted: bool = False,
        format_failure: bool = False,
        random_fallback: bool = False,
    ) -> None:
        role = self.player(target).role
        article = "the" if role in ("mafioso", "detective") else "a"
        self.emit(
            "night",
            rnd,
            "investigate",
            actor=detective,
            target=target,
            visibility=player_visibility(detective),
            format_failure=format_failure,
            random_fallback=random_fallback,
            text=f"You investigated {target} and discovered that they are {article} {role}.",
            data={"result": role, "scripted": scripted},
        )

    def apply_message(self, speaker: str, answer: Answer, rnd: int, limit: int | None, **data: object) -> None:
        """A message event, or a silence. `limit`: cut a longer message there (flagged truncated); None: keep it
        whole (flagged only when the agent's answer was already cut, an unclosed quote)."""
        if answer.text is None or (answer.format_failure and not answer.text):
            self.emit(
                "day",
                rnd,
                "silence",
                actor=speaker,
                visibility=PUBLIC,
                format_failure=answer.format_failure,
                random_fallback=answer.format_failure,
                text=f"{speaker} remained silent.",
                data=dict(data),
            )
            return
        text = answer.text
        truncated = answer.truncated or (limit is not None and len(text) > limit)
        if limit is not None:
            text = text[:limit]
        self.emit(
            "day",
            rnd,
            "message",
            actor=speaker,
            text=text,
            truncated=truncated,
            data=dict(data),
        )

    def apply_votes(
        self, decisions: list[Decision], answers: Mapping[str, Answer], phase: Phase, rnd: int
    ) -> dict[str, str]:
        """Resolve every vote first, then log them together: votes are revealed only once everyone has voted."""
        resolved: list[tuple[Decision, str, bool, bool]] = []
        for d in decisions:
            target, failed, fallback = self.resolve_choice(d, answers[d.player], phase, rnd)
            resolved.append((d, target, failed, fallback))
        votes: dict[str, str] = {}
        for d, target, failed, fallback in resolved:
            votes[d.player] = target
            self.emit(
                phase,
                rnd,
                "vote",
                actor=d.player,
                target=target,
                format_failure=failed,
                random_fallback=fallback,
            )
        return votes


def normalise_belief(belief: Mapping[str, float] | None, choices: Sequence[str]) -> tuple[dict[str, float], bool]:
    """Restrict a distribution to the valid choices and normalise it; uniform (and flagged) if nothing is left."""
    if belief:
        weights = {c: max(0.0, float(belief.get(c, 0.0))) for c in choices}
        total = sum(weights.values())
        if total > 0:
            return {c: round(w / total, 12) for c, w in weights.items()}, False
    n = len(choices)
    return {c: 1.0 / n for c in choices}, True


def suspicion(p_mafia: Mapping[str, float], choices: Sequence[str]) -> dict[str, float | None]:
    """P(player is mafia) for each valid choice, each clipped to [0, 1] on its own (they need not sum to 1: they
    sum to the number of mafia the agent expects among them); None for a player the answer did not rate."""
    out: dict[str, float | None] = {}
    for c in choices:
        value = p_mafia.get(c)
        out[c] = None if value is None else min(1.0, max(0.0, float(value)))
    return out


def team_visibility(team: str) -> str:
    return MAFIA_TEAM if team == "mafia" else PUBLIC
