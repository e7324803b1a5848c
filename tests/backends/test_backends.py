"""Backends end to end: the real OpenAI and Anthropic SDKs over real HTTP to the local fake server, plus the
registry, the in-process fake and scripted providers, and the record/replay cache."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from mafiabench.backends import (
    BUILTIN_ENDPOINTS,
    Backend,
    BackendError,
    CachingBackend,
    Completion,
    ConfigError,
    EndpointConfig,
    FakeBackend,
    GenerateSettings,
    Message,
    ScriptedBackend,
    aclose_clients,
    check_backend,
    resolve_backend,
)
from mafiabench.backends.anthropic_backend import AnthropicBackend
from mafiabench.backends.openai_backend import OpenAIBackend
from mafiabench.testing import FakeModelServer, Fault

SECRET = "-".join(["sk", "test", "SECRET123"])  # a key-shaped placeholder, assembled: no key-like literal
KEY_ENV = "MAFIABENCH_TEST_KEY"
NAMES = {"Alice", "Bob", "Carol"}
FAST = GenerateSettings(max_attempts=3, backoff_base_s=0.001, backoff_max_s=0.01, timeout_s=5.0)
VOTE = [
    Message("system", "You are playing Mafia."),
    Message("user", "Your name is Dave.\nVote to arrest one player from: Alice, Bob, Carol; reply with just a name"),
]
PROVIDERS = ["srv-openai", "srv-anthropic"]


@pytest.fixture
def srv(fake_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    fake_server.clear()
    monkeypatch.setenv(KEY_ENV, SECRET)
    return fake_server


@pytest.fixture
def endpoints(srv: FakeModelServer) -> dict[str, EndpointConfig]:
    return {
        "srv-openai": EndpointConfig("srv-openai", "openai", base_url=srv.base_url_openai, api_key_env=KEY_ENV),
        "srv-anthropic": EndpointConfig(
            "srv-anthropic", "anthropic", base_url=srv.base_url_anthropic, api_key_env=KEY_ENV
        ),
    }


def generate(backend: Backend, messages: Sequence[Message] = VOTE, settings: GenerateSettings = FAST) -> Completion:
    async def go() -> Completion:
        try:
            return await backend.generate(messages, settings)
        finally:
            await aclose_clients()

    return asyncio.run(go())


def generate_error(backend: Backend, settings: GenerateSettings = FAST) -> BackendError:
    with pytest.raises(BackendError) as info:
        generate(backend, VOTE, settings)
    return info.value


# --- OpenAI and Anthropic over HTTP ---------------------------------------------------------------------------


def test_openai_success_token_counts_and_request(srv: FakeModelServer, endpoints: dict[str, EndpointConfig]) -> None:
    backend = resolve_backend("srv-openai/gpt-test", endpoints)
    assert isinstance(backend, OpenAIBackend) and backend.model == "gpt-test"
    shared = "rules " * 400
    first = [Message("user", shared + "memory 1\n" + VOTE[1].content)]
    second = [Message("user", shared + "memory 2\n" + VOTE[1].content)]
    settings = GenerateSettings(temperature=0.7, max_tokens=5, seed=3, reasoning_effort="low", replay_key="g1:v")
    generate(backend, first, settings)
    c = generate(backend, second, settings)
    sent = srv.requests[-1]
    usage = sent["response"]["usage"]
    assert (c.input_tokens, c.output_tokens, c.cached_tokens) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
        usage["prompt_tokens_details"]["cached_tokens"],
    )
    assert c.cached_tokens > 0
    assert c.text.split("\n")[0] in NAMES and c.attempts == 1 and c.error_class is None
    assert c.finish_reason == "stop" and c.latency_ms > 0
    assert c.raw["usage"] == usage and c.raw["choices"][0]["message"]["content"] == c.text
    body = sent["body"]
    assert body["model"] == "gpt-test"
    assert body["messages"] == [{"role": "user", "content": second[0].content}]
    assert (body["temperature"], body["max_tokens"], body["seed"], body["reasoning_effort"]) == (0.7, 5, 3, "low")
    assert "replay_key" not in json.dumps(body)  # never sent to a provider
    assert sent["had_auth"] is True


def test_openai_builtin_uses_max_completion_tokens() -> None:
    backend = OpenAIBackend("o4", BUILTIN_ENDPOINTS["openai"])
    kwargs = backend.request_kwargs(VOTE, GenerateSettings(max_tokens=50))
    assert kwargs["max_completion_tokens"] == 50 and "max_tokens" not in kwargs
    assert "temperature" not in kwargs and "seed" not in kwargs  # unset settings keep provider defaults


def test_anthropic_success_token_counts_and_cache_control(
    srv: FakeModelServer, endpoints: dict[str, EndpointConfig]
) -> None:
    backend = resolve_backend("srv-anthropic/claude-test", endpoints)
    assert isinstance(backend, AnthropicBackend)
    shared = "rules " * 400
    msgs = [
        Message("system", "You are playing Mafia."),
        Message("user", shared + "memory 1\n" + VOTE[1].content, cache_prefix_chars=len(shared)),
    ]
    generate(backend, msgs)
    msgs[1] = Message("user", shared + "memory 2\n" + VOTE[1].content, cache_prefix_chars=len(shared))
    c = generate(backend, msgs, GenerateSettings(temperature=0.0, reasoning_effort="high"))
    sent = srv.requests[-1]
    usage = sent["response"]["usage"]
    assert c.output_tokens == usage["output_tokens"]
    assert c.cached_tokens == usage["cache_read_input_tokens"] > 0
    # one convention for every provider: input_tokens is the whole prompt, cached included
    assert c.input_tokens == (
        usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    )
    assert c.text.split("\n")[0] in NAMES and c.finish_reason == "end_turn"
    body = sent["body"]
    assert body["system"] == "You are playing Mafia."
    assert body["max_tokens"] == 1024  # required by Anthropic; our default when unset
    assert body["temperature"] == 0.0 and body["output_config"] == {"effort": "high"}
    blocks = body["messages"][0]["content"]
    assert blocks[0] == {"type": "text", "text": shared, "cache_control": {"type": "ephemeral"}}
    assert blocks[1] == {"type": "text", "text": "memory 2\n" + VOTE[1].content}
    assert sent["had_auth"] is True
    assert c.raw == sent["response"]  # what the server sent, read once (no SDK model, no defaults added)


def test_anthropic_request_building_edges() -> None:
    backend = AnthropicBackend("c", BUILTIN_ENDPOINTS["anthropic"])
    whole = backend.request_kwargs([Message("user", "abc", cache_prefix_chars=10)], GenerateSettings())
    assert whole["messages"][0]["content"] == [{"type": "text", "text": "abc", "cache_control": {"type": "ephemeral"}}]
    plain = backend.request_kwargs(
        [Message("system", "s1"), Message("user", "u"), Message("system", "s2")], GenerateSettings(max_tokens=7)
    )
    assert plain["system"] == "s1" and plain["max_tokens"] == 7
    assert plain["messages"] == [{"role": "user", "content": "u"}, {"role": "user", "content": "s2"}]
    assert "extra_body" not in plain and "output_config" not in plain
    many = [Message("user" if i % 2 == 0 else "assistant", f"turn {i}", cache_prefix_chars=3) for i in range(7)]
    sent = backend.request_kwargs(many, GenerateSettings())["messages"]
    marked = [i for i, m in enumerate(sent) if isinstance(m["content"], list)]
    assert marked == [3, 4, 5, 6]  # at most four breakpoints: the latest, longest prefixes


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("fault", "error_class"),
    [("429", "rate_limit"), ("500", "server_error"), ("529", "overloaded"), ("disconnect", "connection")],
)
def test_transient_then_success(
    srv: FakeModelServer, endpoints: dict[str, EndpointConfig], provider: str, fault: str, error_class: str
) -> None:
    srv.push_faults([fault])
    c = generate(resolve_backend(f"{provider}/m", endpoints))
    assert (c.attempts, c.error_class) == (2, error_class)
    assert c.text.split("\n")[0] in NAMES
    assert len(srv.requests) == 2  # exactly one retry: the SDK's own retries are off


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_both_transports_send_and_classify_faults_alike(
    srv: FakeModelServer, endpoints: dict[str, EndpointConfig], provider: str, transport: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDK's aiohttp transport (the default) and its httpx one: same answers, and a dropped or refused
    connection is a "connection" error naming the URL, a hung request a "timeout" (the SDKs' aiohttp adapter
    reports all three as timeouts; `dropped_connection` tells them apart)."""
    ep = replace(endpoints[provider], options={"transport": transport})
    backend = resolve_backend(f"{provider}/m", {provider: ep})
    # Timed by events, not by the machine's speed: an answer has all the time a loaded machine needs, and a hung
    # request hangs far longer than the client waits for it.
    settings = GenerateSettings(timeout_s=60.0, max_attempts=2, backoff_base_s=0.001, backoff_max_s=0.01)
    hung = replace(settings, timeout_s=0.3)
    monkeypatch.setattr(srv, "hang_s", 120.0)

    async def call() -> tuple[Completion, str]:
        try:
            c = await backend.generate(VOTE, settings)
            http_client = backend._clients().clients[0]._client  # type: ignore[attr-defined]
            return c, type(http_client).__name__
        finally:
            await aclose_clients()

    c, client_class = asyncio.run(call())
    assert c.text.split("\n")[0] in NAMES and c.attempts == 1
    assert ("Aio" in client_class) == (transport == "aiohttp"), client_class
    srv.push_faults(["disconnect"])
    assert generate(backend, settings=settings).error_class == "connection"
    srv.push_faults(["timeout"])
    assert generate(backend, settings=hung).error_class == "timeout"
    with socket.socket() as s:  # a port nobody listens on: the endpoint is down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("/v1" if provider == "srv-openai" else "")
    down = resolve_backend(f"{provider}/m", {provider: replace(ep, base_url=base)})
    err = generate_error(down, settings)
    assert err.error_class == "connection" and f"127.0.0.1:{port}" in str(err)


