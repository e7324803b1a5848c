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
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
class Protocol:
    name: str
    title: str
    repository: str
    commit: str
    aspects: tuple[Aspect, ...]


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
        protocol = Protocol(name, str(data["title"]), str(data["repository"]), str(data["commit"]), aspects)
    except KeyError as exc:
        raise UserError(f"{where}: missing field {exc}") from None
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
    return Card(protocol, experiment, tuple(rows))


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
