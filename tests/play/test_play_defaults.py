"""`mafiabench play`: seats not given default to a random policy; an always-accuse target must be a player."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mafiabench.cli import main


def test_only_the_villagers_given_the_other_seats_play_random(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    assert main(["play", "--villager", "policy/informed", "--seed", "4", "--quiet", "--out", str(out)]) == 0
    agents = {p["role"]: p["agent"] for p in json.loads(out.read_text())["players"]}
    assert agents == {"mafioso": "policy/random", "detective": "policy/random", "villager": "policy/informed"}


def test_always_accuse_of_someone_not_in_the_game_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["play", "--villager", "policy/always-accuse:Zed", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "'Zed' is not a player of these games" in err and "Traceback" not in err


def test_always_accuse_of_a_player_plays(tmp_path: Path) -> None:
    toml = tmp_path / "game.toml"
    toml.write_text('[rules]\nnames = ["Ann", "Bea", "Cal", "Dov"]\n[agents]\nvillager = "policy/always-accuse:Dov"\n')
    for seed in range(10):  # the first seed where Dov survives the night and a villager other than Dov votes
        out = tmp_path / f"g{seed}.json"
        assert main(["play", "--config", str(toml), "--seed", str(seed), "--quiet", "--out", str(out)]) == 0
        record = json.loads(out.read_text())
        if any(e["type"] == "kill" and e["target"] == "Dov" for e in record["events"]):
            continue
        accusers = {p["name"] for p in record["players"] if p["role"] == "villager"} - {"Dov"}
        votes = [e for e in record["events"] if e["type"] == "vote" and e["actor"] in accusers]
        if votes:
            assert all(v["target"] == "Dov" and not v["random_fallback"] for v in votes)
            return
    pytest.fail("no seed in 0..9 had Dov alive at the vote")


def test_play_help_lists_the_human_seat(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["play", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "human/terminal" in out and "default to policy/random" in out


def test_every_missing_key_is_reported_at_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    code = main(["play", "--mafioso", "openai/gpt-4.1-mini", "--detective", "anthropic/claude-haiku-4-5",
                 "--villager", "nowhere/model", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "3 problems" in err
    assert "OPENAI_API_KEY" in err and "ANTHROPIC_API_KEY" in err and "unknown provider 'nowhere'" in err


def test_a_file_of_endpoints_only_takes_its_seats_from_the_flags(tmp_path: Path) -> None:
    """The README's human-seat command with an endpoint table in a file: the file names no seat, the flags do
    (it was refused with "agents: give at least a 'default' agent spec")."""
    toml = tmp_path / "endpoints.toml"
    toml.write_text(
        '[endpoints.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nkey_required = false\n'
    )
    out = tmp_path / "g.json"
    args = ["play", "--config", str(toml), "--villager", "policy/informed", "--mafioso", "policy/random"]
    assert main([*args, "--seed", "2", "--quiet", "--out", str(out)]) == 0
    agents = {p["role"]: p["agent"] for p in json.loads(out.read_text())["players"]}
    assert agents == {"mafioso": "policy/random", "detective": "policy/random", "villager": "policy/informed"}


def test_the_files_default_seat_stays_under_the_flags(tmp_path: Path) -> None:
    toml = tmp_path / "game.toml"
    toml.write_text('[agents]\ndefault = "policy/informed"\n')
    out = tmp_path / "g.json"
    assert main(["play", "--config", str(toml), "--villager", "policy/random", "--quiet", "--out", str(out)]) == 0
    agents = {p["role"]: p["agent"] for p in json.loads(out.read_text())["players"]}
    assert agents == {"mafioso": "policy/informed", "detective": "policy/informed", "villager": "policy/random"}
