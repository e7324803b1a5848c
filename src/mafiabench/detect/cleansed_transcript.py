"""Cleansed transcripts: what the detector may read of a game truncated after day `cut`.

Kept: day-phase, public events of the kinds `message`, `vote` and `elimination`, of days 1..cut. Redacted: the role
revealed with an elimination (the line says only who was voted out). Dropped: everything else — the setup and role
assignments, night chat and night votes, night deaths, investigations, beliefs, scheduler and private events, phase
announcements, game end. The same function serves simulated and imported games: it reads events only. The lines'
words are the detector prompt version's (`transcript.toml`, a `DetectorPrompt.words`), hashed with its question.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from string import Template

from mafiabench.engine.events import PUBLIC, Event

KEPT_TYPES = ("message", "vote", "elimination")


@dataclass(frozen=True)
class Transcript:
    game_id: str
    cut: int
    players: tuple[str, ...]
    k: int
    lines: tuple[str, ...]
    votes: tuple[tuple[str, str], ...]  # (voter, target) of the kept day votes, for the scripted detector

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def day_numbers(events: Iterable[Event]) -> list[int]:
    """The days a game has a public day record for (its possible cuts), ascending."""
    return sorted({e.round for e in events if e.phase == "day" and e.visibility == PUBLIC and e.type in KEPT_TYPES})


def kept(e: Event, cut: int) -> bool:
    return e.phase == "day" and e.round <= cut and e.visibility == PUBLIC and e.type in KEPT_TYPES


def cleanse(
    game_id: str, events: Sequence[Event], players: Sequence[str], k: int, cut: int, words: Mapping[str, str]
) -> Transcript:
    lines: list[str] = []
    votes: list[tuple[str, str]] = []
    day = 0
    for e in sorted(events, key=lambda e: e.seq):
        if not kept(e, cut):
            continue
        if e.round != day:
            day = e.round
            lines.append(_fill(words["day"], day=day))
        stamp = _fill(words["stamp"], clock=e.data["clock"]) if e.data.get("clock") else ""
        if e.type == "message":
            lines.append(_fill(words["message"], stamp=stamp, actor=e.actor, text=" ".join((e.text or "").split())))
        elif e.type == "vote":
            lines.append(_fill(words["vote"], stamp=stamp, actor=e.actor, target=e.target))
            if e.actor and e.target:
                votes.append((e.actor, e.target))
        elif e.type == "elimination":
            lines.append(_fill(words["elimination"], stamp=stamp, target=e.target))
    return Transcript(game_id, cut, tuple(players), k, tuple(lines), tuple(votes))


def _fill(template: str, **values: object) -> str:
    return Template(template).substitute({k: str(v) for k, v in values.items()})
