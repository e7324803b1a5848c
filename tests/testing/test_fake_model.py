"""The game-aware fake model (`mafiabench.testing.fake_model`): it answers every kind of mafiabench prompt in its
format, deterministically, and the backends that serve it know no game."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from mafiabench.backends.backend import Message
from mafiabench.testing import fake_model
from mafiabench.testing.fake_model import FakeBrain

BACKENDS = Path(__file__).resolve().parents[2] / "src" / "mafiabench" / "backends"
GAME_WORDS = re.compile(r"mafia(?!bench)|mafioso|villager|detective|bystander|\bvot|<send>|<wait>|discussion",
                        re.IGNORECASE)


def test_the_backends_know_no_game() -> None:
    """No module of the backends package names a role, a vote or a prompt token (the fake answers live in testing);
    the check finds them in the fake model, so it can fail."""
    found = {p.name: GAME_WORDS.findall(p.read_text(encoding="utf-8")) for p in sorted(BACKENDS.glob("*.py"))}
    assert {name: words for name, words in found.items() if words} == {}
    assert GAME_WORDS.search(Path(fake_model.__file__).read_text(encoding="utf-8"))


def test_brain_line_scan_equals_regex() -> None:
    """The fake's regexes run only over lines holding their key words: the same matches as over the whole text, on
    texts built to trip it (keys in any case, several on a line, at the ends, non-ASCII letters that fold)."""
    parts = ["players", "Players", "OTHER PLAYERS are", "names:", "Names", "participants", "from:", "FROM: ",
             "your name is", "Your Name Is ", "Ann", "Ben 2", "Cy", ", ", " and ", ": ", " are ", "\n", "\n\n",
             "x" * 45, "ſ", "PLAYERſ", "é", "\t", ".", ";", "vote ", "alive players (3):", "from:Ann"]
    rng = random.Random(7)
    cases = [
        (fake_model._CHOICES_RE, fake_model._CHOICES_KEYS),
        (fake_model._LIST_RE, fake_model._LIST_KEYS),
        (fake_model._SELF_RE, fake_model._SELF_KEYS),
    ]
    hits = 0
    for _ in range(3000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 30)))
        for regex, keys in cases:
            expected = regex.findall(text)
            assert fake_model._findall(regex, text, keys) == expected, (regex.pattern, text)
            hits += bool(expected)
    assert hits > 1000  # the texts do match, often


def brain(prompt: str, key: str = "k") -> str:
    return FakeBrain("m").answer([Message("user", prompt)], key)


def test_brain_contract() -> None:
    for i in range(20):
        assert brain("Answer <send> to speak now or <wait> to listen.", str(i)) in {"<send>", "<wait>"}
        belief = json.loads(
            brain("Reply in JSON with your probability for each player.\nChoose from: Ann, Ben, Player 3.", str(i))
        )
        assert set(belief["probability"]) == {"Ann", "Ben", "Player 3"} and belief["reasoning"]
        assert abs(sum(belief["probability"].values()) - 1) < 1e-3
        assert all(p > 0 for p in belief["probability"].values())
        vote = brain("Night falls.\nChoose a victim from: Ann, Ben, Cy.\n", str(i))
        assert vote.split("\n")[0] in {"Ann", "Ben", "Cy"}
        talk = brain("Your name is Ann. Other players: Ann, Ben, Cy.\nWhat message do you want to say?", str(i))
        first_line = talk.split("\n")[0]
        assert first_line.startswith('"') and first_line.endswith('"') and len(first_line) > 2
        assert "Ann" not in first_line  # never accuses itself
    named = [brain("[00:00:05] Zed: hello\n[00:00:10] Yara: hi\nWhat do you say?", str(i)) for i in range(30)]
    assert any("Zed" in t or "Yara" in t for t in named)
    assert all(t.startswith('"') for t in named)
    assert brain("Say something.").startswith('"')  # no names at all: generic message
