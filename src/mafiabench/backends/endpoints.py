"""`provider/model` specs to backends, through named endpoints, never by guessing from the model name.

The spec is split on the FIRST "/": `openrouter/meta-llama/llama-3-8b` is endpoint `openrouter`, model
`meta-llama/llama-3-8b`. Endpoints are the built-ins below merged with the user's (same name: the user's wins), so a
study can point `vllm` at another host or add `my-gpu-box` without code. An endpoint names the environment variable
holding its key, never the key itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .backend import Backend, ConfigError, EndpointConfig, get_provider, loaded_providers

__all__ = ["BUILTIN_ENDPOINTS", "EndpointConfig", "aclose_clients", "check_backend", "resolve_backend", "split_spec"]


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
    get_provider(endpoint.kind).check(endpoint, model, spec)
    return endpoint, model


def resolve_backend(
    spec: str,
    endpoints: Mapping[str, EndpointConfig] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Backend:
    """The backend for `spec`, optionally behind the record/replay cache. SDKs are imported only when needed."""
    endpoint, model = check_backend(spec, endpoints)
    backend: Backend = get_provider(endpoint.kind).create(endpoint, model)
    if cache_dir is not None:
        from .cache import CachingBackend

        backend = CachingBackend(backend, Path(cache_dir))
    return backend


async def aclose_clients() -> None:
    """Close the SDK clients of the running event loop (call before a shard's loop ends; optional, but it releases
    connections promptly instead of at garbage collection). Providers never used are not imported now."""
    for provider in loaded_providers():
        if provider.aclose is not None:
            await provider.aclose()
