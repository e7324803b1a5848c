"""Secrets never reach a record: provider errors that echo a key are redacted before they are stored or logged."""

from __future__ import annotations

import asyncio

import pytest

from mafiabench.agents.llm import ModelSettings
from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.redact import MASK, redact
from mafiabench.testing import FakeModelServer

SECRET = "sk-proj-AbCd1234"


def test_redact_removes_key_values_and_key_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_PROVIDER_API_KEY", "plain-secret-value-42")
    text = redact("bad key plain-secret-value-42; Incorrect API key provided: sk-abc***wxyz; Bearer abc.def")
    assert "plain-secret-value-42" not in text and "sk-abc" not in text and "abc.def" not in text
    assert text.count(MASK) == 3
    assert redact("Alice voted for Bob") == "Alice voted for Bob"


def test_a_401_that_echoes_the_key_leaves_no_trace_in_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEAKY_KEY", SECRET)
    with FakeModelServer(latency_s=0.0) as srv:
        srv.push_faults(["401"])
        pool = BackendPool(endpoints={
            "leaky": EndpointConfig("leaky", "openai", base_url=srv.base_url_openai, api_key_env="LEAKY_KEY"),
        })
        spec = GameSpec.build("leak", "mini-mafia", {}, 1, {"default": "leaky/m"},
                              models={"leaky/m": ModelSettings(max_attempts=1)})
        # The fake's 401 body says which key was refused, as real providers do (masked or not).
        srv.error_message = f"Incorrect API key provided: {SECRET}"
        record = asyncio.run(play_game(spec, pool))
    assert record.outcome["status"] == "failed" and record.error and "auth" in record.error
    assert SECRET not in record.to_json() and "sk-proj" not in record.to_json()
