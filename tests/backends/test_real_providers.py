"""Opt-in games against real providers: run with `pytest -m real_provider` and a key in the environment."""

from __future__ import annotations

import os

import pytest

from mafiabench.cli import main

pytestmark = pytest.mark.real_provider

CASES = [
    ("OPENAI_API_KEY", "openai/gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-haiku-4-5"),
]


@pytest.mark.parametrize(("env", "spec"), CASES)
def test_one_real_game(env: str, spec: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if not os.environ.get(env):
        pytest.skip(f"{env} not set")
    out = tmp_path / "game.json"
    assert main(["play", "--agent", spec, "--seed", "1", "--out", str(out)]) == 0
    text = out.read_text()
    assert os.environ[env] not in text
