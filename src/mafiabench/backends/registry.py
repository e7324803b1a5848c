"""`provider/model` specs to backends, through named endpoints, never by guessing from the model name.

The spec is split on the FIRST "/": `openrouter/meta-llama/llama-3-8b` is endpoint `openrouter`, model
`meta-llama/llama-3-8b`. Endpoints are the built-ins below merged with the user's (same name: the user's wins), so a
study can point `vllm` at another host or add `my-gpu-box` without code. An endpoint names the environment variable
holding its key, never the key itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from mafiabench.redact import secret_env

from .base import Backend, ConfigError

Kind = Literal["openai", "anthropic", "fake", "scripted"]
KINDS: tuple[str, ...] = get_args(Kind)


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to reach a provider. `key_required=False` is for local servers that accept any key."""

    name: str
    kind: Kind
    base_url: str | None = None
    api_key_env: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    key_required: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"endpoint {self.name!r}: unknown kind {self.kind!r}; expected one of {list(KINDS)}")
        if not self.name or "/" in self.name:
            raise ConfigError(f"endpoint name {self.name!r} must be non-empty and contain no '/'")
        secret_env(self.api_key_env)  # its value is scrubbed from everything stored or logged

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> EndpointConfig:
        """From a config table such as `[endpoints.my-box] kind = "openai" base_url = "..." api_key_env = "..."`."""
        allowed = {"kind", "base_url", "api_key_env", "options", "key_required"}
        if "api_key" in data:
            raise ConfigError(
                f"endpoint {name!r}: never put a key in a config file; set an environment variable and name it in "
                "api_key_env"
            )
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConfigError(f"endpoint {name!r}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")
        if "kind" not in data:
            raise ConfigError(f"endpoint {name!r}: 'kind' is required (one of {list(KINDS)})")
        options = data.get("options", {})
        if not isinstance(options, Mapping):
            raise ConfigError(f"endpoint {name!r}: 'options' must be a table")
        kind = data["kind"]
        if kind not in KINDS:
            raise ConfigError(f"endpoint {name!r}: unknown kind {kind!r}; expected one of {list(KINDS)}")
        return cls(
            name=name,
            kind=cast(Kind, kind),
            base_url=data.get("base_url"),
            api_key_env=data.get("api_key_env"),
            options=dict(options),
            key_required=bool(data.get("key_required", True)),
        )


def _compatible(name: str, base_url: str, env: str, *, key_required: bool = True) -> EndpointConfig:
    return EndpointConfig(name, "openai", base_url=base_url, api_key_env=env, key_required=key_required)


BUILTIN_ENDPOINTS: Mapping[str, EndpointConfig] = {
    e.name: e
    for e in (
        EndpointConfig(
            "openai", "openai", api_key_env="OPENAI_API_KEY", options={"max_tokens_field": "max_completion_tokens"}
        ),
        EndpointConfig("anthropic", "anthropic", api_key_env="ANTHROPIC_API_KEY"),
        _compatible("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        _compatible("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        _compatible("xai", "https://api.x.ai/v1", "XAI_API_KEY"),
        _compatible("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
        _compatible("vllm", "http://127.0.0.1:8000/v1", "VLLM_API_KEY", key_required=False),
        _compatible("ollama", "http://127.0.0.1:11434/v1", "OLLAMA_API_KEY", key_required=False),
        _compatible("llamacpp", "http://127.0.0.1:8080/v1", "LLAMACPP_API_KEY", key_required=False),
        EndpointConfig("fake", "fake"),
        EndpointConfig("scripted", "scripted"),
    )
}


def split_spec(spec: str) -> tuple[str, str]:
    """`"provider/model/with/slashes"` -> `("provider", "model/with/slashes")`."""
    provider, sep, model = spec.strip().partition("/")
    if not sep or not provider or not model:
        raise ConfigError(f"model spec {spec!r} must look like 'provider/model' (e.g. 'openai/gpt-4o-mini')")
    return provider, model


def check_backend(spec: str, endpoints: Mapping[str, EndpointConfig] | None = None) -> tuple[EndpointConfig, str]:
    """Validate a spec without creating any client: known endpoint, key present when required.

    Returns the endpoint and the model name. The CLI calls this for every seat before the first model call, so a
    typo fails in a second rather than after an hour of games.
    """
    name, model = split_spec(spec)
    merged = {**BUILTIN_ENDPOINTS, **(endpoints or {})}
    endpoint = merged.get(name)
    if endpoint is None:
        raise ConfigError(
            f"unknown provider {name!r} in model spec {spec!r}; known providers: {', '.join(sorted(merged))} "
            "(add an OpenAI-compatible one under [endpoints] with kind, base_url and api_key_env)"
        )
    if endpoint.kind in ("openai", "anthropic"):
        env = endpoint.api_key_env
        if endpoint.key_required:
            if not env:
                raise ConfigError(f"endpoint {name!r} requires a key but names no api_key_env")
            if not os.environ.get(env):
                raise ConfigError(
                    f"model spec {spec!r} needs an API key: set the environment variable {env} (endpoint {name!r})"
                )
    elif endpoint.kind == "scripted":
        from .scripted import RESPONDERS

        if model not in RESPONDERS:
            raise ConfigError(f"unknown scripted responder {model!r}; known: {', '.join(RESPONDERS)}")
    elif endpoint.kind == "fake":
        from .fake import FakeBackend

        FakeBackend(model, endpoint.options)  # validates options; in-process, no client
    return endpoint, model


def resolve_backend(
    spec: str,
    endpoints: Mapping[str, EndpointConfig] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Backend:
    """The backend for `spec`, optionally behind the record/replay cache. SDKs are imported only when needed."""
    endpoint, model = check_backend(spec, endpoints)
    backend: Backend
    if endpoint.kind == "openai":
        from .openai_backend import OpenAIBackend

        backend = OpenAIBackend(model, endpoint)
    elif endpoint.kind == "anthropic":
        from .anthropic_backend import AnthropicBackend

        backend = AnthropicBackend(model, endpoint)
    elif endpoint.kind == "fake":
        from .fake import FakeBackend

        backend = FakeBackend(model, endpoint.options, provider=endpoint.name)
    else:
        from .scripted import ScriptedBackend

        backend = ScriptedBackend.responder(model)
    if cache_dir is not None:
        from .cache import CachingBackend

        backend = CachingBackend(backend, Path(cache_dir))
    return backend


async def aclose_clients() -> None:
    """Close the SDK clients of the running event loop (call before a shard's loop ends; optional, but it releases
    connections promptly instead of at garbage collection). SDKs never imported are not imported now."""
    import sys

    for module_name in ("mafiabench.backends.openai_backend", "mafiabench.backends.anthropic_backend"):
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for group in module._CLIENTS.pop_current():
            for client in group.clients:
                await client.close()
