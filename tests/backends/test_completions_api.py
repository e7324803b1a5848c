"""`options.api = "completions"` on an OpenAI-compatible endpoint: the prompt goes as one text to `/completions`,
wrapped in the endpoint's `prompt_template`, as the Mini-Mafia reference called its local GGUF models
(bastoscostadavi/llm-mafia-game src/llm_utils.py `Local._generate_standard`: llama-cpp-python `create_completion` of
the [INST]-wrapped prompt). Through the real openai SDK to the project's fake HTTP server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mafiabench.backends.backend import ConfigError, EndpointConfig, GenerateSettings, Message
from mafiabench.backends.endpoints import aclose_clients, check_backend, resolve_backend
from mafiabench.testing import FakeModelServer

TEMPLATE = "[INST]\n{prompt}[/INST]\n"


def endpoint(srv: FakeModelServer, **options: object) -> dict[str, EndpointConfig]:
    return {"local": EndpointConfig("local", "openai", base_url=srv.base_url_openai, key_required=False,
                                    options=dict(options))}


def ask(eps: dict[str, EndpointConfig], prompt: str, **settings: object) -> str:
    async def go() -> str:
        try:
            backend = resolve_backend("local/Mistral-7B-Instruct-v0.2-Q4_K_M.gguf", eps)
            reply = await backend.generate([Message("user", prompt)], GenerateSettings(**settings))  # type: ignore[arg-type]
            return reply.text
        finally:
            await aclose_clients()
    return asyncio.run(go())


def test_a_completions_endpoint_posts_the_wrapped_prompt_as_text() -> None:
    prompt = "#VOTING TIME:\nVote to arrest one player from: Alice, Bob.\nAnswer with just a name:\n"
    with FakeModelServer(seed=2) as srv:
        text = ask(endpoint(srv, api="completions", prompt_template=TEMPLATE), prompt, max_tokens=5, temperature=0.7)
        (request,) = srv.requests
    assert request["path"].endswith("/v1/completions") and request["status"] == 200
    body = request["body"]
    assert body["prompt"] == "[INST]\n" + prompt + "[/INST]\n" and "messages" not in body
    assert body["max_tokens"] == 5 and body["temperature"] == 0.7
    assert text in ("Alice", "Bob") or text.split("\n")[0] in ("Alice", "Bob")


def test_chat_stays_the_default() -> None:
    with FakeModelServer(seed=2) as srv:
        ask(endpoint(srv), "#VOTING TIME:\nVote to arrest one player from: Alice, Bob.\n", max_tokens=5)
        (request,) = srv.requests
    assert request["path"].endswith("/v1/chat/completions") and "messages" in request["body"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"api": "raw"}, "options.api must be one of ['chat', 'completions'], got 'raw'"),
        ({"api": "completions", "prompt_template": "[INST]"}, "options.prompt_template must hold {prompt} once"),
        ({"prompt_template": TEMPLATE}, "options.prompt_template needs options.api = 'completions'"),
    ],
)
def test_bad_options_are_a_clear_error_before_any_call(options: dict[str, object], named: str) -> None:
    eps = {"local": EndpointConfig("local", "openai", base_url="http://127.0.0.1:9/v1", key_required=False,
                                   options=options)}
    with pytest.raises(ConfigError) as err:
        check_backend("local/m", eps)
    assert "endpoint 'local'" in str(err.value) and named in str(err.value)


def test_the_template_is_part_of_the_cache_key_and_of_every_call_record(tmp_path: Path) -> None:
    """Another template is another prompt: a cached answer is not replayed for it; the record says how each call
    went out."""
    from mafiabench.backends.cache import CachingBackend
    from mafiabench.play.runner import BackendPool, GameSpec, play_game

    with FakeModelServer(seed=2) as srv:
        async def twice() -> list[int]:
            try:
                misses = []
                for template in (TEMPLATE, "<s>{prompt}", TEMPLATE):
                    inner = resolve_backend("local/m", endpoint(srv, api="completions", prompt_template=template))
                    cached = CachingBackend(inner, tmp_path / "cache")
                    await cached.generate([Message("user", "Vote: Alice, Bob.")],
                                          GenerateSettings(max_tokens=5, replay_key="g:1"))
                    misses.append(cached.misses)
                return misses
            finally:
                await aclose_clients()

        assert asyncio.run(twice()) == [1, 1, 0]  # the third asks what the first asked: a hit
        spec = GameSpec.build("fmt", "mini-mafia", {"discussion_rounds": 1}, 3, {"default": "local/m"})
        eps = endpoint(srv, api="completions", prompt_template=TEMPLATE)
        record = asyncio.run(play_game(spec, BackendPool(endpoints=eps)))
    assert record.calls and all(c["request"]["format"] == {"api": "completions", "prompt_template": TEMPLATE}
                                for c in record.calls)
