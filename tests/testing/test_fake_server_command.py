"""`mafiabench fake-server`: a game's endpoint tried against it offline through the real SDK, injected faults, bad
flags named, and a clean stop on SIGTERM and Ctrl-C (exit 0, no traceback, the port released)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mafiabench.cli import main


@contextmanager
def fake_server(*args: str) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """Start `mafiabench fake-server --port 0 ARGS`; yield it, its base URL and its first line (which names the URL)."""
    proc = subprocess.Popen([sys.executable, "-m", "mafiabench.cli", "fake-server", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"on (http://127\.0\.0\.1:\d+)", first)
        assert match, first + proc.stderr.read() if proc.stderr else first
        yield proc, match.group(1), first
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def stop_with(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=15)
    return proc.returncode, out, err


def port_is_free(url: str) -> bool:
    with socket.socket() as s:
        try:
            s.connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))
        except ConnectionRefusedError:
            return True
    return False


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_game_plays_against_the_fake_server_which_stops_cleanly_on_sigterm(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_server("--latency", "0.01") as (proc, url, _):
        base = url + ("/v1" if kind == "openai" else "")
        game = tmp_path / "game.toml"
        game.write_text(f'seed = 2\n[agents]\nmafioso = "box/m"\ndefault = "policy/random"\n'
                        f'[endpoints.box]\nkind = "{kind}"\nbase_url = "{base}"\nkey_required = false\n')
        out = tmp_path / "g.json"
        assert main(["play", "--config", str(game), "--out", str(out), "--quiet"]) == 0
        record = json.loads(out.read_text())
        assert record["outcome"]["status"] != "failed" and record["calls"]
        assert all(c["model"] == "m" and c["output_tokens"] > 0 for c in record["calls"])
        code, _, err = stop_with(proc, signal.SIGTERM)
    assert code == 0, err
    assert "Traceback" not in err and f"stopped after {len(record['calls'])} request(s)" in err
    assert port_is_free(url)


def test_play_command_closes_its_sdk_clients(tmp_path: Path) -> None:
    """`mafiabench play` in its own process: no "Unclosed client session" on stderr at exit (the SDK's aiohttp
    transport complains about a client left open)."""
    with fake_server() as (proc, url, _):
        game = tmp_path / "game.toml"
        game.write_text(f'seed = 2\n[agents]\nmafioso = "box/m"\ndefault = "policy/random"\n'
                        f'[endpoints.box]\nkind = "openai"\nbase_url = "{url}/v1"\nkey_required = false\n')
        run = subprocess.run([sys.executable, "-m", "mafiabench.cli", "play", "--config", str(game), "--quiet"],
                             capture_output=True, text=True, timeout=120)
        stop_with(proc, signal.SIGTERM)
    assert run.returncode == 0, run.stderr
    assert "Unclosed" not in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_injected_faults_and_ctrl_c() -> None:
    with fake_server("--faults", "503=1") as (proc, url, first):
        request = urllib.request.Request(url + "/v1/chat/completions", data=b'{"model": "m", "messages": []}',
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(request, timeout=5)
        assert failed.value.code == 503
        code, _, err = stop_with(proc, signal.SIGINT)
    assert code == 0 and "Traceback" not in err and "stopped after 1 request(s)" in err
    assert "faults: 503 1" in first


@pytest.mark.parametrize(
    ("faults", "message"),
    [("meteor=0.1", "unknown fault kind 'meteor'"), ("429=7.5", "rate of '429' must be in [0, 1], got 7.5"),
     ("429", "'429' is not KIND=RATE"), ("429=0.6,500=0.6", "add up to 1.2")],
)
def test_bad_faults_are_named(faults: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fake-server", "--port", "0", "--faults", faults]) == 2
    err = capsys.readouterr().err
    assert "--faults" in err and message in err
