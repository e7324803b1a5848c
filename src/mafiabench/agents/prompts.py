"""Versioned prompt templates and the memory rendering they share.

Every word a model is shown lives in files under `prompts/<variant>/<version>/`: `*.txt` templates and, where the
text depends on the rules, a `fragments.toml` of named pieces the agent picks from the rules object the engine runs
(so prompt and engine cannot disagree), plus `version.toml` (how this version renders and parses). All of them are
hashed into every game's provenance. A third source is the user's own copy of a reference `batch_config.json`
(`PromptSet.from_batch_config`): its templates are hashed the same way and never shipped with mafiabench. The shared
part (rules, identity) comes first and the memory grows at the end, so a provider's prompt cache can reuse it.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Literal

from mafiabench.agents.agent import PlayerView
from mafiabench.engine.core import Decision
from mafiabench.engine.events import Event
from mafiabench.errors import UserError

DEFAULT_PROMPT_VERSION = {"mini-mafia": "v4.1-full", "classic": "v2", "async": "v1"}

Parser = Literal["tolerant", "reference"]
Style = Literal["ours", "reference"]
# The reference's Python-format templates in a batch_config.json, and the placeholders each may use.
BATCH_TEMPLATE_KEYS = ("base_prompt", "discussion_suffix", "voting_suffix", "night_action_suffix")


@dataclass(frozen=True)
class PromptSet:
    """One prompt version. `style` says how templates are filled (`ours`: `$name` templates + fragments;
    `reference`: the batch_config's `{name}` templates); `parser` how answers are read (`reference`: exactly as the
    Mini-Mafia reference reads them; `tolerant`: the first versions' lenient reading); `options` further rendering
    choices from `version.toml`. `sha256` covers every file of the version (or the whole batch_config prompt)."""

    variant: str
    version: str
    templates: dict[str, str]
    sha256: str
    fragments: dict[str, str] = field(default_factory=dict)
    style: Style = "ours"
    parser: Parser = "tolerant"
    options: dict[str, Any] = field(default_factory=dict)
    source: str | None = None

    @property
    def ident(self) -> str:
        return f"{self.variant}/{self.version}"

    def provenance(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.ident, "sha256": self.sha256}
        if self.source:
            out["source"] = self.source
        return out

    @classmethod
    def from_batch_config(cls, path: str | Path, variant: str = "mini-mafia") -> PromptSet:
        """The reference templates from the user's own copy of a published `batch_config.json`.

        Only what the file holds is used: `prompt_config.templates` (base prompt + three suffixes) and
        `prompt_config.version`. The hash is over the canonical JSON of `templates`, the same hash the batch importer
        records for games played with that file, so simulated and imported games of one template set match.
        """
        return _batch_config_prompts(str(Path(path).expanduser().resolve()), variant)


@cache
def _batch_config_prompts(path: str, variant: str) -> PromptSet:
    if variant != "mini-mafia":
        raise UserError(f"{path}: prompt.from_batch_config is for variant 'mini-mafia', not {variant!r}")
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: prompt.from_batch_config: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: prompt.from_batch_config: not a readable JSON file ({exc})") from None
    pc = raw.get("prompt_config") if isinstance(raw, dict) else None
    if not isinstance(pc, dict):
        raise UserError(f"{path}: field 'prompt_config' is missing or not an object")
    templates = pc.get("templates")
    if not isinstance(templates, dict):
        raise UserError(f"{path}: field 'prompt_config.templates' is missing or not an object")
    for key in BATCH_TEMPLATE_KEYS:
        value = templates.get(key)
        if not isinstance(value, str) or not value.strip():
            raise UserError(f"{path}: field 'prompt_config.templates.{key}' is missing or empty (got {value!r})")
    for field_name in ("{memory}", "{action_specific_content}"):
        if field_name not in templates["base_prompt"]:
            raise UserError(f"{path}: field 'prompt_config.templates.base_prompt' has no {field_name} placeholder")
    canonical = json.dumps(templates, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    version = str(pc.get("version") or "unknown")
    return PromptSet(
        variant,
        f"batch-config-{version}",
        {k: templates[k] for k in BATCH_TEMPLATE_KEYS},
        hashlib.sha256(canonical).hexdigest(),
        style="reference",
        parser="reference",
        options={"others_order": "shuffled", "composition_order": "reference"},
        source=Path(path).name,
    )


@cache
def load_prompts(variant: str, version: str | None = None) -> PromptSet:
    version = version or DEFAULT_PROMPT_VERSION.get(variant, "")
    root = resources.files("mafiabench.agents") / "prompts" / variant / version
    if not root.is_dir():
        raise UserError(f"no prompt templates for variant {variant!r} version {version!r} (looked in {root})")
    templates: dict[str, str] = {}
    meta: dict[str, Any] = {}
    fragments: dict[str, str] = {}
    h = hashlib.sha256()
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith((".txt", ".toml")):
            continue
        text = entry.read_text(encoding="utf-8")
        h.update(entry.name.encode() + b"\0" + text.encode() + b"\0")
        if entry.name == "version.toml":
            meta = tomllib.loads(text)
        elif entry.name == "fragments.toml":
            fragments = {k: str(v) for k, v in tomllib.loads(text).items()}
        elif entry.name.endswith(".txt"):
            templates[entry.name.removesuffix(".txt")] = text
    options = dict(meta.get("options", {}))
    return PromptSet(
        variant,
        version,
        templates,
        h.hexdigest(),
        fragments=fragments,
        parser=meta.get("parser", "tolerant"),
        options=options,
    )


def resolve_prompts(variant: str, version: str | None = None, batch_config: str | None = None) -> PromptSet:
    """The prompt a game plays with: the user's batch_config.json when given, else a shipped version."""
    if batch_config:
        return PromptSet.from_batch_config(batch_config, variant)
    return load_prompts(variant, version)


def join_names(names: list[str] | tuple[str, ...]) -> str:
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def composition_text(comp: dict[str, int], order: str = "ours") -> str:
    """"1 detective, 1 mafioso, 2 villagers"; `order="reference"` lists roles as the reference does (mafioso first)."""
    parts = []
    roles = ("mafioso", "detective", "villager", "bystander", "doctor") if order == "reference" else (
        "detective", "mafioso", "villager", "bystander", "doctor")
    for role in roles:
        n = comp.get(role, 0)
        if n:
            plural = {"mafioso": "mafiosos", "villager": "villagers", "detective": "detectives", "doctor": "doctors",
                      "bystander": "bystanders"}
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
    if t == "kill" and e.actor not in (me, None):
        # Every mafioso reads the kill, but only the one who decided it did it (the reference's line for the others).
        return f"The mafia killed {e.target}" if e.actor == "mafia" else f"The Mafia member {e.actor} killed {e.target}"
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


MANAGER = "Game-Manager"


def chat_lines(view: PlayerView) -> list[str]:
    """The asynchronous variant's memory in the reference tool's chat shape: `[HH:MM:SS] Name: text`, with the
    Game-Manager announcing phases, votes and eliminations. Private bookkeeping (scheduler fallbacks, flagged
    silences) is not shown; a message dropped because the phase ended is told to its author."""
    lines: list[str] = []
    for e in view.events:
        stamp = f"[{e.data.get('clock', '00:00:00')}]"
        if e.type == "role_assigned":
            line = f"You are {view.name}, a {e.data.get('role')}."
            mates = e.data.get("teammates")
            if mates:
                line += f" Your fellow mafia: {join_names(mates)}."
            lines.append(line)
        elif e.type in ("message", "mafia_message"):
            lines.append(f"{stamp} {e.actor}: {e.text}")
        elif e.type == "vote":
            lines.append(f"{stamp} {MANAGER}: {e.actor} voted for {e.target}")
        elif e.type in ("phase_start", "elimination", "death", "no_elimination") or (
            e.type == "info" and e.data.get("kind") == "message_dropped"
        ):
            lines.append(f"{stamp} {MANAGER}: {e.text}")
    return lines


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
