"""Versioned prompt templates and the memory rendering they share.

Templates are files under `prompts/<variant>/<version>/`; their hash goes into every game's provenance. The rules
text is generated from the same rules object the engine runs, so prompt and engine cannot disagree. The shared part
(rules, identity) comes first and the memory grows at the end, so a provider's prompt cache can reuse the prefix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from mafiabench.agents.base import PlayerView
from mafiabench.engine.core import Decision
from mafiabench.engine.events import Event
from mafiabench.errors import UserError

DEFAULT_PROMPT_VERSION = {"mini-mafia": "v4.1", "classic": "v1"}


@dataclass(frozen=True)
class PromptSet:
    variant: str
    version: str
    templates: dict[str, str]
    sha256: str

    @property
    def ident(self) -> str:
        return f"{self.variant}/{self.version}"

    def provenance(self) -> dict[str, Any]:
        return {"version": self.ident, "sha256": self.sha256}


@cache
def load_prompts(variant: str, version: str | None = None) -> PromptSet:
    version = version or DEFAULT_PROMPT_VERSION.get(variant, "")
    root = resources.files("mafiabench.agents") / "prompts" / variant / version
    if not root.is_dir():
        raise UserError(f"no prompt templates for variant {variant!r} version {version!r} (looked in {root})")
    templates: dict[str, str] = {}
    h = hashlib.sha256()
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".txt"):
            text = entry.read_text(encoding="utf-8")
            templates[entry.name.removesuffix(".txt")] = text
            h.update(entry.name.encode() + b"\0" + text.encode() + b"\0")
    return PromptSet(variant, version, templates, h.hexdigest())


def join_names(names: list[str] | tuple[str, ...]) -> str:
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def composition_text(comp: dict[str, int]) -> str:
    parts = []
    for role in ("detective", "mafioso", "villager", "doctor"):
        n = comp.get(role, 0)
        if n:
            plural = {"mafioso": "mafiosos", "villager": "villagers", "detective": "detectives", "doctor": "doctors"}
            parts.append(f"{n} {role if n == 1 else plural[role]}")
    return ", ".join(parts)


def memory_lines(view: PlayerView, *, reasoning_keep: int | None = None, since_seq: int = 0) -> list[str]:
    """The player's own chronological memory, in the line shapes of the Mini-Mafia reference transcripts."""
    lines: list[str] = []
    events = [e for e in view.events if e.seq >= since_seq or e.type == "role_assigned"]
    reasoning = [e for e in events if e.type == "belief" and e.text]
    keep = {e.seq for e in (reasoning[-reasoning_keep:] if reasoning_keep else reasoning)}
    i = 0
    while i < len(events):
        e = events[i]
        if e.type == "vote" and e.visibility == "public":
            group = []
            while i < len(events) and events[i].type == "vote" and events[i].visibility == "public":
                group.append(events[i])
                i += 1
            lines.append("Votes: " + ", ".join(_vote_text(v, view.name) for v in group))
            continue
        line = _line(e, view, keep)
        if line:
            lines.append(line)
        i += 1
    return lines


def _who(name: str | None, me: str) -> str:
    return "You" if name == me else (name or "?")


def _vote_text(e: Event, me: str) -> str:
    text = f"{_who(e.actor, me)} voted for {e.target}"
    if e.random_fallback:
        text += " (the vote was cast randomly because of a failed format)"
    return text


def _line(e: Event, view: PlayerView, keep_reasoning: set[int]) -> str | None:
    me = view.name
    t = e.type
    if t == "role_assigned":
        line = f"You're {me}, the {e.data.get('role')}."
        mates = e.data.get("teammates")
        if mates:
            line += f" Your fellow mafia: {join_names(mates)}."
        return line
    if t in ("phase_start", "death", "info", "investigate", "kill"):
        return e.text
    if t == "message":
        return f'{_who(e.actor, me)}: "{e.text}{"..." if e.truncated else ""}"'
    if t == "silence":
        return f"{_who(e.actor, me)}: remained silent."
    if t == "vote":  # mafia-only night proposals
        return f"{_who(e.actor, me)} proposed to kill {e.target}."
    if t == "elimination":
        return e.text
    if t == "belief" and e.seq in keep_reasoning:
        return f"Your reasoning: {e.text}"
    return None


def render(template: str, **values: object) -> str:
    try:
        return Template(template).substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:  # a template names a value we do not provide: a bug in a template file
        raise UserError(f"prompt template uses unknown placeholder {exc}") from exc


def decision_values(decision: Decision) -> dict[str, object]:
    return {
        "round": decision.round,
        "step": decision.step,
        "steps": decision.steps,
        "choices": ", ".join(decision.choices),
    }
