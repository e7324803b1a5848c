"""Cleansed transcripts: what the detector may read of a game truncated after day `cut` — what the players saw in the
daytime, as "Hidden in Plain Text" (§III.D) gave its detector.

Kept, day by day under a day header: the morning announcement of each night death (who was found dead, never their
role), the day's public messages and votes, and who was voted out (role redacted). Dropped: the setup and role
assignments, night chat and night votes, investigations, beliefs, scheduler and private events, game end. A night
victim is announced on the morning that follows their night: night d of a game that starts at night (the human
games), night d - 1 of one that starts by day (ours), so a game that ends on a night kill has a last cut holding
only that morning's announcement. The same function serves simulated and imported games: it reads events only. The
lines' words are the detector prompt version's (`transcript.toml`, a `DetectorPrompt.words`), hashed with its
question.

The players are listed in a shuffle seeded by game and cut (`listed_players`), never in seat order: an imported
dataset's seats may carry its roles (the Dallinger export creates the mafia's nodes first, so the raw order put a
mafioso first in every human game). The listed order is the `players` a transcript keeps and lands; `seats` keeps
the record's order for the offline detectors, whose draws are seeded and so carry no role either way.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from string import Template

from mafiabench.engine.core import derive_seed
from mafiabench.engine.events import PUBLIC, Event

KEPT_TYPES = ("message", "vote", "elimination")
NIGHT_DEATH = "death"
# How the transcript's header lists the players; hashed into every detector prompt's sha256 (a change re-asks).
LISTING = "players listed in a shuffle seeded by game and cut"


@dataclass(frozen=True)
class Transcript:
    game_id: str
    cut: int
    players: tuple[str, ...]  # as the detector reads them: `listed_players`
    k: int
    lines: tuple[str, ...]
    votes: tuple[tuple[str, str], ...]  # (voter, target) of the kept day votes, for the scripted detector
    seats: tuple[str, ...] = ()  # the record's seat order (the offline detectors' seeded draws start from it)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def listed_players(game_id: str, cut: int, players: Sequence[str]) -> tuple[str, ...]:
    """The players in the order a transcript lists them: a shuffle seeded by game and cut, so no position carries a
    role whatever order the source stored them in, and the same transcript is listed the same way every time."""
    order = list(players)
    random.Random(derive_seed("listed players", game_id, cut)).shuffle(order)
    return tuple(order)


def starts_at_night(events: Iterable[Event]) -> bool:
    """Whether the game's first played phase is a night (the Dallinger human games) rather than a day."""
    return next((e.phase == "night" for e in events if e.phase in ("day", "night")), False)


def morning_of(e: Event, night_first: bool) -> int:
    """The day whose morning announces a death of night `e.round`."""
    return e.round if night_first else e.round + 1


def is_night_death(e: Event) -> bool:
    return e.phase == "night" and e.type == NIGHT_DEATH and e.visibility == PUBLIC and e.target is not None


def kept(e: Event, cut: int) -> bool:
    return e.phase == "day" and e.round <= cut and e.visibility == PUBLIC and e.type in KEPT_TYPES


def day_numbers(events: Sequence[Event]) -> list[int]:
    """The days a game has a public day record for (its possible cuts), ascending: days with day events and the
    mornings that announce a night death."""
    night_first = starts_at_night(events)
    days = {e.round for e in events if e.phase == "day" and e.visibility == PUBLIC and e.type in KEPT_TYPES}
    days |= {morning_of(e, night_first) for e in events if is_night_death(e)}
    return sorted(days)


def cleanse(
    game_id: str, events: Sequence[Event], players: Sequence[str], k: int, cut: int, words: Mapping[str, str]
) -> Transcript:
    ordered = sorted(events, key=lambda e: e.seq)
    night_first = starts_at_night(ordered)
    by_day: dict[int, list[str]] = {}
    votes: list[tuple[str, str]] = []
    for e in ordered:
        stamp = _fill(words["stamp"], clock=e.data["clock"]) if e.data.get("clock") else ""
        if is_night_death(e):
            day = morning_of(e, night_first)
            if day <= cut:
                by_day.setdefault(day, []).append(_fill(words["death"], stamp=stamp, target=e.target))
            continue
        if not kept(e, cut):
            continue
        lines = by_day.setdefault(e.round, [])
        if e.type == "message":
            lines.append(_fill(words["message"], stamp=stamp, actor=e.actor, text=" ".join((e.text or "").split())))
        elif e.type == "vote":
            lines.append(_fill(words["vote"], stamp=stamp, actor=e.actor, target=e.target))
            if e.actor and e.target:
                votes.append((e.actor, e.target))
        elif e.type == "elimination":
            lines.append(_fill(words["elimination"], stamp=stamp, target=e.target))
    out: list[str] = []
    for day in sorted(by_day):
        out.append(_fill(words["day"], day=day))
        out += by_day[day]
    return Transcript(game_id, cut, listed_players(game_id, cut, players), k, tuple(out), tuple(votes),
                      tuple(players))


def _fill(template: str, **values: object) -> str:
    return Template(template).substitute({k: str(v) for k, v in values.items()})
