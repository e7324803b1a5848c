"""The one async interface every model provider implements.

An agent never imports an SDK: it builds `Message`s, calls `Backend.generate`, and gets a `Completion` that carries
everything the game record needs about the call (text, tokens, latency, attempts, error class). Keys never appear
here: a backend reads its key from the environment variable named by its endpoint, and nothing it returns holds it.

Providers register themselves here by kind (`@register_provider("openai")` on the function that makes a backend);
`registry` turns `provider/model` specs into backends through them. This module imports no provider: the built-in
ones are imported by name on first use (`PROVIDER_MODULES`), others are found through the `mafiabench.backends`
entry-point group (name = kind, value = the module that registers it).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Literal, Protocol, runtime_checkable

from mafiabench.errors import UserError
from mafiabench.redact import secret_env

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    """One chat message. `cache_prefix_chars` marks where the part shared with earlier prompts ends.

    Providers with explicit prompt caching (Anthropic) put a cache breakpoint there; others ignore it.
    """

    role: Role
    content: str
    cache_prefix_chars: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.cache_prefix_chars is not None:
            d["cache_prefix_chars"] = self.cache_prefix_chars
        return d


@dataclass(frozen=True)
class GenerateSettings:
    """Per-call settings; every field is recorded with the call (so a study can be re-run exactly)."""

    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = 60.0
    max_attempts: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    reasoning_effort: str | None = None
    seed: int | None = None
    # Distinguishes otherwise identical requests (game id + decision) for the record/replay cache and for the fake
    # provider's deterministic answers; never sent to a provider.
    replay_key: str | None = None
    # Structured output (OpenAI's `response_format` body, e.g. {"type": "json_object"}); None asks for plain text.
    # Providers without it ignore it (the prompt asks for the format in words too).
    response_format: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout_s,
            "max_attempts": self.max_attempts,
            "reasoning_effort": self.reasoning_effort,
            "seed": self.seed,
        }
        if self.response_format is not None:  # only where asked: earlier records stay as they were
            out["response_format"] = self.response_format
        return out


@dataclass
class Completion:
    """What a call produced. `attempts` counts tries including retries; `error_class` is the last transient error
    seen (None if the first try succeeded)."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 1
    error_class: str | None = None
    finish_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


class BackendError(Exception):
    """A call that failed for good (retries exhausted or a non-retryable error). The game that made it fails."""

    def __init__(self, message: str, *, error_class: str, attempts: int) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.attempts = attempts


class TransientError(Exception):
    """A failure worth retrying (HTTP 429/5xx, timeout, connection reset). `retry_after_s` honours the server."""

    def __init__(self, message: str, *, error_class: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.retry_after_s = retry_after_s


class ConfigError(UserError, ValueError):
    """Bad configuration found before any model is called (unknown provider, missing key, bad field)."""


@runtime_checkable
class Backend(Protocol):
    """A model behind a `provider/model` spec."""

    provider: str
    model: str

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion: ...


# --- endpoints and providers --------------------------------------------------------------------------------------

# Built-in provider kinds and the module that registers each; third-party kinds come from the entry-point group.
# The offline kinds answer with a fake model that knows the game's prompts, so it lives in `testing`: named here, never
# imported by this package (the backends know no game).
PROVIDER_MODULES: Mapping[str, str] = {
    "openai": "mafiabench.backends.openai_backend",
    "anthropic": "mafiabench.backends.anthropic_backend",
    "fake": "mafiabench.testing.fake_model",
    "scripted": "mafiabench.testing.fake_model",
}
ENTRY_POINT_GROUP = "mafiabench.backends"


@functools.cache
def provider_modules() -> dict[str, str]:
    """Every known provider kind -> the module registering it (built-ins win over an entry point of the same name)."""
    found = {ep.name: ep.value.split(":")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **PROVIDER_MODULES}


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to reach a provider. `key_required=False` is for local servers that accept any key."""

    name: str
    kind: str
    base_url: str | None = None
    api_key_env: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    key_required: bool = True

    def __post_init__(self) -> None:
        kinds = list(provider_modules())
        if self.kind not in kinds:
            raise ConfigError(f"endpoint {self.name!r}: unknown kind {self.kind!r}; expected one of {kinds}")
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
        kinds = list(provider_modules())
        if "kind" not in data:
            raise ConfigError(f"endpoint {name!r}: 'kind' is required (one of {kinds})")
        options = data.get("options", {})
        if not isinstance(options, Mapping):
            raise ConfigError(f"endpoint {name!r}: 'options' must be a table")
        kind = data["kind"]
        if kind not in kinds:
            raise ConfigError(f"endpoint {name!r}: unknown kind {kind!r}; expected one of {kinds}")
        return cls(
            name=name,
            kind=str(kind),
            base_url=data.get("base_url"),
            api_key_env=data.get("api_key_env"),
            options=dict(options),
            key_required=bool(data.get("key_required", True)),
        )


Factory = Callable[[EndpointConfig, str], Backend]
Check = Callable[[EndpointConfig, str, str], None]


def no_check(endpoint: EndpointConfig, model: str, spec: str) -> None:
    """Providers with nothing to validate before a call."""


def require_key(endpoint: EndpointConfig, model: str, spec: str) -> None:
    """HTTP providers: the endpoint's key variable must be set when the endpoint requires a key."""
    if not endpoint.key_required:
        return
    env = endpoint.api_key_env
    if not env:
        raise ConfigError(f"endpoint {endpoint.name!r} requires a key but names no api_key_env")
    if not os.environ.get(env):
        raise ConfigError(
            f"model spec {spec!r} needs an API key: set the environment variable {env} (endpoint {endpoint.name!r})"
        )


@dataclass(frozen=True)
class Provider:
    """A registered provider kind: how to validate a spec without a client, make a backend, close its clients."""

    kind: str
    create: Factory
    check: Check = no_check
    aclose: Callable[[], Awaitable[None]] | None = None


_PROVIDERS: dict[str, Provider] = {}


def register_provider(
    kind: str, *, check: Check = no_check, aclose: Callable[[], Awaitable[None]] | None = None
) -> Callable[[Factory], Factory]:
    """Decorate a provider module's `(endpoint, model) -> Backend` factory to make `kind` usable in endpoints."""

    def decorate(create: Factory) -> Factory:
        _PROVIDERS[kind] = Provider(kind, create, check, aclose)
        return create

    return decorate


def get_provider(kind: str) -> Provider:
    """The provider of `kind`, importing the module that registers it on first use (so unused SDKs stay unloaded)."""
    if kind not in _PROVIDERS:
        module = provider_modules().get(kind)
        if module is None:
            raise ConfigError(f"unknown provider kind {kind!r}; expected one of {list(provider_modules())}")
        importlib.import_module(module)
        if kind not in _PROVIDERS:
            raise ConfigError(f"module {module} does not register provider kind {kind!r}")
    return _PROVIDERS[kind]


def loaded_providers() -> list[Provider]:
    """Providers whose module has been imported (for closing clients without importing anything new)."""
    return list(_PROVIDERS.values())
