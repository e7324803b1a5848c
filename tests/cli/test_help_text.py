"""Help shows what is written: every command's `--help` keeps the square-bracketed words its help text holds
(`[detector]`, `[[imports]]`, `[cluster]`: rich markup once swallowed them) and shows no `<bool>` after a flag."""

from __future__ import annotations

import re

import pytest
import typer

from mafiabench.cli import build_app, command_names, main


def _written(command: object) -> str:
    """The help text as written in the code: the command's and every parameter's."""
    parts = [getattr(command, "help", None) or ""]
    parts += [getattr(p, "help", None) or "" for p in getattr(command, "params", [])]
    return "\n".join(parts)


@pytest.mark.parametrize("name", command_names())
def test_help_keeps_every_bracketed_word_and_shows_flags_as_flags(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    command = typer.main.get_command(build_app()).commands[name]  # type: ignore[attr-defined]
    assert main([name, "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    for word in re.findall(r"\[+[A-Za-z_.]+\]+", _written(command)):
        assert word in shown, f"`mafiabench {name} --help` lost {word}"
    assert "<bool>" not in shown


def test_the_check_sees_the_brackets_it_guards(capsys: pytest.CaptureFixture[str]) -> None:
    """`detect` and `run` are the commands whose help lost `[detector]`, `[[imports]]` and `[cluster]`."""
    group = typer.main.get_command(build_app())
    assert "[detector]" in _written(group.commands["detect"])  # type: ignore[attr-defined]
    assert "[[imports]]" in _written(group.commands["detect"])  # type: ignore[attr-defined]
    assert "[cluster]" in _written(group.commands["run"])  # type: ignore[attr-defined]
