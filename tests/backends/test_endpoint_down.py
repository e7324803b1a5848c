"""An endpoint that is down: the error names its URL (in the record and on the terminal), for both SDKs."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from mafiabench.cli import main


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when we return: nothing listens there


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_error_of_a_down_endpoint_names_its_url(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOX_TEST_KEY", "not-a-real-key")
    port = closed_port()
    base = f"http://127.0.0.1:{port}" + ("/v1" if kind == "openai" else "")
    game = tmp_path / "game.toml"
    game.write_text(
        f'[agents]\nmafioso = "box/m"\n[models."box/m"]\nmax_attempts = 1\n'
        f'[endpoints.box]\nkind = "{kind}"\nbase_url = "{base}"\napi_key_env = "BOX_TEST_KEY"\n'
    )
    out = tmp_path / "g.json"
    assert main(["play", "--config", str(game), "--out", str(out)]) == 1
    error = json.loads(out.read_text())["error"]
    assert f"127.0.0.1:{port}" in error and "cannot reach" in error
    assert f"127.0.0.1:{port}" in capsys.readouterr().out
