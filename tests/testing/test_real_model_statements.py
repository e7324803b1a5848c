"""Statement labels against a real model (issue 39 item 5): llama-server with Gemma 3 270M plays the mafioso and the
detective of one small Mini-Mafia game with `[statements]` on, through an ordinary `[endpoints.llamacpp]` table; the
villagers are the scripted responder, so the game has messages to label even when the small model's own break the
reference format (its first run here: every message a flagged silence, no statement at all). The assertions are facts
of the pipeline, not of the model: every public message gets its speaker's label and one per living listener, each one
recorded call with the server's token counts; every answer the parser refused is a flagged label with no verdict
(never a default), and the game itself is the one the same answers would give without labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.real_model import SPEC, cli, endpoint, models_table, start_server

pytestmark = pytest.mark.real_model


def game_file(base_url: str) -> str:
    return f"""variant = "mini-mafia"
seed = 2
prompt_version = "v4.1-full"
[rules]
discussion_rounds = 1
[agents]
default = "{SPEC}"
villager = "scripted/naive"
[statements]
max_tokens = 80
{models_table()}
{endpoint(base_url)}"""


def test_one_game_with_statement_labels(tmp_path: Path) -> None:
    server = start_server(tmp_path, slots=2, ctx_per_slot=4096)
    try:
        (tmp_path / "game.toml").write_text(game_file(server.base_url))
        play = cli("play", "--config", "game.toml", "--out", "game.json", "--quiet", cwd=tmp_path)
    finally:
        server.stop()
    record = json.loads((tmp_path / "game.json").read_text())
    assert play.returncode == 0, play.stdout + play.stderr + str(record.get("error"))
    assert record["outcome"]["status"] == "finished" and record["prompt"]["statements"]["max_tokens"] == 80
    said = [e for e in record["events"] if e["type"] == "message" and e["visibility"] == "public"]
    assert [s["seq"] for s in record["statements"]] == [e["seq"] for e in said]
    calls = {c["index"]: c for c in record["calls"]}
    labels = real = 0
    for s in record["statements"]:
        assert [(lb["assessor"], lb["kind"]) for lb in s["labels"]] == [(s["speaker"], "self")] + [
            (p, "peer") for p in s["listeners"]]
        for lb in s["labels"]:
            labels += 1
            call = calls[lb["call"]]
            assert call["action"] == f"assess_{lb['kind']}" and call["player"] == lb["assessor"]
            assert call["input_tokens"] > 100 and call["request"]["settings"]["max_tokens"] == 80
            real += call["provider"] == "llamacpp"
            if call["parse"]["format_failure"]:
                assert lb["is_deceptive"] is None and lb["format_failure"] and lb["error"]
            else:
                assert isinstance(lb["is_deceptive"], bool)
    assert labels == sum(c["action"].startswith("assess") for c in record["calls"]) > 0
    assert real > 0  # labels the real model gave, through the server
    print(f"{len(record['statements'])} statements, {labels} labels, "
          f"{sum(lb['format_failure'] for s in record['statements'] for lb in s['labels'])} unreadable")
