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


def _policy_game_with_a_human_seat(role: str, fate: str):  # type: ignore[no-untyped-def]
    """A policy game in which the seat of `role` met `fate` (arrested, killed, survived), that seat then marked as
    played by a person: closing_lines reads only the record."""
    import asyncio
    import dataclasses

    from mafiabench.play.runner import GameSpec, play_game

    for seed in range(200):
        spec = GameSpec.build(f"g{seed}", "mini-mafia", {}, seed, {"default": "policy/random"})
        record = asyncio.run(play_game(spec))
        me = next(p for p in record.players if p.role == role)
        arrested = any(e.type == "elimination" and e.target == me.name for e in record.events)
        killed = any(e.type == "kill" and e.target == me.name for e in record.events)
        if {"arrested": arrested, "killed": killed, "survived": not (arrested or killed)}[fate]:
            players = [dataclasses.replace(p, agent="human/terminal") if p is me else p for p in record.players]
            return dataclasses.replace(record, players=players), me
    raise AssertionError(f"no seed in 200 where the {role} was {fate}")


def test_closing_line_says_the_fate_and_the_result() -> None:
    from mafiabench.play.omniscient_transcript import closing_lines

    record, me = _policy_game_with_a_human_seat("villager", "arrested")
    assert closing_lines(record) == [
        f"You were {me.name}, the villager: you were arrested; the mafia wins (innocent arrested). You lose."]
    record, me = _policy_game_with_a_human_seat("villager", "killed")
    (line,) = closing_lines(record)
    assert line.startswith(f"You were {me.name}, the villager: you were killed in the night; the ")
    record, me = _policy_game_with_a_human_seat("mafioso", "arrested")
    assert closing_lines(record) == [
        f"You were {me.name}, the mafioso: you were arrested; the town wins (mafioso arrested). You lose."]
    record, me = _policy_game_with_a_human_seat("mafioso", "survived")
    assert closing_lines(record) == [
        f"You were {me.name}, the mafioso: you survived; the mafia wins (innocent arrested). You win."]
