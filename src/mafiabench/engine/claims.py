"""The claims a public message makes that the game itself can check: "I am the detective", "Bob is the mafioso",
"Carol is not mafia". The truth of each is the game's (the players' true roles), so a statement's label can be set
beside what the speaker knew and what was so.

A claim names a player (the speaker, for "I am ..."), what is said of them (a role, or a team) and whether it is
negated. English only, plain sentence shapes: `<name> is [not] [the|a|an] <word>`, `I am|I'm [not] [...] <word>`,
with an optional certainty adverb ("Bob is definitely the mafioso"). A clause that opens with "if", "whether" or
"unless" claims nothing; one that opens with a hedge ("I think", "maybe", "probably") is kept, flagged `hedged` (an
honest wrong guess is not a lie, so the marts count unhedged claims as the checkable ones). Anything else (questions,
"might be", pronouns) is not read: the absence of a claim is never evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mafiabench.engine.core import ROLE_TEAM

Said = Literal["role", "team"]

# Words a claim may use, and what each says of a player: a role (villager and bystander are one: the plain town
# role of each variant) or a team.
CLAIM_WORDS: dict[str, tuple[Said, str]] = {
    "mafioso": ("role", "mafioso"),
    "mafiosi": ("role", "mafioso"),
    "detective": ("role", "detective"),
    "cop": ("role", "detective"),
    "villager": ("role", "villager"),
    "bystander": ("role", "villager"),
    "doctor": ("role", "doctor"),
    "mafia": ("team", "mafia"),
    "killer": ("team", "mafia"),
    "town": ("team", "town"),
    "townie": ("team", "town"),
    "innocent": ("team", "town"),
}
_PLAIN_TOWN = {"villager", "bystander"}
_CERTAIN = ("definitely", "clearly", "certainly", "obviously", "surely", "really", "actually", "indeed", "just",
            "absolutely", "100%")
_HEDGED = ("probably", "likely", "maybe", "possibly", "perhaps")
_ADVERB = r"(?:(?P<adverb>" + "|".join(re.escape(w) for w in _CERTAIN + _HEDGED) + r")\s+)?"
_ARTICLE = r"(?:(?:with|on)\s+)?(?:(?:the|a|an|one|part)\s+)?(?:(?:of\s+the|member\s+of\s+the)\s+)?"
_WORD = "(" + "|".join(sorted(CLAIM_WORDS, key=len, reverse=True)) + ")"
_CONDITIONAL = re.compile(r"\b(?:if|whether|unless|suppose|supposing|what if)\b", re.IGNORECASE)
_HEDGE = re.compile(
    r"\b(?:think|thinks|believe|believes|suspect|suspects|guess|feel|feels|maybe|perhaps|probably|likely|might|"
    r"could|seems?|bet|wonder)\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[.!?;\n]+|,\s*(?:but|and|so)\s+")


@dataclass(frozen=True)
class Claim:
    """`player` is (or is not, `negated`) `value`, a role or a team (`said`); `hedged`: the clause opened with a
    hedge. `text`: the words matched, as written."""

    player: str
    said: Said
    value: str
    negated: bool = False
    hedged: bool = False
    text: str = ""

    def holds(self, roles: Mapping[str, str]) -> bool | None:
        """Whether the claim is true of the game (None: the player is not in it)."""
        role = roles.get(self.player)
        if role is None:
            return None
        if self.said == "team":
            actual = ROLE_TEAM.get(role, "town") == self.value
        else:
            actual = ("villager" if role in _PLAIN_TOWN else role) == self.value
        return actual != self.negated

    def to_dict(self) -> dict[str, Any]:
        return {"player": self.player, "said": self.said, "value": self.value, "negated": self.negated,
                "hedged": self.hedged, "text": self.text}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Claim:
        return cls(str(d["player"]), d["said"], str(d["value"]), bool(d.get("negated")), bool(d.get("hedged")),
                   str(d.get("text", "")))


def _name_pattern(players: Sequence[str]) -> re.Pattern[str]:
    names = "|".join(re.escape(n) for n in sorted(players, key=len, reverse=True))
    return re.compile(
        rf"(?<![\w'])(?P<who>I\s+am|I'm|Im|I\s+was|{names})(?P<verb>'s|\s+is|\s+was)?\s+(?P<not1>not\s+)?"
        rf"{_ADVERB}(?P<not2>not\s+)?{_ARTICLE}(?P<word>{_WORD})\b",
        re.IGNORECASE,
    )


def claims(text: str | None, speaker: str, players: Sequence[str]) -> list[Claim]:
    """The checkable claims of one message, in the order they are made (a player named twice the same way counts
    once)."""
    if not text:
        return []
    text = text.replace("\u2019", "'")
    pattern = _name_pattern(players)
    by_lower = {p.lower(): p for p in players}
    out: list[Claim] = []
    for clause in _CLAUSE.split(text):
        for m in pattern.finditer(clause):
            low = re.sub(r"\s+", " ", m.group("who").lower())
            is_self = low in ("i am", "i'm", "im", "i was")
            if not is_self and not m.group("verb"):
                continue  # "Bob the mafioso": a name without a verb claims nothing
            before = clause[: m.start()]
            if _CONDITIONAL.search(before):
                continue
            adverb = (m.group("adverb") or "").lower()
            said, value = CLAIM_WORDS[m.group("word").lower()]
            claim = Claim(speaker if is_self else by_lower[low], said, value,
                          bool(m.group("not1")) != bool(m.group("not2")),
                          bool(_HEDGE.search(before)) or adverb in _HEDGED, m.group(0))
            key = (claim.player, said, value, claim.negated)
            if all((c.player, c.said, c.value, c.negated) != key for c in out):
                out.append(claim)
    return out
