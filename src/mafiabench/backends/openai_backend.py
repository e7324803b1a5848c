"""OpenAI and every OpenAI-compatible endpoint (OpenRouter, DeepSeek, xAI, Together, vLLM, Ollama, llama.cpp).

The endpoint supplies the base URL and the *name* of the environment variable that holds the key; the key is read
when the client is made and is never stored on the backend, put in an error message or returned.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import httpx2
import openai
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

_CLIENTS: LoopLocal[ClientGroup[openai.AsyncOpenAI]] = LoopLocal()
# Local servers (vLLM, Ollama, llama.cpp) accept any key; the SDK insists on one.
PLACEHOLDER_KEY = "not-needed"


def _url(exc: Exception) -> str:
    request = getattr(exc, "request", None)
    return str(getattr(request, "url", "") or "the endpoint")


def map_openai_error(exc: Exception) -> Exception:
    """An SDK exception as the `TransientError`/`BackendError` our retry loop understands."""
    if isinstance(exc, openai.APITimeoutError) and not dropped_connection(exc):
        return TransientError("request timed out", error_class="timeout")
    if isinstance(exc, openai.APIConnectionError):  # name the URL: "endpoint down" must say which endpoint
        return TransientError(f"cannot reach {_url(exc)}: {short_error(exc)}", error_class="connection")
    if isinstance(exc, openai.APIStatusError):
        return status_exception(
            exc.status_code, f"HTTP {exc.status_code}: {short_error(exc.message)}", exc.response.headers
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return TransientError(f"malformed response: {short_error(exc)}", error_class="bad_response")
    return BackendError(f"{type(exc).__name__}: {short_error(exc)}", error_class="internal", attempts=1)


def read_completion(body: dict[str, Any]) -> tuple[str, str | None, int, int, int]:
    """(text, finish_reason, input, output, cached tokens) of a chat-completions body, read as leniently as the
    SDK's own models read it: missing pieces are empty, not errors."""
    text, finish_reason = "", None
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        text = content if isinstance(content, str) else ""
        reason = choices[0].get("finish_reason")
        finish_reason = reason if isinstance(reason, str) else None
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    tokens_in, tokens_out = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    return text, finish_reason, tokens_in, tokens_out, count(cached)


class OpenAIBackend:
    """Chat completions through `openai.AsyncOpenAI` (SDK retries off; `call_with_retries` counts attempts), over
    the SDK's aiohttp transport unless the endpoint says `options.transport = "httpx"`."""

    def __init__(self, model: str, endpoint: EndpointConfig) -> None:
        self.provider = endpoint.name
        self.model = model
        self.endpoint = endpoint
        self._max_tokens_field = str(endpoint.options.get("max_tokens_field", "max_tokens"))
        sdk_http_client(endpoint, lambda: None)  # a bad `options.transport` fails here, before any game

    def _api_key(self) -> str:
        env = self.endpoint.api_key_env
        key = os.environ.get(env) if env else None
        if key:
            secret_value(key)  # sent as a credential: scrubbed wherever text is stored or logged
            return key
        if self.endpoint.key_required:
            raise ConfigError(f"endpoint {self.endpoint.name!r} needs an API key in ${env}, which is not set")
        return PLACEHOLDER_KEY

    def _clients(self) -> ClientGroup[openai.AsyncOpenAI]:
        ep = self.endpoint
        return _CLIENTS.get(
            (ep.name, ep.base_url, ep.api_key_env),
            lambda: ClientGroup(
                lambda: openai.AsyncOpenAI(
                    api_key=self._api_key(),
                    base_url=ep.base_url,
                    max_retries=0,
                    http_client=sdk_http_client(ep, openai.DefaultAioHttpClient),
                )
            ),
        )

    def request_kwargs(self, messages: Sequence[Message], settings: GenerateSettings) -> dict[str, Any]:
        """The request body (without the model's reply settings we do not set, so provider defaults apply)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            kwargs[self._max_tokens_field] = settings.max_tokens
        if settings.reasoning_effort is not None:
            kwargs["reasoning_effort"] = settings.reasoning_effort
        if settings.seed is not None:
            kwargs["seed"] = settings.seed
        return kwargs

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        with self._clients().lease() as client:
            return await self._generate(client, messages, settings)

    async def _generate(
        self, client: openai.AsyncOpenAI, messages: Sequence[Message], settings: GenerateSettings
    ) -> Completion:
        # encoded once for all tries, by orjson: the same compact UTF-8 JSON as the SDK's encoder, in a tenth the time
        content = orjson.dumps(self.request_kwargs(messages, settings))
        started = time.perf_counter()

        async def once() -> dict[str, Any]:
            try:
                # The SDK's generic request path (its documented way to call an endpoint with a plain body): the
                # client's auth, headers, timeout and typed errors on non-2xx statuses, but no recursive transform
                # of the parameters and no response model built (and dumped back) per call; we read the JSON once.
                # benchmarks/bench_client_cpu.py measures the CPU per call of each path.
                response = await client.post(
                    "/chat/completions",
                    cast_to=httpx2.Response,
                    content=content,
                    options={"timeout": settings.timeout_s},
                )
                return parse_body(response.content)
            except openai.OpenAIError as exc:
                raise map_openai_error(exc) from exc

        body, attempts, last_error = await call_with_retries(once, settings)
        latency_ms = (time.perf_counter() - started) * 1000.0
        text, finish_reason, input_tokens, output_tokens, cached = read_completion(body)
        return Completion(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached,
            latency_ms=latency_ms,
            attempts=attempts,
            error_class=last_error,
            finish_reason=finish_reason,
            raw=body,  # what the server sent
        )


async def aclose() -> None:
    """Close this event loop's openai clients."""
    for group in _CLIENTS.pop_current():
        for client in group.clients:
            await client.close()


@register_provider("openai", check=require_key, aclose=aclose)
def create(endpoint: EndpointConfig, model: str) -> OpenAIBackend:
    return OpenAIBackend(model, endpoint)
