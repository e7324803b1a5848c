"""Versioned prompt templates and the memory rendering they share.

Every word a model is shown lives in files under `prompts/<variant>/<version>/`: `*.txt` templates; a
`fragments.toml` of named pieces (the ones the agent picks from the rules object the engine runs, so prompt and engine
cannot disagree, and the small words code joins: "and", plurals, durations, the re-prompt); a `memory.toml` with one
template per event the player may read (the engine logs structured events; their narration text is the record's, and
no model reads it); and `version.toml` (how this version renders and parses). All of them are hashed into every
game's provenance, so `prompt_sha256` changes whenever a word a model reads changes. Code only chooses among these
pieces and fills in game data: names, roles, numbers, clock readings and the players' own words. A third source is
the user's own copy of a reference `batch_config.json` (`PromptSet.from_batch_config`), played with the memory lines
of `BATCH_CONFIG_WORDS`; it is never shipped with mafiabench. The shared part (rules, identity) comes first and the
memory grows at the end, so a provider's prompt cache can reuse it.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template
from typing import Any, Literal

from mafiabench.agents.agent import PlayerView
from mafiabench.engine.core import Decision
from mafiabench.engine.events import Event
from mafiabench.errors import UserError

DEFAULT_PROMPT_VERSION = {"mini-mafia": "v4.1-full", "classic": "v3", "async": "v1"}

Parser = Literal["tolerant", "reference"]
Style = Literal["ours", "reference"]
# The reference's Python-format templates in a batch_config.json, and the placeholders each may use.
BATCH_TEMPLATE_KEYS = ("base_prompt", "discussion_suffix", "voting_suffix", "night_action_suffix")
# The shipped version whose memory lines and fragments a batch_config's templates are played with (the reference's).
BATCH_CONFIG_WORDS = ("mini-mafia", "v4.1-full")


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
    memory: dict[str, str] = field(default_factory=dict)
    style: Style = "ours"
    parser: Parser = "tolerant"
    options: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    templates_sha256: str | None = None

    @property
    def ident(self) -> str:
        return f"{self.variant}/{self.version}"

    def provenance(self) -> dict[str, Any]:
        """What a record says about its prompt: `sha256` covers every word a model could be shown (every file of the
        version; for a batch_config, its templates and the shipped version lending the memory lines);
        `templates_sha256` the templates alone (the hash the Mini-Mafia batch importer records, so games played from
        a user's batch_config match the imported ones)."""
        out: dict[str, Any] = {"version": self.ident, "sha256": self.sha256}
        if self.source:
            out["source"] = self.source
        out["templates_sha256"] = self.templates_sha256 or self.sha256
        return out

    @classmethod
    def from_batch_config(cls, path: str | Path, variant: str = "mini-mafia") -> PromptSet:
        """The reference templates from the user's own copy of a published `batch_config.json`.

        Only what the file holds is used: `prompt_config.templates` (base prompt + three suffixes) and
        `prompt_config.version`. Its `templates_sha256` is over the canonical JSON of `templates`, the same hash the
        batch importer records for games played with that file, so simulated and imported games of one template set
        match. The words the file does not hold (memory lines, plurals) are those of `BATCH_CONFIG_WORDS`, whose
        hash joins the templates' in `sha256`.
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
    words = load_prompts(*BATCH_CONFIG_WORDS)
    templates_sha256 = hashlib.sha256(canonical).hexdigest()
    return PromptSet(
        variant,
        f"batch-config-{version}",
        {k: templates[k] for k in BATCH_TEMPLATE_KEYS},
        hashlib.sha256(f"{templates_sha256}\0{words.ident}\0{words.sha256}".encode()).hexdigest(),
        fragments=words.fragments,
        memory=words.memory,
        style="reference",
        parser="reference",
        options={"others_order": "shuffled", "composition_order": "reference"},
        source=Path(path).name,
        templates_sha256=templates_sha256,
    )


@cache
def load_prompts(variant: str, version: str | None = None) -> PromptSet:
    """A shipped version (`prompts/<variant>/<version>/`; the variant's default when no version is given)."""
    version = version or DEFAULT_PROMPT_VERSION.get(variant, "")
    root = resources.files("mafiabench.agents") / "prompts" / variant / version
    if not root.is_dir():
        raise UserError(f"no prompt templates for variant {variant!r} version {version!r} (looked in {root})")
    return read_prompt_folder(root, variant, version)


def read_prompt_folder(root: Traversable, variant: str, version: str) -> PromptSet:
    """One version's folder: every `*.txt` and `*.toml` file is read and hashed (name and bytes, in name order)."""
    templates: dict[str, str] = {}
    meta: dict[str, Any] = {}
    fragments: dict[str, str] = {}
    memory: dict[str, str] = {}
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
        elif entry.name == "memory.toml":
            memory = {k: str(v) for k, v in tomllib.loads(text).items()}
        elif entry.name.endswith(".txt"):
            templates[entry.name.removesuffix(".txt")] = text
    options = dict(meta.get("options", {}))
    return PromptSet(
        variant,
        version,
        templates,
        h.hexdigest(),
        fragments=fragments,
        memory=memory,
        parser=meta.get("parser", "tolerant"),
        options=options,
    )


def resolve_prompts(variant: str, version: str | None = None, batch_config: str | None = None) -> PromptSet:
    """The prompt a game plays with: the user's batch_config.json when given, else a shipped version."""
    if batch_config:
        return PromptSet.from_batch_config(batch_config, variant)
    return load_prompts(variant, version)


def join_names(names: list[str] | tuple[str, ...], prompts: PromptSet) -> str:
    """"A, B and C", the "and" from the version's fragments."""
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + f" {prompts.fragments['and']} " + names[-1]


COMPOSITION_ORDER = {
    "ours": ("detective", "mafioso", "villager", "bystander", "doctor"),
    "reference": ("mafioso", "detective", "villager", "bystander", "doctor"),  # the reference lists mafioso first
}


def composition_text(comp: dict[str, int], prompts: PromptSet, order: str = "ours") -> str:
    """"1 detective, 1 mafioso, 2 villagers": a role's name is game data, its plural the version's `plural_<role>`."""
    parts = []
    for role in COMPOSITION_ORDER[order]:
        n = comp.get(role, 0)
        if n:
            parts.append(f"{n} {role if n == 1 else prompts.fragments[f'plural_{role}']}")
    return ", ".join(parts)


def duration_text(seconds: int, prompts: PromptSet) -> str:
    """`2.5 minutes`, `1 minute`, `20 seconds`: a phase's length in the version's words."""
    f = prompts.fragments
    if seconds % 60 == 0:
        return render(f["minute"] if seconds == 60 else f["minutes"], n=seconds // 60)
    if seconds < 60 or seconds % 6:
        return render(f["seconds"], n=seconds)
    return render(f["minutes"], n=f"{seconds / 60:g}")


def memory_lines(
    view: PlayerView, prompts: PromptSet, *, reasoning_keep: int | None = None, since_seq: int = 0
) -> list[str]:
    """The player's own chronological memory: each event rendered by the version's `memory.toml` (in the line
    shapes of the Mini-Mafia reference transcripts). Only players' own words (messages, reasoning) and names come
    from the event; the engine's narration text is the record's, never the model's."""
    m = prompts.memory
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
            lines.append(render(m["votes"], votes=", ".join(_vote_text(v, view.name, prompts) for v in group)))
            continue
        line = _line(e, view, keep, prompts)
        if line:
            lines.append(line)
        i += 1
    return lines


def _who(name: str | None, me: str, prompts: PromptSet) -> str:
    return prompts.memory["you"] if name == me else (name or "?")


def _vote_text(e: Event, me: str, prompts: PromptSet) -> str:
    m = prompts.memory
    return render(m["vote"], who=_who(e.actor, me, prompts), target=e.target,
                  fallback=m["vote_fallback"] if e.random_fallback else "")


def _with_mates(line: str, e: Event, prompts: PromptSet) -> str:
    mates = e.data.get("teammates")
    return line + render(prompts.memory["fellow_mafia"], names=join_names(mates, prompts)) if mates else line


def _line(e: Event, view: PlayerView, keep_reasoning: set[int], prompts: PromptSet) -> str | None:
    m = prompts.memory
    me = view.name
    t = e.type
    if t == "role_assigned":
        return _with_mates(render(m["role_assigned"], name=me, role=e.data.get("role")), e, prompts)
    if t == "phase_start":
        return render(m[f"{e.phase}_start"], round=e.round)
    if t == "kill":
        if e.actor in (me, None):
            return render(m["kill"], target=e.target)
        # Every mafioso reads the kill, but only the one who decided it did it (the reference's line for the others).
        if e.actor == "mafia":
            return render(m["kill_by_mafia"], target=e.target)
        return render(m["kill_by_member"], actor=e.actor, target=e.target)
    if t == "death":
        return render(m["death"], target=e.target)
    if t == "investigate":
        role = str(e.data.get("result"))
        phrase = m.get(f"role_phrase_{role}") or render(m["role_phrase"], role=role)
        return render(m["investigate"], target=e.target, role_phrase=phrase)
    if t == "info":
        return render(m[f"info_{e.data['kind']}"], target=e.target) if f"info_{e.data.get('kind')}" in m else None
    if t == "message":
        return render(m["message"], who=_who(e.actor, me, prompts), text=e.text, cut=m["cut"] if e.truncated else "")
    if t == "silence":
        return render(m["silence"], who=_who(e.actor, me, prompts))
    if t == "vote":  # mafia-only night proposals
        return render(m["night_proposal"], who=_who(e.actor, me, prompts), target=e.target)
    if t == "elimination":
        key = "elimination_revealed" if e.data.get("role_revealed") else "elimination"
        return render(m[key], target=e.target, role=e.data.get("role"))
    if t == "belief" and e.seq in keep_reasoning:
        return render(m["reasoning"], text=e.text)
    if t == "statement_label" and "own_label" in m:
        return label_line(e, prompts)
    return None


def label_line(e: Event, prompts: PromptSet) -> str:
    """A player's own statement label, in its memory (only under `[statements] memory = true`; the words are the
    version's `statements/memory.toml`, merged into the game's memory lines then)."""
    m = prompts.memory
    confidence = e.data.get("confidence")
    values = {
        "speaker": e.target,
        "verdict": m["deceptive"] if e.data.get("is_deceptive") else m["not_deceptive"],
        "confidence": m["no_confidence"] if confidence is None else f"{float(confidence):g}",
    }
    return render(m["own_label" if e.target == e.actor else "peer_label"], **values)


def chat_lines(view: PlayerView, prompts: PromptSet) -> list[str]:
    """The asynchronous variant's memory in the reference tool's chat shape (`[HH:MM:SS] Name: text`, the
    Game-Manager announcing phases, votes and eliminations), rendered by the version's `memory.toml`. Private
    bookkeeping (scheduler fallbacks, flagged silences) is not shown; a message dropped because the phase ended is
    told to its author."""
    m = prompts.memory
    lines: list[str] = []
    for e in view.events:
        clock = e.data.get("clock", "00:00:00")
        said: str | None = None
        if e.type == "role_assigned":
            lines.append(_with_mates(render(m["role_assigned"], name=view.name, role=e.data.get("role")), e, prompts))
        elif e.type in ("message", "mafia_message"):
            lines.append(render(m["message"], clock=clock, actor=e.actor, text=e.text))
        elif e.type == "vote":
            said = render(m["vote"], actor=e.actor, target=e.target)
        elif e.type == "phase_start":
            length = duration_text(int(e.data["seconds"]), prompts)
            key = "day_start" if e.phase == "day" else "night_start_chat" if e.data.get("mafia_chat") else "night_start"
            said = render(m[key], round=e.round, length=length)
        elif e.type in ("elimination", "death"):
            left = int(e.data["mafia_left"])
            said = render(m["lynched" if e.type == "elimination" else "killed_at_night"], target=e.target,
                          role=e.data.get("role"), mafia_left=render(m["mafia_left_one" if left == 1 else "mafia_left"],
                                                                     n=left))
        elif e.type == "info" and e.data.get("kind") == "message_dropped":
            said = m["message_dropped"]
        elif e.type == "statement_label" and "own_label" in m:
            lines.append(label_line(e, prompts))
        if said is not None:
            lines.append(render(m["manager"], clock=clock, text=said))
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
