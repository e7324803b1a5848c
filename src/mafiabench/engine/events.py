"""The event log: the one source of truth about a game.

A player's memory is derived from the log by visibility; the engine keeps no second copy. Events serialise to plain
dicts with a fixed key order so that a record is byte-for-byte reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Phase = Literal["setup", "night", "day", "end"]

EVENT_TYPES = (
    "game_start",
    "role_assigned",
    "phase_start",
    "kill",
    "death",
    "info",
    "investigate",
    "mafia_message",
    "message",
    "silence",
    "schedule",
    "vote",
    "belief",
    "elimination",
    "no_elimination",
    "game_end",
)

PUBLIC = "public"
MAFIA_TEAM = "team:mafia"


def player_visibility(name: str) -> str:
    return f"player:{name}"


@dataclass(frozen=True, init=False)
class Event:
    """One thing that happened. `data` holds type-specific details (investigation result, tally, clock, ...).

    Immutable like any frozen dataclass, but built by a hand-written `__init__` that fills the instance dict at
    once: a frozen dataclass's generated one sets each field through `object.__setattr__`, twice as slow, and a
    scripted game makes twenty events (at thousands of games a second, that is a tenth of the engine's time)."""

    seq: int
    phase: Phase
    round: int
    type: str
    actor: str | None = None
    target: str | None = None
    text: str | None = None
    visibility: str = PUBLIC
    format_failure: bool = False
    random_fallback: bool = False
    truncated: bool = False
    tie_break: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        seq: int,
        phase: Phase,
        round: int,
        type: str,
        actor: str | None = None,
        target: str | None = None,
        text: str | None = None,
        visibility: str = PUBLIC,
        format_failure: bool = False,
        random_fallback: bool = False,
        truncated: bool = False,
        tie_break: bool = False,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.__dict__.update(
            seq=seq,
            phase=phase,
            round=round,
            type=type,
            actor=actor,
            target=target,
            text=text,
            visibility=visibility,
            format_failure=format_failure,
            random_fallback=random_fallback,
            truncated=truncated,
            tie_break=tie_break,
            data={} if data is None else data,
        )

    def visible_to(self, name: str, team: str) -> bool:
        if self.visibility == PUBLIC:
            return True
        if self.visibility == MAFIA_TEAM:
            return team == "mafia"
        return self.visibility == player_visibility(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "phase": self.phase,
            "round": self.round,
            "type": self.type,
            "actor": self.actor,
            "target": self.target,
            "text": self.text,
            "visibility": self.visibility,
            "format_failure": self.format_failure,
            "random_fallback": self.random_fallback,
            "truncated": self.truncated,
            "tie_break": self.tie_break,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls(
            seq=d["seq"],
            phase=d["phase"],
            round=d["round"],
            type=d["type"],
            actor=d.get("actor"),
            target=d.get("target"),
            text=d.get("text"),
            visibility=d.get("visibility", PUBLIC),
            format_failure=bool(d.get("format_failure", False)),
            random_fallback=bool(d.get("random_fallback", False)),
            truncated=bool(d.get("truncated", False)),
            tie_break=bool(d.get("tie_break", False)),
            data=dict(d.get("data") or {}),
        )
