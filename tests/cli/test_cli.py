"""The `mafiabench` command: play, baseline, clear errors before any call, and docs/commands.md kept in step."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mafiabench.cli import command_names, main

ROOT = Path(__file__).resolve().parents[2]


def test_play_writes_a_record_and_prints_a_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "game.json"
    code = main(["play", "--mafioso", "fake/demo", "--detective", "policy/informed", "--villager", "scripted/naive",
                 "--seed", "3", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "Night 1 begins." in text and "wins" in text
    record = json.loads(out.read_text())
    assert record["record_version"] == 1 and len(record["players"]) == 4
    assert record["prompt"]["version"] == "mini-mafia/v4.1-full" and len(record["prompt"]["sha256"]) == 64
    assert record["calls"] and all(c["model"] for c in record["calls"])


def test_play_from_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "game.toml"
    cfg.write_text('variant = "classic"\nseed = 4\n[rules]\nn_players = 6\n[agents]\ndefault = "policy/random"\n')
    assert main(["play", "--config", str(cfg), "--quiet"]) == 0


def test_missing_key_is_named_before_any_call(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["play", "--agent", "openai/gpt-4.1-mini"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "Traceback" not in err


def test_unknown_provider_and_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["play", "--agent", "nosuch/model"]) == 2
    assert "unknown provider 'nosuch'" in capsys.readouterr().err
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[rules]\nmessage_limit = "long"\n[agents]\ndefault = "policy/random"\n')
    assert main(["play", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert str(cfg) in err and "rules.message_limit" in err and "'long'" in err


def test_baseline_prints_exact_fractions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", "day-informed"]) == 0
    assert "town wins 7/12" in capsys.readouterr().out


def test_console_script_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "mafiabench.cli", "--help"], capture_output=True, text=True,
                         check=True)
    assert "play" in out.stdout


def test_the_commands_page_lists_every_command() -> None:
    """Every subcommand in the CLI help appears in docs/commands.md's command table, and vice versa."""
    commands = set(command_names())
    assert {"play", "run", "build", "dashboards"} <= commands
    page = (ROOT / "docs" / "commands.md").read_text()
    documented = set(re.findall(r"^\| `mafiabench ([a-z-]+)", page, flags=re.M))
    assert commands == documented


def test_every_quoted_command_exists() -> None:
    """A command quoted in the README, the docs or an experiment file is one the CLI has (`demo.toml` once said
    `mafiabench baselines`; the command is `baseline`)."""
    commands = set(command_names())
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "experiments").glob("*.toml")]
    quoted = {(f.name, word) for f in files for word in re.findall(r"`mafiabench ([a-z][a-z-]*)", f.read_text())}
    assert len({w for _, w in quoted}) >= 5
    assert not [(name, word) for name, word in quoted if word not in commands]


def test_agent_assignment_by_name_role_and_default() -> None:
    from mafiabench.play.runner import agent_spec_for

    agents = {"default": "policy/random", "villager": "fake/v", "Bob": "policy/informed"}
    assert agent_spec_for(agents, "Alice", "mafioso") == "policy/random"
    assert agent_spec_for(agents, "Cy", "villager") == "fake/v"
    assert agent_spec_for(agents, "Cy", "bystander") == "fake/v"
    assert agent_spec_for(agents, "Bob", "detective") == "policy/informed"


def test_run_names_a_missing_key_before_starting_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "k"\ngames_per_cell = 1\n[[cells]]\nname = "c"\n'
                   'agents = { default = "anthropic/claude-haiku-4-5" }\n')
    assert main(["run", str(exp), "--warehouse", str(tmp_path / "w.duckdb")]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "w.duckdb").exists()


@pytest.mark.slow
def test_run_without_prefect_then_publish(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "tiny"\ngames_per_cell = 6\n[[cells]]\nname = "p"\n'
                   'agents = { mafioso = "policy/random", default = "policy/informed" }\n')
    out = tmp_path / "dash"
    code = main(["run", str(exp), "--no-prefect", "--no-progress", "--publish", "--warehouse",
                 str(tmp_path / "w.duckdb"), "--dashboards", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "PUBLISHED" in text and (out / "index.html").is_file()


def test_usage_errors_exit_2_with_plain_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Unknown commands, bad choices and conflicting options are usage errors (exit 2); --help is plain text (its
    square brackets shown as written: test_help_text.py) and exits 0."""
    assert main(["nosuch"]) == 2
    assert "No such command 'nosuch'" in capsys.readouterr().err
    assert main(["play", "--variant", "bogus"]) == 2
    assert "'bogus' is not one of" in capsys.readouterr().err
    assert main(["query", "select 1", "--csv", "a.csv", "--parquet", "a.parquet"]) == 2
    assert "mutually exclusive" in capsys.readouterr().err
    assert main([]) == 2
    bare = capsys.readouterr()
    assert "Usage: mafiabench [OPTIONS] COMMAND" in bare.out + bare.err
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("mafiabench ")
    for name in command_names():
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert f"Usage: mafiabench {name}" in out and "\nOptions:\n" in out and "─" not in out, name
