"""Reference protocols and the protocol card: how an experiment departs from the study it claims to replicate.

A reference protocol is data, one TOML file per protocol in this folder (`mini-mafia-v4.1.toml`): every aspect that
changes a number (prompt information, rules and what the engine enforces, token caps, parsing, candidate order,
reasoning settings, models, statistics), each with the reference's value and where that value is written in the
reference (file and section). An experiment names one with `reference = "<name>"`; the study package describes the
experiment as plain facts (`mafiabench.study.protocol.experiment_facts`), and `card` compares the two aspect by aspect.
`mafiabench preview` prints the card before anything is spent, the run lands it (`raw_protocol_cards`) and the
dashboards show it from `mart_protocol_cards`.

To add a protocol: write `<name>.toml` here (copy `mini-mafia-v4.1.toml`). Each `[[aspect]]` has `key` (unique),
`group`, `label`, `value` (the reference's), `source`, and either `path` (where the experiment's value is found in the
facts, a list of keys) or `compare = "note"` (shown, never compared: what the reference does that no setting of ours
changes, such as its statistics). `compare = "set"` compares lists as sets (model lists); `compare = "one_of"`
accepts any value of a list (prompt versions that carry the same information). `when_absent = "skip"` leaves an
aspect uncompared when the experiment has no value there (a model's settings, for a model it does not play). If the
facts lack what your aspect needs, add it to `experiment_facts`. `tests/test_protocol_card.py` checks every shipped
protocol; an experiment names one with `reference = "<name>"`.

What the models read is checked word by word, never by version name. Each `[[information]]` is one item the
published prompts give (`label`, `source`), with the words of ours that carry it per prompt version
(`ours."<variant>/<version>"`, phrases of the version's files, `$placeholders` kept); each `[[addition]]` is one
thing a version says that the published prompts do not (`version`, `key`, `label`, `ours`), a deviation unless no
player of the experiment reads it (`unread_when = { path = [...], value = ... }`); `[versions."<ident>"]` says which
files of a version are read (`read`, `skip_fragments`: words code joins to game data) or that it is the reference's
own words (`own_words = true`). The card takes the version's words (`experiment_facts`: every template and
fragment), finds each item's phrases in them and takes every phrase out: a line left over is a sentence no published
item and no listed addition carries, and a deviation. A version the protocol has no word map for is one deviation.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from mafiabench.errors import UserError

Compare = Literal["equal", "set", "one_of", "note"]
COMPARES: tuple[Compare, ...] = ("equal", "set", "one_of", "note")
ABSENT = "(not set)"
# A setting the reference does not send (TOML has no null): a reference value "not sent" equals an experiment's None.
NOT_SENT = "not sent"
NOT_PLAYED = "not compared: the experiment does not play this model (see the model rows)"


@dataclass(frozen=True)
class Aspect:
    key: str
    group: str
    label: str
    value: Any
    source: str
    path: tuple[str, ...] = ()
    compare: Compare = "equal"
    note: str = ""
    absent_skips: bool = False  # an experiment without this value (a model it does not play) is not compared here


@dataclass(frozen=True)
class Information:
    """One item of the published prompts, and the words of ours that carry it, per prompt version."""

    key: str
    label: str
    source: str
    ours: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Addition:
    """Something a prompt version says that the published prompts do not."""

    version: str
    key: str
    label: str
    ours: tuple[str, ...]
    unread_path: tuple[str, ...] = ()
    unread_value: Any = None


@dataclass(frozen=True)
class VersionWords:
    """Which of a version's files the models read as prompt words (`read`), the fragments that are words code
    joins to game data (`skip_fragments`, globs), or that it is the reference's own words (`own_words`)."""

    read: tuple[str, ...] = ("templates", "fragments")
    skip_fragments: tuple[str, ...] = ()
    own_words: bool = False


@dataclass(frozen=True)
class Protocol:
    name: str
    title: str
    repository: str
    commit: str
    aspects: tuple[Aspect, ...]
    information: tuple[Information, ...] = ()
    additions: tuple[Addition, ...] = ()
    versions: Mapping[str, VersionWords] = field(default_factory=dict)


LIFECYCLE = "model lifecycle"  # the group of a card's rows that warn of a deprecated or retired model


@dataclass(frozen=True)
class CardRow:
    """One aspect of the card. `matches` is None for a note (shown, not compared)."""

    key: str
    group: str
    label: str
    reference_value: Any
    experiment_value: Any
    matches: bool | None
    source: str
    note: str


@dataclass(frozen=True)
class Card:
    protocol: Protocol
    experiment: str
    rows: tuple[CardRow, ...]

    @property
    def deviations(self) -> list[CardRow]:
        return [r for r in self.rows if r.matches is False]

    @property
    def matches(self) -> list[CardRow]:
        return [r for r in self.rows if r.matches]

    @property
    def notes(self) -> list[CardRow]:
        return [r for r in self.rows if r.matches is None]


def available() -> list[str]:
    """The shipped protocols' names."""
    root = resources.files("mafiabench.protocols")
    return sorted(e.name.removesuffix(".toml") for e in root.iterdir() if e.name.endswith(".toml"))


