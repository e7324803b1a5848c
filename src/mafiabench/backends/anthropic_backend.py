"""Anthropic's Messages API, with explicit prompt caching at each message's `cache_prefix_chars`.

Token accounting follows the OpenAI convention so that cost metrics need no per-provider branch:
`Completion.input_tokens` is the *whole* prompt (Anthropic's `input_tokens` + `cache_read_input_tokens` +
`cache_creation_input_tokens`, which Anthropic reports separately) and `cached_tokens` is `cache_read_input_tokens`.
The raw usage block stays in `Completion.raw`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import anthropic
import httpx2
import orjson

from mafiabench.redact import secret_value, short_error

from .backend import (
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
from .retry import (
    ClientGroup,
    LoopLocal,
    call_with_retries,
    count,
    dropped_connection,
    parse_body,
    sdk_http_client,
    status_exception,
)

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
    if isinstance(exc, anthropic.APITimeoutError) and not dropped_connection(exc):
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


class AnthropicBackend:
    """Messages through `anthropic.AsyncAnthropic` (SDK retries off; `call_with_retries` counts attempts), over
    the SDK's aiohttp transport unless the endpoint says `options.transport = "httpx"`."""

    def __init__(self, model: str, endpoint: EndpointConfig) -> None:
        self.provider = endpoint.name
        self.model = model
        self.endpoint = endpoint
        sdk_http_client(endpoint, lambda: None)  # a bad `options.transport` fails here, before any game

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
                lambda: anthropic.AsyncAnthropic(
                    api_key=self._api_key(),
                    base_url=ep.base_url,
                    max_retries=0,
                    http_client=sdk_http_client(ep, anthropic.DefaultAioHttpClient),
                )
            ),
        )

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

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        with self._clients().lease() as client:
            return await self._generate(client, messages, settings)

    async def _generate(
        self, client: anthropic.AsyncAnthropic, messages: Sequence[Message], settings: GenerateSettings
    ) -> Completion:
        # encoded once for all tries, by orjson: the same compact UTF-8 JSON as the SDK's encoder, in a tenth the time
        content = orjson.dumps(self.request_kwargs(messages, settings))
        started = time.perf_counter()

        async def once() -> dict[str, Any]:
            try:
                # The SDK's generic request path, as in the openai backend: the client's auth, version headers,
                # timeout and typed errors on non-2xx statuses, without the params transform and the response
                # model built (and dumped back) per call; we read the JSON once (benchmarks/bench_client_cpu.py).
                response = await client.post(
                    "/v1/messages", cast_to=httpx2.Response, content=content, options={"timeout": settings.timeout_s}
                )
                return parse_body(response.content)
            except anthropic.AnthropicError as exc:
                raise map_anthropic_error(exc) from exc

        body, attempts, last_error = await call_with_retries(once, settings)
        latency_ms = (time.perf_counter() - started) * 1000.0
        text, stop_reason, fresh, output, read, written = read_message(body)
        return Completion(
            text=text,
            input_tokens=fresh + read + written,
            output_tokens=output,
            cached_tokens=read,
            latency_ms=latency_ms,
            attempts=attempts,
            error_class=last_error,
            finish_reason=stop_reason,
            raw=body,  # what the server sent
        )


async def aclose() -> None:
    """Close this event loop's anthropic clients."""
    for group in _CLIENTS.pop_current():
        for client in group.clients:
            await client.close()


@register_provider("anthropic", check=require_key, aclose=aclose)
def create(endpoint: EndpointConfig, model: str) -> AnthropicBackend:
    return AnthropicBackend(model, endpoint)
