"""A person plays one seat from the terminal (`human/terminal`) against model or scripted players.

The person sees exactly what an LLM agent would: their own memory, then the question. Input is read in a thread
so the other seats' calls keep running. An invalid answer is asked again (three tries), then treated like a model's
format failure, so human games are scored by the same rules.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from mafiabench.agents.base import AgentTurn, PlayerView
from mafiabench.agents.prompts import memory_lines
from mafiabench.engine.core import Answer, Decision

TRIES = 3


class HumanAgent:
    def __init__(
        self, spec: str = "human/terminal", *, read: Callable[[str], str] = input, out: TextIO | None = None
    ) -> None:
        self.spec = spec
        self.model = spec
        self.read = read
        self.out = out or sys.stdout
        self._shown = 0

    async def act(self, decision: Decision, view: PlayerView) -> AgentTurn:
        lines = memory_lines(view)
        if self._shown == 0:
            print(f"\n=== You are {view.name}, the {view.role}. Players: {', '.join(view.players)} ===", file=self.out)
        for line in lines[self._shown :]:
            print(f"  {line}", file=self.out)
        self._shown = len(lines)
        if decision.action == "speak":
            question = f"[{view.name}] Day {decision.round}, round {decision.step}/{decision.steps}. Your message " \
                "(empty = stay silent): "
            text = (await asyncio.to_thread(self.read, question)).strip()
            return AgentTurn(Answer(text=text or None))
        verb = {"vote": "Vote to eliminate", "kill": "Choose whom to kill", "investigate": "Choose whom to investigate"}
        options = ", ".join(f"{i}) {c}" for i, c in enumerate(decision.choices, 1))
        for _ in range(TRIES):
            raw = (await asyncio.to_thread(self.read, f"[{view.name}] {verb[decision.action]}: {options}\n> ")).strip()
            target = _pick(raw, decision.choices)
            if target is not None:
                if decision.mode == "belief":
                    return AgentTurn(Answer(belief={c: float(c == target) for c in decision.choices}))
                return AgentTurn(Answer(target=target))
            print(f"  '{raw}' is not one of the choices.", file=self.out)
        return AgentTurn(Answer(target=None, format_failure=True))


def _pick(raw: str, choices: tuple[str, ...]) -> str | None:
    if raw.isdigit() and 1 <= int(raw) <= len(choices):
        return choices[int(raw) - 1]
    for c in choices:
        if c.lower() == raw.lower():
            return c
    return None
