"""What an agent sees and returns. Agents are callables over a player's view; the engine never sees them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel

from mafiabench.engine.core import Answer, Decision
from mafiabench.engine.events import Event
from mafiabench.record import ModelCall


@dataclass(frozen=True)
class PlayerView:
    """A player's memory (the events visible to it) plus the game's public facts.

    `truth_roles` is ground truth, handed only to scripted *oracle* policies (e.g. mafia-votes-detective, used for
    analytic baselines); the LLM agent never reads it.
    """

    name: str
    role: str
    team: str
    variant: str
    rules: BaseModel
    players: tuple[str, ...]
    events: tuple[Event, ...]
    truth_roles: dict[str, str] = field(default_factory=dict)

    def active_players(self) -> list[str]:
        gone = {e.target for e in self.events if e.type in ("death", "elimination")}
        return [p for p in self.players if p not in gone]


@dataclass
class AgentTurn:
    answer: Answer
    calls: list[ModelCall] = field(default_factory=list)


class Agent(Protocol):
    spec: str
    model: str

    async def act(self, decision: Decision, view: PlayerView) -> AgentTurn: ...