@cache
def load_protocol(name: str) -> Protocol:
    """A shipped protocol by name; a `UserError` naming the known ones when there is none."""
    names = available()
    if name not in names:
        raise UserError(f"unknown reference protocol {name!r}; known: {', '.join(names) or 'none'}")
    where = f"src/mafiabench/protocols/{name}.toml"
    data = tomllib.loads((resources.files("mafiabench.protocols") / f"{name}.toml").read_text(encoding="utf-8"))
    try:
        aspects = tuple(_aspect(a, where) for a in data["aspect"])
        information = tuple(
            Information(str(i["key"]), str(i["label"]), str(i["source"]),
                        {str(v): tuple(map(str, ps)) for v, ps in i.get("ours", {}).items()})
            for i in data.get("information", ()))
        additions = tuple(
            Addition(str(a["version"]), str(a["key"]), str(a["label"]), tuple(map(str, a["ours"])),
                     tuple(map(str, a.get("unread_when", {}).get("path", ()))), a.get("unread_when", {}).get("value"))
            for a in data.get("addition", ()))
        versions = {str(v): VersionWords(tuple(w.get("read", ("templates", "fragments"))),
                                         tuple(w.get("skip_fragments", ())), bool(w.get("own_words", False)))
                    for v, w in data.get("versions", {}).items()}
        protocol = Protocol(name, str(data["title"]), str(data["repository"]), str(data["commit"]), aspects,
                            information, additions, versions)
    except KeyError as exc:
        raise UserError(f"{where}: missing field {exc}") from None
    for kind, items in (("information", information), ("addition", additions)):
        seen = [(getattr(i, "version", ""), i.key) for i in items]
        if len(set(seen)) != len(seen):
            raise UserError(f"{where}: {kind} keys must be unique; repeated: "
                            f"{sorted({k for _, k in seen if seen.count((_, k)) > 1})}")
    keys = [a.key for a in protocol.aspects]
    if len(set(keys)) != len(keys):
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        raise UserError(f"{where}: aspect keys must be unique; repeated: {repeated}")
    return protocol


def _aspect(a: Mapping[str, Any], where: str) -> Aspect:
    compare = a.get("compare", "equal")
    if compare not in COMPARES:
        raise UserError(f"{where}: aspect {a.get('key')!r}: compare must be one of {COMPARES}, got {compare!r}")
    path = tuple(str(p) for p in a.get("path", ()))
    if compare != "note" and not path:
        raise UserError(f"{where}: aspect {a.get('key')!r} has no path (give one, or compare = \"note\")")
    return Aspect(str(a["key"]), str(a["group"]), str(a["label"]), a["value"], str(a["source"]), path, compare,
                  str(a.get("note", "")), a.get("when_absent", "compare") == "skip")


