"""Secrets never reach a record: provider errors that echo a key are redacted before they are stored or logged."""

from __future__ import annotations

import asyncio

import pytest

from mafiabench.agents.llm import ModelSettings
from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.redact import MASK, redact
from mafiabench.testing import FakeModelServer

SECRET = "-".join(["sk", "proj", "AbCd1234"])  # a key-shaped placeholder, assembled


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


# Words with a key prefix inside them, joined at run time so no file holds a key-shaped run of characters.
PREFIX_INSIDE_A_WORD = [
    "prefect.task-run.Crashed", "Finished in state prefect.task-run.Completed()",
    "a " + "-".join(["risk", "assessment", "for", "alice"]), "-".join(["monkey", "business", "as", "usual", "today"]),
    "the " + "-".join(["flask", "app", "factory", "pattern"]),
]


@pytest.mark.parametrize("text", PREFIX_INSIDE_A_WORD)
def test_words_that_merely_contain_a_key_prefix_are_left_alone(text: str) -> None:
    """`sk-` and `key-` open a key only at a word's start (issue 31 item 9: `prefect.ta[redacted]`)."""
    assert redact(text) == text


def _shaped(prefix: str, body: str) -> str:
    """A key-shaped test string, assembled here so that no committed line looks like a real credential."""
    return prefix + "-" + body


@pytest.mark.parametrize("text", [
    SECRET, "key sk-abc***wxyz,", "(" + _shaped("sk", "live_0123") + ")", _shaped("key", "0123456789abcdef01"),
    "api_key=" + _shaped("sk", "ant-api03-xyz")])
def test_keys_at_a_word_start_are_still_masked(text: str) -> None:
    assert MASK in redact(text) and "sk-a" not in redact(text) and "0123456789abcdef" not in redact(text)
