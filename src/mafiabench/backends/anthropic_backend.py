"""Anthropic's Messages API, with explicit prompt caching at each message's `cache_prefix_chars`.

Token accounting follows the OpenAI convention so that cost metrics need no per-provider branch:
`Completion.input_tokens` is the *whole* prompt (Anthropic's `input_tokens` + `cache_read_input_tokens` +
`cache_creation_input_tokens`, which Anthropic reports separately) and `cached_tokens` is `cache_read_input_tokens`.
The raw usage block stays in `Completion.raw`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

import anthropic

from mafiabench.redact import secret_value, short_error

from .base import (
    BackendError,
    Completion,
    ConfigError,
    EndpointConfig,
    GenerateSettings,
    Message,
    TransientError,
    register_provider,
    require_key,
)
from .retry import ClientGroup, LoopLocal, call_with_retries, status_exception

# Sent to servers that accept any key (`key_required = false`); never a secret.
PLACEHOLDER_KEY = "not-needed"
_CLIENTS: LoopLocal[ClientGroup[anthropic.AsyncAnthropic]] = LoopLocal()
DEFAULT_MAX_TOKENS = 1024
# Anthropic accepts at most four cache breakpoints per request; the last ones cover the longest prefixes.
MAX_CACHE_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}


def _url(exc: Exception) -> str:
    request = getattr(exc, "request", None)
    return str(getattr(request, "url", "") or "the endpoint")


def map_anthropic_error(exc: Exception) -> Exception:
    """An SDK exception as the `TransientError`/`BackendError` our retry loop understands."""
    if isinstance(exc, anthropic.APITimeoutError):
        return TransientError("request timed out", error_class="timeout")
    if isinstance(exc, anthropic.APIConnectionError):  # name the URL: "endpoint down" must say which endpoint
        return TransientError(f"cannot reach {_url(exc)}: {short_error(exc)}", error_class="connection")
    if isinstance(exc, anthropic.APIStatusError):
        return status_exception(
            exc.status_code, f"HTTP {exc.status_code}: {short_error(exc.message)}", exc.response.headers
        )
    if isinstance(exc, anthropic.APIResponseValidationError):
        return TransientError(f"malformed response: {short_error(exc)}", error_class="bad_response")
    return BackendError(f"{type(exc).__name__}: {short_error(exc)}", error_class="internal", attempts=1)


def _content(message: Message, cached: bool) -> str | list[dict[str, Any]]:
    """Plain text, or two text blocks split at the shared prefix with a cache breakpoint on the first.

    Empty text blocks are rejected by the API, so a prefix covering the whole text becomes one cached block.
    """
    text = message.content
    cut = message.cache_prefix_chars
    if not cached or cut is None or cut <= 0 or not text:
        return text
    if cut >= len(text):
        return [{"type": "text", "text": text, "cache_control": dict(_EPHEMERAL)}]
    return [
        {"type": "text", "text": text[:cut], "cache_control": dict(_EPHEMERAL)},
        {"type": "text", "text": text[cut:]},
    ]


def build_request(messages: Sequence[Message]) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """(system, messages) for the Messages API. The first system message becomes `system`; later ones (the API
    has no such role) are sent as user turns so no instruction is lost."""
    system_index = next((i for i, m in enumerate(messages) if m.role == "system"), None)
    marked = [i for i, m in enumerate(messages) if m.cache_prefix_chars is not None and m.cache_prefix_chars > 0][
        -MAX_CACHE_BREAKPOINTS:
    ]
    system: str | list[dict[str, Any]] | None = None
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        content = _content(m, i in marked)
        if i == system_index:
            system = content
            continue
        role = "assistant" if m.role == "assistant" else "user"
        out.append({"role": role, "content": content})
    return system, out


class AnthropicBackend:
    """Messages through `anthropic.AsyncAnthropic` (SDK retries off; `call_with_retries` counts attempts)."""

    def __init__(self, model: str, endpoint: EndpointConfig) -> None:
        self.provider = endpoint.name
        self.model = model
        self.endpoint = endpoint

    def _api_key(self) -> str:
        env = self.endpoint.api_key_env
        key = os.environ.get(env) if env else None
        if key:
            secret_value(key)  # sent as a credential: scrubbed wherever text is stored or logged
            return key
        if self.endpoint.key_required:  # as `check_backend` decides: a local proxy may need none
            raise ConfigError(f"endpoint {self.endpoint.name!r} needs an API key in ${env}, which is not set")
        return PLACEHOLDER_KEY

    def _clients(self) -> ClientGroup[anthropic.AsyncAnthropic]:
        ep = self.endpoint
        return _CLIENTS.get(
            (ep.name, ep.base_url, ep.api_key_env),
            lambda: ClientGroup(
                lambda: anthropic.AsyncAnthropic(api_key=self._api_key(), base_url=ep.base_url, max_retries=0)
            ),
        )

    def request_kwargs(self, messages: Sequence[Message], settings: GenerateSettings) -> dict[str, Any]:
        system, body = build_request(messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": body,
            "max_tokens": settings.max_tokens if settings.max_tokens is not None else DEFAULT_MAX_TOKENS,
        }
        if system is not None:
            kwargs["system"] = system
        if settings.reasoning_effort is not None:
            kwargs["output_config"] = {"effort": settings.reasoning_effort}
        if settings.temperature is not None:
            # anthropic 2.x no longer types `temperature` on messages.create; the API still accepts it.
            kwargs["extra_body"] = {"temperature": settings.temperature}
        return kwargs

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        with self._clients().lease() as client:
            return await self._generate(client, messages, settings)

    async def _generate(
        self, client: anthropic.AsyncAnthropic, messages: Sequence[Message], settings: GenerateSettings
    ) -> Completion:
        kwargs = self.request_kwargs(messages, settings)
        started = time.perf_counter()

        async def once() -> Any:
            try:
                return await client.messages.create(**kwargs, timeout=settings.timeout_s)
            except anthropic.AnthropicError as exc:
                raise map_anthropic_error(exc) from exc
            except json.JSONDecodeError as exc:  # a 200 whose body is cut or garbled (proxies do this)
                raise TransientError(f"response is not JSON: {exc}", error_class="bad_response") from exc

        response, attempts, last_error = await call_with_retries(once, settings)
        latency_ms = (time.perf_counter() - started) * 1000.0

        text = "".join(
            getattr(block, "text", "") for block in (response.content or []) if getattr(block, "type", "") == "text"
        )
        usage = response.usage
        fresh = (usage.input_tokens or 0) if usage is not None else 0
        read = (getattr(usage, "cache_read_input_tokens", None) or 0) if usage is not None else 0
        written = (getattr(usage, "cache_creation_input_tokens", None) or 0) if usage is not None else 0
        return Completion(
            text=text,
            input_tokens=fresh + read + written,
            output_tokens=(usage.output_tokens or 0) if usage is not None else 0,
            cached_tokens=read,
            latency_ms=latency_ms,
            attempts=attempts,
            error_class=last_error,
            finish_reason=response.stop_reason,
            raw=response.model_dump(mode="json", exclude_unset=True),  # what the server sent, no SDK defaults
        )


async def aclose() -> None:
    """Close this event loop's anthropic clients."""
    for group in _CLIENTS.pop_current():
        for client in group.clients:
            await client.close()


@register_provider("anthropic", check=require_key, aclose=aclose)
def create(endpoint: EndpointConfig, model: str) -> AnthropicBackend:
    return AnthropicBackend(model, endpoint)
