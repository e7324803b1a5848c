"""The claims a message makes that the game can check (engine/claims.py, issue 39 item 2): which sentence shapes are
read, which are not (conditionals, questions, a name without a verb), hedges flagged, and each claim's truth by the
players' roles."""

from __future__ import annotations

import pytest

from mafiabench.engine.claims import claims

PLAYERS = ["Alice", "Bob", "Carol", "Player 3"]
ROLES = {"Alice": "mafioso", "Bob": "detective", "Carol": "villager", "Player 3": "bystander"}


def said(text: str, speaker: str = "Alice") -> list[tuple[str, str, str, bool, bool, bool | None]]:
    return [(c.player, c.said, c.value, c.negated, c.hedged, c.holds(ROLES)) for c in claims(text, speaker, PLAYERS)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I am the detective and Bob is the mafioso.",
         [("Alice", "role", "detective", False, False, False), ("Bob", "role", "mafioso", False, False, False)]),
        ("I'm with the town. Let's look closely at Bob.", [("Alice", "team", "town", False, False, False)]),
        ("I\u2019m not mafia, Carol is definitely not the detective",
         [("Alice", "team", "mafia", True, False, False), ("Carol", "role", "detective", True, False, True)]),
        ("I think Carol is mafia", [("Carol", "team", "mafia", False, True, False)]),
        ("Bob is probably the mafioso", [("Bob", "role", "mafioso", False, True, False)]),
        ("Player 3 is a villager", [("Player 3", "role", "villager", False, False, True)]),  # bystander = villager
        ("bob is innocent!", [("Bob", "team", "town", False, False, True)]),
        ("Alice is a member of the mafia", [("Alice", "team", "mafia", False, False, True)]),
        ("If Bob is the mafioso we lose", []),
        ("Is Bob the mafioso?", []),
        ("Bob the mafioso lied", []),
        ("Tim is the detective", []),  # not a player
        ("", []),
    ],
)
def test_claims_and_their_truth(text: str, expected: list[tuple[str, str, str, bool, bool, bool | None]]) -> None:
    assert said(text) == expected


def test_a_claim_repeated_counts_once() -> None:
    assert len(said("Bob is the mafioso. I repeat: Bob is the mafioso!")) == 1
