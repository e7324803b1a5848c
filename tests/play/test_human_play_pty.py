"""A person at a real terminal (a pty, driven by pexpect): the rules shown, a typo re-prompted, the message limit
announced, and leaving the game by `/quit`, Ctrl-D or Ctrl-C, each giving an abandoned record and no traceback."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import pytest

pytestmark = pytest.mark.slow

VOTE_PROMPT = r"Vote to eliminate: .*\n> "
MESSAGE_PROMPT = r"Your message \(at most (\d+) characters"


def spawn(tmp_path: Path, *extra: str, quiet: bool = True) -> tuple[pexpect.spawn, Path]:
    out = tmp_path / "game.json"
    args = ["-m", "mafiabench.cli", "play", "--detective", "human/terminal", "--seed", "3", "--out", str(out),
            *(["--quiet"] if quiet else []), *extra]
    child = pexpect.spawn(sys.executable, args, env={**os.environ, "COLUMNS": "200"}, encoding="utf-8",
                          timeout=600, dimensions=(50, 200))  # a cap: each expect ends at its text
    return child, out


def finish(child: pexpect.spawn) -> str:
    child.expect(pexpect.EOF)
    child.close()
    return child.before or ""


def test_typo_reprompted_then_quit_mid_game_records_an_abandoned_game(tmp_path: Path) -> None:
    """A game whose rules cut messages at the limit (the Mini-Mafia reference cuts nothing: `cut_messages`)."""
    game = tmp_path / "cut.toml"
    game.write_text('variant = "mini-mafia"\n[rules]\ncut_messages = true\n[agents]\ndefault = "policy/random"\n')
    child, out = spawn(tmp_path, "--config", str(game), "--villager", "policy/random")  # mafioso: random policy
    seen = []
    child.expect(r"The rules, as the models are told them:")
    child.expect(MESSAGE_PROMPT)
    seen.append(child.before)
    limit = int(child.match.group(1))
    child.sendline("x" * (limit + 5))
    child.expect(rf"only the first {limit} are kept")
    child.expect(MESSAGE_PROMPT)
    child.sendline("")  # stay silent in round 2
    child.expect(VOTE_PROMPT)
    child.sendline("Zed")  # a typo: not one of the choices
    child.expect(r"'Zed' is not one of the choices")
    child.expect(VOTE_PROMPT)
    child.sendline("/quit")
    rest = finish(child)
    assert child.exitstatus == 1, rest
    assert "Traceback" not in rest and "game abandoned: the player typed /quit" in rest
    record = json.loads(out.read_text())
    assert record["outcome"]["status"] == "abandoned" and record["outcome"]["winner"] is None
    assert record["outcome"]["reason"] == "the player typed /quit"
    me = next(p["name"] for p in record["players"] if p["role"] == "detective")
    said = [e for e in record["events"] if e["actor"] == me and e["type"] == "message"]
    assert len(said) == 1 and said[0]["truncated"] and len(said[0]["text"]) == limit
    assert not any(e["type"] == "vote" and e["actor"] == me for e in record["events"])  # quit before voting
    assert "discussion" in "".join(seen).lower()  # the rules paragraph the models read was shown


def test_ctrl_d_abandons_cleanly(tmp_path: Path) -> None:
    child, out = spawn(tmp_path, quiet=False)
    child.expect(MESSAGE_PROMPT)
    child.sendeof()
    rest = finish(child)
    assert child.exitstatus == 1 and "Traceback" not in rest, rest
    assert rest.count("game abandoned") == 1, rest  # was printed twice: by the transcript and by the command
    record = json.loads(out.read_text())
    assert record["outcome"]["status"] == "abandoned" and "Ctrl-D" in record["outcome"]["reason"]


def test_ctrl_c_abandons_cleanly(tmp_path: Path) -> None:
    child, out = spawn(tmp_path)
    child.expect(MESSAGE_PROMPT)
    child.sendintr()
    rest = finish(child)
    assert child.exitstatus == 1 and "Traceback" not in rest, rest
    record = json.loads(out.read_text())
    assert record["outcome"]["status"] == "abandoned" and "Ctrl-C" in record["outcome"]["reason"]


def test_a_finished_game_ends_with_a_closing_line_not_the_transcript(tmp_path: Path) -> None:
    """The player is told their fate and the result (issue 31 item 11), and the transcript they watched is not
    printed again (no seat lines, no 'played by')."""
    child, out = spawn(tmp_path, "--villager", "policy/random", quiet=False)
    answered = 0
    while child.expect([MESSAGE_PROMPT, r"\n> ", pexpect.EOF]) != 2:
        child.sendline("" if child.match.re.pattern.startswith("Your message") else "1")
        answered += 1
    child.close()
    rest = child.before or ""
    assert answered >= 1 and child.exitstatus == 0, rest
    record = json.loads(out.read_text())
    me = next(p for p in record["players"] if p["agent"] == "human/terminal")
    winner = record["outcome"]["winner"]
    verdict = "You win." if me["team"] == winner else "You lose."
    assert f"You were {me['name']}, the detective: " in rest and f"the {winner} wins" in rest and verdict in rest
    assert "played by" not in rest and "game abandoned" not in rest
