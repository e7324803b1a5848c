"""Scripted policies (no model): they make the pipeline runnable offline and reproduce the analytic baselines.

Spec strings: `policy/random`, `policy/informed`, `policy/mafia-votes-detective`, `policy/mafia-votes-villager`,
`policy/always-accuse:<name>`.
Every random choice comes from a generator seeded by the game seed and the player's name.
"""

from __future__ import annotations

import random

from mafiabench.agents.agent import AgentTurn, PlayerView
from mafiabench.engine.core import Answer, Decision, derive_seed
from mafiabench.errors import UserError

_SILENT = Answer(text=None)  # answers are frozen: the silent policies share one

POLICIES = ("random", "informed", "mafia-votes-detective", "mafia-votes-villager", "always-accuse")


class PolicyAgent:
    """`random`: uniform among valid choices, silent. `informed`: votes a mafioso it knows of from its own
    investigations, by elimination too (when every other candidate was found innocent, the one left is the
    mafioso: with three players alive, an "innocent" result names the mafioso), else random.
    `mafia-votes-detective` / `mafia-votes-villager`: as a mafioso, votes the detective / a villager (uniformly
    among the villagers it may vote for; oracle policies: they read the true roles), else like informed.
    `always-accuse:<name>`: says and votes <name> when valid.
    In the async variant the silent policies always answer `wait`; always-accuse posts now and then."""

    def __init__(self, spec: str, seed: int, player: str) -> None:
        self.spec = spec
        self.model = spec
        name = spec.split("/", 1)[1]
        self.policy, _, self.arg = name.partition(":")
        if self.policy not in POLICIES:
            raise UserError(f"unknown scripted policy {name!r} in {spec!r}; known: {', '.join(POLICIES)}")
        if self.policy == "always-accuse" and not self.arg:
            raise UserError(f"{spec!r}: always-accuse needs a target, e.g. policy/always-accuse:Bob")
        self._seed = (seed, player)
        self._rng: random.Random | None = None
        # Only these read the player's memory (their investigations); the others are handed an empty one, which
        # spares building it for every decision of a policy game.
        self.reads_events = self.policy in ("informed", "mafia-votes-detective", "mafia-votes-villager")

    @property
    def rng(self) -> random.Random:
        """Made at the first random choice: seeding costs ~10 us, and a player killed before acting never needs
        one (a fourth of the policies of a Mini-Mafia game)."""
        if self._rng is None:
            seed, player = self._seed
            self._rng = random.Random(derive_seed(seed, "policy", player))
        return self._rng

    async def act(self, decision: Decision, view: PlayerView) -> AgentTurn:
        return AgentTurn(self.decide(decision, view))

    def decide(self, decision: Decision, view: PlayerView) -> Answer:
        if decision.action == "schedule":  # async variant: only always-accuse has something to say
            if self.policy == "always-accuse":
                return Answer(target="send" if self.rng.random() < 0.2 else "wait")
            return Answer(target="wait")
        if decision.action == "speak":
            if self.policy == "always-accuse":
                return Answer(text=f"I think {self.arg} is the mafioso.")
            return _SILENT
        choices = decision.choices
        preferred = self._preferred(decision, view)
        target = preferred if preferred in choices else self.rng.choice(choices)
        if decision.mode == "belief":
            return Answer(belief={c: (1.0 if c == target else 0.0) for c in choices})
        return Answer(target=target)

    def _preferred(self, decision: Decision, view: PlayerView) -> str | None:
        if self.policy == "always-accuse":
            return self.arg
        if self.policy == "random":
            return None
        if decision.action in ("kill", "investigate"):
            return None
        if self.policy == "mafia-votes-detective" and view.team == "mafia":
            return next((n for n, r in view.truth_roles.items() if r == "detective"), None)
        if self.policy == "mafia-votes-villager" and view.team == "mafia":
            villagers = [c for c in decision.choices if view.truth_roles.get(c) == "villager"]
            return self.rng.choice(villagers) if villagers else None
        if view.team != "town":
            return None
        results = [(e.target, e.data.get("result")) for e in view.events if e.type == "investigate"]
        known = [t for t, r in results if r == "mafioso"]
        if known:
            return known[-1]
        innocent = {t for t, r in results if r is not None and r != "mafioso"}
        unknown = [c for c in decision.choices if c not in innocent]
        # A game still running has a mafioso among the others: if one candidate is not cleared, it is the one.
        return unknown[0] if len(unknown) == 1 and len(decision.choices) > 1 else None
