"""The one async interface every model provider implements.

An agent never imports an SDK: it builds `Message`s, calls `Backend.generate`, and gets a `Completion` that carries
everything the game record needs about the call (text, tokens, latency, attempts, error class). Keys never appear
here: a backend reads its key from the environment variable named by its endpoint, and nothing it returns holds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from mafiabench.errors import UserError

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout_s,
            "max_attempts": self.max_attempts,
            "reasoning_effort": self.reasoning_effort,
            "seed": self.seed,
        }


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