def test_transport_option_validated() -> None:
    ep = EndpointConfig("box", "openai", base_url="http://127.0.0.1:9/v1", key_required=False,
                        options={"transport": "curl"})
    with pytest.raises(ConfigError, match=r"box.*transport.*'curl'"):
        resolve_backend("box/m", {"box": ep})


@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeout_then_success(srv: FakeModelServer, endpoints: dict[str, EndpointConfig], provider: str) -> None:
    srv.push_faults(["timeout"])
    settings = GenerateSettings(timeout_s=0.3, max_attempts=3, backoff_base_s=0.001, backoff_max_s=0.01)
    c = generate(resolve_backend(f"{provider}/m", endpoints), settings=settings)
    assert (c.attempts, c.error_class) == (2, "timeout")
    assert c.latency_ms >= 300  # the whole call, retries included


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bad_json_is_retried(srv: FakeModelServer, endpoints: dict[str, EndpointConfig], provider: str) -> None:
    srv.push_faults(["bad_json"])
    c = generate(resolve_backend(f"{provider}/m", endpoints))
    assert (c.attempts, c.error_class) == (2, "bad_response")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_exhausted(srv: FakeModelServer, endpoints: dict[str, EndpointConfig], provider: str) -> None:
    srv.push_faults(["500"] * 10)
    err = generate_error(resolve_backend(f"{provider}/m", endpoints))
    assert (err.attempts, err.error_class) == (FAST.max_attempts, "server_error")
    assert len(srv.requests) == FAST.max_attempts


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("fault", "error_class"), [("400", "bad_request"), ("401", "auth")])
def test_client_errors_not_retried(
    srv: FakeModelServer, endpoints: dict[str, EndpointConfig], provider: str, fault: str, error_class: str
) -> None:
    srv.push_faults([fault])
    err = generate_error(resolve_backend(f"{provider}/m", endpoints))
    assert (err.attempts, err.error_class) == (1, error_class)
    assert len(srv.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retry_after_header_honoured(srv: FakeModelServer, endpoints: dict[str, EndpointConfig], provider: str) -> None:
    srv.push_faults([Fault("429", retry_after_s=0.3)])
    settings = GenerateSettings(max_attempts=2, backoff_base_s=0.0, backoff_max_s=5.0)
    c = generate(resolve_backend(f"{provider}/m", endpoints), settings=settings)
    assert c.attempts == 2 and c.latency_ms >= 290


def test_no_key_reaches_requests_completions_or_errors(
    srv: FakeModelServer, endpoints: dict[str, EndpointConfig]
) -> None:
    seen: list[str] = []
    for provider in PROVIDERS:
        backend = resolve_backend(f"{provider}/m", endpoints)
        srv.push_faults(["429"])
        seen.append(json.dumps(asdict(generate(backend))))
        srv.push_faults(["400"])
        err = generate_error(backend)
        seen.append(f"{err} {err!r} {err.__cause__!r} {err.__cause__.__cause__ if err.__cause__ else ''!r}")
        seen.append(repr(vars(backend)))
    seen.append(json.dumps(srv.requests))
    assert all(r["had_auth"] for r in srv.requests)  # the key was sent...
    blob = "\n".join(seen)
    assert SECRET not in blob and "SECRET123" not in blob  # ...and never came back anywhere


def test_one_client_per_event_loop(srv: FakeModelServer, endpoints: dict[str, EndpointConfig]) -> None:
    a = resolve_backend("srv-openai/m1", endpoints)
    b = resolve_backend("srv-openai/m2", endpoints)
    assert isinstance(a, OpenAIBackend) and isinstance(b, OpenAIBackend)

    async def clients() -> tuple[object, object]:
        await asyncio.gather(a.generate(VOTE, FAST), b.generate(VOTE, FAST))
        ca, cb = a._clients(), b._clients()
        await aclose_clients()
        return ca, cb

    ca, cb = asyncio.run(clients())
    cc, _ = asyncio.run(clients())
    assert ca is cb  # games on one loop share a client group
    assert cc is not ca  # a new loop gets its own


def test_client_group_keeps_pools_small() -> None:
    from mafiabench.backends.retry import ClientGroup

    made: list[object] = []
    group: ClientGroup[object] = ClientGroup(lambda: made.append(object()) or made[-1], per_client=2)
    with group.lease() as a1, group.lease() as a2, group.lease() as b1:
        assert a1 is not b1 and len(made) == 2  # a third concurrent request opens a second client
        assert {a1, a2, b1} == set(made)
    with group.lease() as again:
        assert again in made and len(made) == 2  # idle clients are reused


# --- registry ---------------------------------------------------------------------------------------------------


def test_unknown_provider_lists_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_backend("nosuch/model")
    msg = str(info.value)
    assert "nosuch" in msg
    for name in ("openai", "anthropic", "openrouter", "vllm", "ollama", "llamacpp", "fake", "scripted"):
        assert name in msg


def test_missing_key_names_variable_not_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # a key elsewhere must not leak into the message
    for check in (check_backend, resolve_backend):
        with pytest.raises(ConfigError) as info:
            check("openrouter/meta-llama/llama-3-8b")
        assert "OPENROUTER_API_KEY" in str(info.value) and SECRET not in str(info.value)


def test_model_with_slashes_and_no_substring_guessing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend = resolve_backend("openrouter/meta-llama/llama-3-8b")
    assert isinstance(backend, OpenAIBackend)
    assert (backend.provider, backend.model) == ("openrouter", "meta-llama/llama-3-8b")
    assert backend.endpoint.base_url == "https://openrouter.ai/api/v1"
    assert isinstance(resolve_backend("fake/gpt-4o"), FakeBackend)  # the name says gpt; the provider decides
    openai_claude = resolve_backend("openai/claude-3-opus")
    assert isinstance(openai_claude, OpenAIBackend) and openai_claude.model == "claude-3-opus"
    assert check_backend("openrouter/a/b/c")[1] == "a/b/c"


@pytest.mark.parametrize("spec", ["", "openai", "openai/", "/gpt-4o", "  "])
def test_malformed_specs(spec: str) -> None:
    with pytest.raises(ConfigError, match="provider/model"):
        check_backend(spec)


def test_local_servers_need_no_key_and_user_endpoints_override(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in ("VLLM_API_KEY", "OLLAMA_API_KEY", "LLAMACPP_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    for name, url in [
        ("vllm", "http://127.0.0.1:8000/v1"),
        ("ollama", "http://127.0.0.1:11434/v1"),
        ("llamacpp", "http://127.0.0.1:8080/v1"),
    ]:
        endpoint, model = check_backend(f"{name}/qwen/qwen3-8b")
        assert (endpoint.base_url, model) == (url, "qwen/qwen3-8b")
    mine = {"vllm": EndpointConfig("vllm", "openai", base_url="http://gpu-box:9000/v1", key_required=False)}
    backend = resolve_backend("vllm/m", mine)
    assert isinstance(backend, OpenAIBackend) and backend.endpoint.base_url == "http://gpu-box:9000/v1"


def test_check_backend_creates_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    from mafiabench.backends import anthropic_backend

    before = len(anthropic_backend._CLIENTS)
    endpoint, model = check_backend("anthropic/claude-x")
    assert (endpoint.kind, model) == ("anthropic", "claude-x")
    assert len(anthropic_backend._CLIENTS) == before


def test_a_provider_registers_itself_through_an_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party package adds a provider kind with an entry point and a decorator; no registry edit."""
    from mafiabench.backends import backend as base

    (tmp_path / "echo_provider.py").write_text(
        "from mafiabench.backends.backend import register_provider\n"
        "from mafiabench.backends.scripted_backend import ScriptedBackend\n"
        "@register_provider('echo')\n"
        "def create(endpoint, model):\n"
        "    return ScriptedBackend(lambda messages: messages[-1].content, model=model)\n"
    )
    dist = tmp_path / "echo_provider-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-provider\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[mafiabench.backends]\necho = echo_provider\n")
    with pytest.raises(ConfigError, match="unknown kind 'echo'"):
        EndpointConfig.from_dict("parrot", {"kind": "echo"})
    monkeypatch.syspath_prepend(str(tmp_path))
    base.provider_modules.cache_clear()
    try:
        endpoints = {"parrot": EndpointConfig.from_dict("parrot", {"kind": "echo"})}
        backend = resolve_backend("parrot/any", endpoints)
        assert backend.model == "any" and "echo" in [p.kind for p in base.loaded_providers()]
    finally:
        monkeypatch.undo()
        base.provider_modules.cache_clear()
        base._PROVIDERS.pop("echo", None)


def test_endpoint_from_dict() -> None:
    ep = EndpointConfig.from_dict("box", {"kind": "openai", "base_url": "http://h/v1", "api_key_env": "BOX_KEY"})
    assert (ep.name, ep.kind, ep.base_url, ep.api_key_env, ep.key_required) == (
        "box",
        "openai",
        "http://h/v1",
        "BOX_KEY",
        True,
    )
    with pytest.raises(ConfigError, match="api_key_env"):
        EndpointConfig.from_dict("box", {"kind": "openai", "api_key": "sk-oops"})
    with pytest.raises(ConfigError, match="unknown kind"):
        EndpointConfig.from_dict("box", {"kind": "gemini"})
    with pytest.raises(ConfigError, match="unknown field"):
        EndpointConfig.from_dict("box", {"kind": "openai", "url": "x"})
    with pytest.raises(ConfigError, match="no '/'"):
        EndpointConfig("a/b", "fake")


# --- fake and scripted providers (the fault wrapper here; the game-aware answers in test_fake_model.py) -----------


def test_fake_backend_is_deterministic() -> None:
    backend = resolve_backend("fake/model-a")
    s1 = GenerateSettings(replay_key="game-1:vote:Dave")
    first = generate(backend, VOTE, s1)
    assert generate(resolve_backend("fake/model-a"), VOTE, s1).text == first.text
    assert first.text.split("\n")[0] in NAMES
    answers = {generate(backend, VOTE, GenerateSettings(replay_key=f"game-{i}")).text.split("\n")[0] for i in range(30)}
    assert answers == NAMES  # different games answer differently, always from the choices
    assert first.input_tokens == len("".join(m.content for m in VOTE)) // 4 + 1
    assert first.output_tokens == len(first.text) // 4 + 1


def constant(messages: Sequence[Message], replay_key: str | None) -> str:
    """An answerer that knows no game: the fault wrapper needs nothing more."""
    return "Bob"


def test_fake_fault_rates_roughly_honoured() -> None:
    options = {"p_rate_limit": 0.2, "p_server_error": 0.1, "p_empty": 0.1, "p_malformed": 0.05, "seed": 7}
    backend = FakeBackend("m", options, constant)
    settings = [GenerateSettings(max_attempts=1, replay_key=f"k{i}") for i in range(2000)]

    async def run_all() -> list[Completion | BackendError]:
        async def one(s: GenerateSettings) -> Completion | BackendError:
            try:
                return await backend.generate(VOTE, s)
            except BackendError as exc:
                return exc

        return await asyncio.gather(*(one(s) for s in settings))

    results = asyncio.run(run_all())
    errors = [r for r in results if isinstance(r, BackendError)]
    ok = [r for r in results if isinstance(r, Completion)]
    rate_limited = sum(e.error_class == "rate_limit" for e in errors) / len(results)
    server = sum(e.error_class == "server_error" for e in errors) / len(results)
    assert 0.17 < rate_limited < 0.23 and 0.08 < server < 0.12
    empty = sum(c.text == "" for c in ok) / len(ok)
    malformed = sum(c.text.split("\n")[0] not in NAMES and c.text != "" for c in ok) / len(ok)
    assert 0.07 < empty < 0.13 and 0.03 < malformed < 0.07
    again = asyncio.run(run_all())  # reproducible: same seed, same outcomes
    assert [r.text if isinstance(r, Completion) else r.error_class for r in again] == [
        r.text if isinstance(r, Completion) else r.error_class for r in results
    ]


def test_fake_faults_go_through_retries_and_latency() -> None:
    backend = FakeBackend("m", {"p_rate_limit": 0.5, "latency_ms": 20, "seed": 1}, constant)
    completions = [
        generate(backend, VOTE, GenerateSettings(max_attempts=10, backoff_base_s=0.0, replay_key=str(i)))
        for i in range(10)
    ]
    assert any(c.attempts > 1 and c.error_class == "rate_limit" for c in completions)
    assert all(c.latency_ms >= 20 * c.attempts for c in completions)


def test_fake_endpoint_options_validated() -> None:
    with pytest.raises(ConfigError, match="unknown fake endpoint option"):
        check_backend("flaky/m", {"flaky": EndpointConfig("flaky", "fake", options={"p_oops": 0.1})})
    with pytest.raises(ConfigError, match="probability"):
        FakeBackend("m", {"p_timeout": 2}, constant)
    flaky = resolve_backend("flaky/m", {"flaky": EndpointConfig("flaky", "fake", options={"p_timeout": 1.0})})
    assert flaky.provider == "flaky"
    assert generate_error(flaky).error_class == "timeout"


# --- scripted provider and cache ---------------------------------------------------------------------------------


def test_scripted_queue_callable_and_naive() -> None:
    queued = ScriptedBackend(['"Hello"', "Bob"])
    assert [generate(queued).text for _ in range(2)] == ['"Hello"', "Bob"]
    with pytest.raises(BackendError, match="ran out of answers") as info:
        generate(queued)
    assert info.value.error_class == "script_exhausted"
    echo = ScriptedBackend(lambda messages: messages[-1].content[:5])
    c = generate(echo)
    assert c.text == VOTE[-1].content[:5] and c.latency_ms == 0.0 and c.attempts == 1
    naive = resolve_backend("scripted/naive")
    assert isinstance(naive, ScriptedBackend) and generate(naive).text.split("\n")[0] in NAMES
    with pytest.raises(ConfigError, match="naive"):
        resolve_backend("scripted/genius")


class Counting:
    provider = "counting"
    model = "m"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        self.calls += 1
        return Completion(text=f"answer {self.calls}", input_tokens=10, output_tokens=2, latency_ms=123.0, attempts=2)


def test_cache_hit_skips_inner(tmp_path: Path) -> None:
    inner = Counting()
    cached = CachingBackend(inner, tmp_path / "cache")
    s = GenerateSettings(replay_key="g1:d1")
    miss = generate(cached, VOTE, s)
    hit = generate(cached, VOTE, s)
    assert inner.calls == 1 and (cached.hits, cached.misses) == (1, 1)
    assert hit.text == miss.text == "answer 1" and hit.input_tokens == 10 and hit.attempts == 2
    assert hit.latency_ms == 0.0 and hit.raw["cache"] == "hit" and miss.raw["cache"] == "miss"
    assert generate(cached, VOTE, GenerateSettings(replay_key="g2:d1")).text == "answer 2"  # other game: miss
    assert generate(cached, VOTE, GenerateSettings(replay_key="g1:d1", temperature=0.5)).text == "answer 3"
    files = list((tmp_path / "cache").rglob("*"))
    assert not [f for f in files if f.name.startswith(".tmp")]  # atomic writes leave no temp files
    entries = [f for f in files if f.is_file()]
    assert len(entries) == 3
    entries[0].write_text("{truncated")  # a corrupt entry is a miss, then rewritten
    reread = CachingBackend(Counting(), tmp_path / "cache")
    for key in ("g1:d1", "g2:d1"):
        generate(reread, VOTE, GenerateSettings(replay_key=key))
    assert reread.misses <= 1


def test_cache_through_registry_with_fake_server(
    srv: FakeModelServer, endpoints: dict[str, EndpointConfig], tmp_path: Path
) -> None:
    backend = resolve_backend("srv-openai/m", endpoints, cache_dir=tmp_path)
    first = generate(backend, VOTE, GenerateSettings(replay_key="r"))
    second = generate(backend, VOTE, GenerateSettings(replay_key="r"))
    assert len(srv.requests) == 1 and second.text == first.text and second.raw["cache"] == "hit"
    assert SECRET not in "".join(p.read_text() for p in tmp_path.rglob("*.json"))


def test_environment_untouched() -> None:
    assert os.environ.get(KEY_ENV) is None  # the monkeypatched key does not outlive its test


def test_sdks_imported_only_when_needed() -> None:
    """Scripted and fake runs, and the CLI's start-up, do not pay about 2 s for importing the SDKs."""
    import subprocess
    import sys

    code = (
        "import sys; from mafiabench.backends import resolve_backend; resolve_backend('fake/m'); "
        "resolve_backend('scripted/naive'); print('openai' in sys.modules, 'anthropic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]
