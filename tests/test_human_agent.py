"""A person plays a seat from the terminal: the real command, its stdin and stdout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_human_plays_the_mafioso_from_the_terminal(tmp_path: Path) -> None:
    out = tmp_path / "game.json"
    # Two discussion turns (a message, then silence), then an invalid vote and a valid one by number.
    answers = "I was home all night.\n\nnobody\n1\n"
    proc = subprocess.run(
        [sys.executable, "-m", "mafiabench.cli", "play", "--mafioso", "human/terminal", "--agent", "policy/random",
         "--seed", "2", "--out", str(out), "--quiet"],
        input=answers, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "You are" in proc.stdout and "the mafioso" in proc.stdout
    assert "'nobody' is not one of the choices" in proc.stdout
    record = json.loads(out.read_text())
    mafioso = next(p["name"] for p in record["players"] if p["role"] == "mafioso")
    assert next(p["agent"] for p in record["players"] if p["role"] == "mafioso") == "human/terminal"
    said = [e for e in record["events"] if e["actor"] == mafioso and e["type"] in ("message", "silence")]
    assert said[0]["type"] == "message" and said[0]["text"] == "I was home all night."
    assert said[1]["type"] == "silence" and not said[1]["format_failure"]
    vote = next(e for e in record["events"] if e["type"] == "vote" and e["actor"] == mafioso)
    assert not vote["random_fallback"]
