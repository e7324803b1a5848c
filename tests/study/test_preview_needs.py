"""Preview says what a study needs (issue 40 item 2, issue 35 item 6): each key (set or not), each endpoint (answers,
refused, or silent, from a one-second probe), each model (priced, deprecated or retired with the date, or unknown
with the closest names), and what the run would refuse, in one line, before anything else."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import date
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.commands.preview import render_needs
from mafiabench.protocols import render_text
from mafiabench.study.estimate import probe_endpoint, study_needs
from mafiabench.study.protocol import protocol_card
from mafiabench.study.spec import load_experiment, parse_experiment

ROOT = Path(__file__).resolve().parents[2]
BACKGROUND_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY", "GOOGLE_API_KEY")


class _Models(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "qwen2.5-7b-instruct"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[str]:
    """An OpenAI-compatible server's `/v1/models`, listing one model."""
    server = HTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def test_the_backgrounds_study_lists_five_missing_keys_and_three_silent_servers_within_5_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in BACKGROUND_KEYS:
        monkeypatch.delenv(key, raising=False)
    started = time.monotonic()  # from reading the file to the printed needs (the interpreter's start aside)
    needs = study_needs(load_experiment(ROOT / "experiments" / "mini_mafia_backgrounds.toml"))
    lines = render_needs(needs).splitlines()
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"the needs took {elapsed:.1f} s"
    missing = {line.split()[1] for line in lines if line.startswith("  key ") and "MISSING" in line}
    assert missing == set(BACKGROUND_KEYS)
    servers = [line for line in lines if line.startswith("  endpoint  llamacpp-")]
    assert len(servers) == 3 and all(" answers" not in s for s in servers), servers
    assert "start 3 local server(s) that do not answer: llamacpp-mistral, llamacpp-llama, llamacpp-qwen" in lines[-1]


def test_preview_prints_the_needs_first() -> None:
    env = {k: v for k, v in os.environ.items() if k not in BACKGROUND_KEYS}
    child = subprocess.Popen(
        [sys.executable, "-m", "mafiabench.cli", "preview", "experiments/mini_mafia_backgrounds.toml"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: list[str] = []
    try:  # read until the needs end, then stop the child (its estimate is not wanted here)
        assert child.stdout is not None
        for line in child.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Before `mafiabench run`"):
                break
    finally:
        child.kill()
        child.wait()
    assert lines[0] == "What a run needs on this machine:"
    assert lines[-1].startswith("Before `mafiabench run`: set 5 key(s)"), "\n".join(lines)


def test_a_closed_port_is_refused_and_a_silent_one_times_out_in_a_second(answering: str) -> None:
    refused = probe_endpoint("box", f"http://127.0.0.1:{closed_port()}/v1")
    assert refused.status == "refused"
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connects, never answers
    try:
        started = time.monotonic()
        probe = probe_endpoint("box", f"http://127.0.0.1:{silent.getsockname()[1]}/v1", timeout=1.0)
        took = time.monotonic() - started
    finally:
        silent.close()
    assert probe.status == "no answer" and 0.9 < took < 2.5, (probe, took)
    ok = probe_endpoint("box", answering)
    assert ok.status == "answers" and ok.served == ("qwen2.5-7b-instruct",)


def test_a_misspelt_model_gets_the_closest_names_from_the_price_table_and_the_server(
    tmp_path: Path, answering: str
) -> None:
    exp = parse_experiment({
        "name": "typos", "games_per_cell": 1, "warehouse": str(tmp_path / "w.duckdb"),
        "cells": [{"name": "c", "agents": {"mafioso": "openai/gpt-4.1-mnii", "detective": "box/qwen2.5-7b-instrct",
                                           "villager": "openai/gpt-4.1-mini", "default": "policy/random"}}],
        "endpoints": {"box": {"kind": "openai", "base_url": answering, "key_required": False}},
    })
    needs = study_needs(exp)
    by_spec = {m.spec: m for m in needs.models}
    assert by_spec["openai/gpt-4.1-mnii"].status == "unknown"
    assert by_spec["openai/gpt-4.1-mnii"].suggestions[0] == "openai/gpt-4.1-mini"
    assert by_spec["box/qwen2.5-7b-instrct"].suggestions == ("box/qwen2.5-7b-instruct",)  # the server's own name
    assert by_spec["openai/gpt-4.1-mini"].status == "priced"
    assert {e.name: e.status for e in needs.endpoints}["box"] == "answers"
    assert not needs.refusals  # no budget: an unpriced model is counted, not refused


def test_a_retired_model_is_named_with_its_dates_by_preview_and_the_card() -> None:
    exp = load_experiment(ROOT / "experiments" / "strategema.toml")
    sonnet = {m.spec: m for m in study_needs(exp, probe=False).models}["anthropic/claude-3-sonnet-20240229"]
    assert sonnet.status == "retired" and "2025-07-21" in sonnet.detail
    before = {m.spec: m for m in study_needs(exp, probe=False, today=date(2025, 3, 1)).models}
    assert before["anthropic/claude-3-sonnet-20240229"].detail.startswith("on 2025-01-21, retires on 2025-07-21")
    card = protocol_card(exp)
    assert card is not None
    assert "⚠ Model anthropic/claude-3-sonnet-20240229, by its provider: deprecated 2025-01-21, retirement " \
           "2025-07-21" in render_text(card)


def test_preview_refuses_what_the_run_would_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "b.toml"
    path.write_text(
        f'name = "b"\ngames_per_cell = 2\nwarehouse = "{tmp_path / "w.duckdb"}"\n[budget]\nmax_usd = 5.0\n'
        '[[cells]]\nname = "c"\nagents = { mafioso = "openai/gpt-4.1-mnii", default = "policy/random" }\n'
    )
    assert main(["preview", str(path), "--no-probe"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "`mafiabench run` would refuse" in err[0] and "openai/gpt-4.1-mnii" in err[0]
    assert "did you mean openai/gpt-4.1-mini" in captured.out
    assert "Per model:" not in captured.out  # refused before the sample games
    monkeypatch.setenv("OPENAI_API_KEY", "-".join(["test", "not", "a", "key"]))
    started = time.monotonic()
    assert main(["run", str(path)]) == 2  # the run refuses the same, before Prefect starts
    assert time.monotonic() - started < 5
    assert "have no price: openai/gpt-4.1-mnii" in capsys.readouterr().err
    assert not (tmp_path / "w.duckdb").exists()
