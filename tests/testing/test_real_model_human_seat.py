"""The README's human seat against the local model (issue 28 item 6): a person at a real terminal (a pty, driven by
pexpect) plays the villagers of `mafiabench play --villager human/terminal --mafioso llamacpp/gemma-3-270m
--detective llamacpp/gemma-3-270m`, with the server's port given in an `[endpoints.llamacpp]` file as a user on
another port would write it (`--config`). The game ends with the player's closing line and a finished record whose
model seats were answered by the real server."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from mafiabench.testing.llama_server import LlamaServer
from support.real_model import SPEC, endpoint, start_server

pytestmark = pytest.mark.real_model

MESSAGE_PROMPT = r"Your message \(at most \d+ characters"
CHOICE_PROMPT = r"(?:Vote to eliminate|Choose whom to \w+): (.*)\r?\n> "


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with start_server(tmp_path_factory.mktemp("llama"), slots=1, ctx_per_slot=4096) as srv:
        yield srv


def test_a_person_plays_the_villagers_against_the_local_model(server: LlamaServer, tmp_path: Path) -> None:
    (tmp_path / "endpoints.toml").write_text(endpoint(server.base_url))
    out = tmp_path / "game.json"
    args = ["-m", "mafiabench.cli", "play", "--config", "endpoints.toml", "--villager", "human/terminal",
            "--mafioso", SPEC, "--detective", SPEC, "--seed", "1", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("LLAMACPP_API_KEY", None)
    child = pexpect.spawn(sys.executable, args, cwd=tmp_path, env=env, encoding="utf-8", timeout=300,
                          dimensions=(50, 200))  # fmt: skip
    said = 0
    while True:
        match = child.expect([MESSAGE_PROMPT, CHOICE_PROMPT, pexpect.EOF])
        if match == 0:
            said += 1
            child.sendline(f"I am a plain villager, message {said}.")
        elif match == 1:
            child.sendline("1")  # the first choice, by its number
        else:
            break
    child.close()
    rest = child.before or ""
    assert "Traceback" not in rest, rest
    record = json.loads(out.read_text())
    assert record["outcome"]["status"] == "finished", record["outcome"]
    assert child.exitstatus == 0, rest
    assert re.search(r"You were \w+, the villager: you (?:survived|were [^;]+); the \w+ wins", rest), rest
    seats = {p["role"]: p["agent"] for p in record["players"]}
    assert seats == {"villager": "human/terminal", "mafioso": SPEC, "detective": SPEC}
    assert record["calls"], "no model call reached the server"
    for call in record["calls"]:
        assert call["provider"] == "llamacpp" and call["input_tokens"] > 100  # the server's own count
