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


def test_closing_lines_say_the_fate_the_result_every_role_and_the_votes() -> None:
    from mafiabench.play.omniscient_transcript import closing_lines

    record, me = _policy_game_with_a_human_seat("villager", "arrested")
    lines = closing_lines(record)
    assert lines[0] == (f"You were {me.name}, the villager: you were arrested on day 1; the mafia wins (innocent "
                        "arrested). You lose.")
    roles = {p.name: p.role for p in record.players}
    assert lines[1].startswith("Roles: ") and all(f"{n} {r} (" in lines[1] for n, r in roles.items())
    assert f"{me.name} villager (you, arrested on day 1)" in lines[1]
    votes = [e for e in record.events if e.type == "vote"]
    assert lines[2].startswith("Day 1 votes: " + ", ".join(f"{e.actor} → {e.target}" for e in votes))
    assert lines[2].endswith(f": {me.name} arrested") and len(lines) == 3
    record, me = _policy_game_with_a_human_seat("villager", "killed")
    assert closing_lines(record)[0].startswith(f"You were {me.name}, the villager: you were killed in night 1; the ")
    record, me = _policy_game_with_a_human_seat("mafioso", "arrested")
    assert closing_lines(record)[0] == (
        f"You were {me.name}, the mafioso: you were arrested on day 1; the town wins (mafioso arrested). You lose.")
    record, me = _policy_game_with_a_human_seat("mafioso", "survived")
    assert closing_lines(record)[0] == (
        f"You were {me.name}, the mafioso: you survived; the mafia wins (innocent arrested). You win.")


def play(tmp_path: Path, answers: str, *flags: str) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    out = tmp_path / "game.json"
    proc = subprocess.run(
        [sys.executable, "-m", "mafiabench.cli", "play", "--villager", "human/terminal", "--agent", "policy/random",
         "--seed", "3", "--out", str(out), "--quiet", *flags],
        input=answers, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(out.read_text())


def test_a_246_character_message_is_kept_whole_as_the_prompt_said_and_the_end_reveals_the_roles(
    tmp_path: Path,
) -> None:
    """The Mini-Mafia default cuts nothing (`cut_messages = false`, as the reference's code): the person is told so
    before typing (the models' prompt says messages are cut), and after; `--villager human/terminal` gives both
    villager seats to the person, and the end speaks of the one they played, not the one killed in the night."""
    message = "I was at home. " * 16 + "Really"
    assert len(message) == 246
    proc, record = play(tmp_path, f"{message}\n\n1\n1\n")
    before, _, _ = proc.stdout.partition(message[:40])
    assert "Messages, as this game's rules enforce them: at most 200 characters asked for; a longer one is kept " \
           "whole, not cut" in before
    assert "Your message (at most 200 characters asked for; a longer one is kept whole, not cut;" in before
    assert "Your message has 246 characters, over the 200 asked for; it is kept whole" in proc.stdout
    me = next(e["actor"] for e in record["events"] if e["type"] == "message")
    said = next(e for e in record["events"] if e["type"] == "message" and e["actor"] == me)
    assert said["text"] == message and not said["truncated"]
    lines = proc.stdout.splitlines()
    assert lines[-1].startswith("record written to")
    closing = lines[-4:-1]
    assert closing[0].startswith(f"> You were {me}, the villager: ") and "You were" not in "".join(closing[1:])
    assert closing[1].startswith("Roles: ") and f"{me} villager (you, " in closing[1]
    assert all(f"{p['name']} {p['role']} (" in closing[1] for p in record["players"])
    killed = next(e["target"] for e in record["events"] if e["type"] == "kill")
    assert f"{killed} villager (killed in night 1)" in closing[1]  # the other villager seat: not the person's
    assert closing[2].startswith("Day 1 votes: ")


def test_when_the_rules_cut_the_person_is_told_before_and_after(tmp_path: Path) -> None:
    game = tmp_path / "cut.toml"
    game.write_text('variant = "mini-mafia"\n[rules]\ncut_messages = true\n')
    message = "x" * 246
    proc, record = play(tmp_path, f"{message}\n\n1\n1\n", "--config", str(game))
    assert "Your message (at most 200 characters: a longer one is cut to its first 200;" in proc.stdout
    assert "Your message has 246 characters; only the first 200 are kept" in proc.stdout
    said = next(e for e in record["events"] if e["type"] == "message")
    assert said["text"] == "x" * 200 and said["truncated"]