def lookup(facts: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at `path` in nested mappings, or `ABSENT`."""
    value: Any = facts
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return ABSENT
        value = value[key]
    return value


def same(reference: Any, ours: Any, compare: Compare) -> bool:
    if compare == "one_of" and isinstance(reference, list):
        return any(_canonical(r) == _canonical(ours) for r in reference)
    if compare == "set" and isinstance(reference, list) and isinstance(ours, list | tuple):
        return sorted(map(_canonical, reference)) == sorted(map(_canonical, ours))
    return _canonical(reference) == _canonical(ours)


def _canonical(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    if value is None:
        value = NOT_SENT
    return json.dumps(value, sort_keys=True, default=str)


def card(protocol: Protocol, experiment: str, facts: Mapping[str, Any]) -> Card:
    rows = []
    for a in protocol.aspects:
        if a.compare == "note":
            ours = lookup(facts, a.path) if a.path else ABSENT
            rows.append(CardRow(a.key, a.group, a.label, a.value, ours, None, a.source, a.note))
            continue
        ours = lookup(facts, a.path)
        if ours == ABSENT and a.absent_skips:
            rows.append(CardRow(a.key, a.group, a.label, a.value, ours, None, a.source, a.note or NOT_PLAYED))
            continue
        rows.append(CardRow(a.key, a.group, a.label, a.value, ours, same(a.value, ours, a.compare), a.source, a.note))
    rows += word_rows(protocol, facts)
    return Card(protocol, experiment, tuple(rows))


PROMPT_GROUP = "prompt information"
ADDED_GROUP = "added by our version"
NOT_PUBLISHED = "(not in the published protocol)"


def version_words(w: VersionWords, prompt: Mapping[str, Any]) -> str:
    """The words of a version the models read (`experiment_facts`' `prompt.templates` and `prompt.fragments`)."""
    parts: list[str] = []
    if "templates" in w.read:
        parts += [str(t) for t in dict(prompt.get("templates", {})).values()]
    if "fragments" in w.read:
        parts += [str(t) for k, t in dict(prompt.get("fragments", {})).items()
                  if not any(fnmatch.fnmatch(k, g) for g in w.skip_fragments)]
    return "\n".join(parts)


def leftover_lines(text: str, phrases: Sequence[str]) -> list[str]:
    """The lines of `text` left once every phrase is taken out, but headings, bullets, labels and placeholders."""
    for phrase in sorted(set(phrases), key=len, reverse=True):
        text = text.replace(phrase, "")
    out = []
    for line in text.splitlines():
        line = re.sub(r"\$\{?\w+\}?", "", line).strip()
        line = re.sub(r"^#?[A-Z ]+:?$", "", line)  # section headings
        line = re.sub(r"^(?:-|\d\.)\s*(?:[A-Z][a-z]+:)?", "", line).strip()  # bullets and their labels
        if re.search(r"[A-Za-z]{2}", line):
            out.append(line)
    return out


def word_rows(protocol: Protocol, facts: Mapping[str, Any]) -> list[CardRow]:
    """The card's rows for what the models read: each published item carried (or not) by the version's words,
    each addition of the version, each sentence no item or addition carries."""
    if not protocol.information:
        return []
    prompt = facts.get("prompt", {})
    ident = str(prompt.get("version", ABSENT))
    w = protocol.versions.get(ident)
    if w is None:
        known = ", ".join(protocol.versions) or "none"
        return [CardRow("prompt.words", PROMPT_GROUP, "The prompt's words, item by item",
                        f"{len(protocol.information)} published items", f"{ident}: no word map",
                        False, "this protocol's [[information]]",
                        f"the card cannot check {ident}'s words (word maps: {known}); add them to the protocol file")]
    if w.own_words:
        return [CardRow(f"information.{i.key}", PROMPT_GROUP, i.label, "in the prompt",
                        "the reference's own words", True, i.source, "") for i in protocol.information]
    text = version_words(w, prompt)
    rows: list[CardRow] = []
    used: list[str] = []
    for i in protocol.information:
        phrases = i.ours.get(ident, ())
        used += phrases
        missing = [p for p in phrases if p not in text]
        ours: Any = list(phrases) if phrases and not missing else (
            "not carried" if not phrases else "missing: " + " · ".join(missing))
        rows.append(CardRow(f"information.{i.key}", PROMPT_GROUP, i.label, "in the prompt", ours,
                            bool(phrases) and not missing, i.source, ""))
    for a in protocol.additions:
        if a.version != ident:
            continue
        used += a.ours
        unread = bool(a.unread_path) and _canonical(lookup(facts, a.unread_path)) == _canonical(a.unread_value)
        note = f"no player of this experiment reads it ({'.'.join(a.unread_path)} = {show(a.unread_value)})" \
            if unread else ""
        rows.append(CardRow(f"added.{a.key}", ADDED_GROUP, a.label, NOT_PUBLISHED, list(a.ours),
                            None if unread else False, f"{ident} (ours)", note))
    for n, line in enumerate(leftover_lines(text, used), 1):
        rows.append(CardRow(f"added.unlisted.{n}", ADDED_GROUP, "Words no published item or listed addition carries",
                            NOT_PUBLISHED, line, False, f"{ident} (ours)",
                            "list it in the protocol file: as the words of a published item, or as an addition"))
    return rows


def show(value: Any) -> str:
    """A value as the card prints it: strings bare, lists joined, others as JSON."""
    if isinstance(value, str) and value != NOT_SENT:
        return value
    if isinstance(value, list | tuple):
        return ", ".join(show(v) for v in value) or "(none)"
    if value is None or value == NOT_SENT:
        return "not sent (the provider's default)"
    return json.dumps(value, sort_keys=True)


def render_text(c: Card) -> str:
    """The card as `preview` prints it: every deviation, with the reference's value and its source, then a count."""
    p = c.protocol
    lines = [f"Protocol card: {p.title} ({p.name}; {p.repository} at {p.commit})"]
    deviations = c.deviations
    if deviations:
        lines.append(f"  {len(deviations)} deviation(s) from the reference:")
        for r in deviations:
            lines.append(f"  ✗ [{r.group}] {r.label}")
            lines.append(f"      reference:  {show(r.reference_value)}   ({r.source})")
            lines.append(f"      experiment: {show(r.experiment_value)}")
            if r.note:
                lines.append(f"      note: {r.note}")
    else:
        lines.append("  no deviation from the reference")
    for r in c.rows:
        if r.group == LIFECYCLE:
            lines.append(f"  ⚠ {r.label}: {show(r.experiment_value)}; {r.note} ({r.source})")
    lines.append(f"  matches the reference in {len(c.matches)} of {len(c.matches) + len(deviations)} aspects; "
                 f"{len(c.notes)} noted, not compared (the full card: dashboards, or mart_protocol_cards)")
    return "\n".join(lines)


def rows_for_warehouse(c: Card) -> list[dict[str, Any]]:
    """The card as `raw_protocol_cards` rows (values as JSON text)."""
    return [
        {
            "experiment": c.experiment, "protocol": c.protocol.name, "protocol_title": c.protocol.title,
            "repository": c.protocol.repository, "reference_commit": c.protocol.commit, "aspect": r.key,
            "aspect_group": r.group, "label": r.label, "reference_value": _canonical(r.reference_value),
            "experiment_value": _canonical(r.experiment_value), "matches": r.matches, "source": r.source,
            "note": r.note, "position": i,
        }
        for i, r in enumerate(c.rows)
    ]
