"""Whole games through the real openai and anthropic SDKs over HTTP to the local fake server on 127.0.0.1:
the record's calls carry exactly the tokens the server sent, retries are counted, and no key leaks anywhere."""

from __future__ import annotations

import asyncio
import json

import pytest

from mafiabench.agents.llm import ModelSettings
from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.testing import FakeModelServer

SECRET = "-".join(["sk", "test", "SECRET", "42"])  # a key-shaped placeholder, assembled


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LOCAL_OPENAI_KEY", SECRET)
    monkeypatch.setenv("LOCAL_ANTHROPIC_KEY", SECRET)
    with FakeModelServer(latency_s=0.0, hang_s=2.0, seed=1) as srv:
        yield srv


def pool_for(srv: FakeModelServer) -> BackendPool:
    return BackendPool(
        endpoints={
            "oai": EndpointConfig("oai", "openai", base_url=srv.base_url_openai, api_key_env="LOCAL_OPENAI_KEY"),
            "ant": EndpointConfig("ant", "anthropic", base_url=srv.base_url_anthropic,
                                  api_key_env="LOCAL_ANTHROPIC_KEY"),
        }
    )


FAST = ModelSettings(timeout_s=0.5, backoff_base_s=0.01, max_attempts=4)


def test_game_over_both_sdks_records_server_tokens_and_retries(server: FakeModelServer) -> None:
    server.push_faults(["429", "500", "timeout"])
    spec = GameSpec.build(
        "http-1", "mini-mafia", {"discussion_rounds": 1}, 5,
        {"mafioso": "oai/gpt-fake", "detective": "ant/claude-fake", "villager": "oai/gpt-fake"},
        models={"oai/gpt-fake": FAST, "ant/claude-fake": FAST},
    )
    record = asyncio.run(play_game(spec, pool_for(server)))
    assert record.outcome["status"] == "finished", record.error
    assert {c["provider"] for c in record.calls} == {"oai", "ant"}
    # The first three requests failed (429, 500, timeout) and were retried inside calls.
    assert sum(c["attempts"] - 1 for c in record.calls) == 3
    assert "timeout" in {c["error_class"] for c in record.calls}  # the last transient error of the call

    ok = [r for r in server.requests if r["status"] == 200]
    assert len(ok) == len(record.calls)
    by_text: dict[str, list[dict]] = {}
    for r in ok:
        resp = r["response"]
        if r["path"].endswith("/chat/completions"):
            text = resp["choices"][0]["message"]["content"]
            usage = (resp["usage"]["prompt_tokens"], resp["usage"]["completion_tokens"],
                     resp["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0))
        else:
            u = resp["usage"]
            text = resp["content"][0]["text"]
            usage = (u["input_tokens"] + u.get("cache_read_input_tokens", 0) + u.get("cache_creation_input_tokens", 0),
                     u["output_tokens"], u.get("cache_read_input_tokens", 0))
        by_text.setdefault(text, []).append({"usage": usage})
    for call in record.calls:
        sent = [x["usage"] for x in by_text[call["response"]]]
        assert (call["input_tokens"], call["output_tokens"], call["cached_tokens"]) in sent

    # Anthropic calls mark the shared prompt prefix for caching.
    anthropic_bodies = [r["body"] for r in server.requests if r["path"].endswith("/messages")]
    assert any(
        isinstance(m["content"], list) and m["content"][0].get("cache_control")
        for b in anthropic_bodies for m in b["messages"]
    )

    # The key never reaches the record, and the server saw it only as an auth header.
    assert SECRET not in record.to_json()
    assert SECRET not in json.dumps(server.requests)
    assert all(r["had_auth"] for r in server.requests)


def test_exhausted_retries_make_a_failed_game_with_its_calls(server: FakeModelServer) -> None:
    server.set_rates(**{"500": 1.0})
    spec = GameSpec.build("http-2", "mini-mafia", {}, 1, {"default": "oai/gpt-fake"},
                          models={"oai/gpt-fake": ModelSettings(backoff_base_s=0.001, max_attempts=2)})
    record = asyncio.run(play_game(spec, pool_for(server)))
    assert record.outcome["status"] == "failed" and record.outcome["winner"] is None
    assert record.error and "server_error" in record.error
    assert record.calls and record.calls[-1]["error_class"] == "server_error" and record.calls[-1]["attempts"] == 2
