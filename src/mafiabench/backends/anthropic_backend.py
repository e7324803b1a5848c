"""Anthropic's Messages API, with explicit prompt caching at each message's `cache_prefix_chars`.

Token accounting follows the OpenAI convention so that cost metrics need no per-provider branch:
`Completion.input_tokens` is the *whole* prompt (Anthropic's `input_tokens` + `cache_read_input_tokens` +
`cache_creation_input_tokens`, which Anthropic reports separately) and `cached_tokens` is `cache_read_input_tokens`.
The raw usage block stays in `Completion.raw`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .backend import EndpointConfig, GenerateSettings, Message, register_provider, require_key
from .retry import count
from .sdk_backend import Reply, SDKApi, SDKBackend, closer, map_sdk_error

API = SDKApi("anthropic", "AsyncAnthropic", "AnthropicError", "/v1/messages")  # the SDK is imported on first use
_CLIENTS = API.clients
DEFAULT_MAX_TOKENS = 1024
# Anthropic accepts at most four cache breakpoints per request; the last ones cover the longest prefixes.
MAX_CACHE_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}


def map_anthropic_error(exc: Exception) -> Exception:
    """An anthropic SDK exception as the `TransientError`/`BackendError` our retry loop understands."""
    return map_sdk_error(API.sdk, exc)


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


def read_message(body: dict[str, Any]) -> tuple[str, str | None, int, int, int, int]:
    """(text, stop_reason, fresh input, output, cache read, cache written tokens) of a Messages body, read as
    leniently as the SDK's own models read it: missing pieces are empty, not errors."""
    content = body.get("content")
    blocks = content if isinstance(content, list) else []
    text = "".join(
        b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )
    reason = body.get("stop_reason")
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return (
        text,
        reason if isinstance(reason, str) else None,
        count(usage.get("input_tokens")),
        count(usage.get("output_tokens")),
        count(usage.get("cache_read_input_tokens")),
        count(usage.get("cache_creation_input_tokens")),
    )


class AnthropicBackend(SDKBackend):
    """Messages through `anthropic.AsyncAnthropic` (the shared plumbing is `SDKBackend`'s)."""

    api = API

    def request_kwargs(self, messages: Sequence[Message], settings: GenerateSettings) -> dict[str, Any]:
        """The request body, as `messages.create` would send it (provider defaults for what we do not set)."""
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
            kwargs["temperature"] = settings.temperature  # the API accepts it (anthropic 2.x no longer types it)
        return kwargs

    def read_reply(self, body: dict[str, Any]) -> Reply:
        """Input tokens are the whole prompt (fresh + cache read + cache written), as OpenAI counts them."""
        text, stop_reason, fresh, output, read, written = read_message(body)
        return text, stop_reason, fresh + read + written, output, read


aclose = closer(API)  # close this event loop's anthropic clients


@register_provider("anthropic", check=require_key, aclose=aclose)
def create(endpoint: EndpointConfig, model: str) -> AnthropicBackend:
    return AnthropicBackend(model, endpoint)
