"""OpenAI and every OpenAI-compatible endpoint (OpenRouter, DeepSeek, xAI, Together, vLLM, Ollama, llama.cpp).

The endpoint supplies the base URL and the *name* of the environment variable that holds the key; the key is read
when the client is made and is never stored on the backend, put in an error message or returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from .backend import EndpointConfig, GenerateSettings, Message, register_provider, require_key
from .retry import count
from .sdk_backend import Reply, SDKApi, SDKBackend, closer, map_sdk_error

API = SDKApi(openai, openai.AsyncOpenAI, openai.OpenAIError, "/chat/completions")
_CLIENTS = API.clients


def map_openai_error(exc: Exception) -> Exception:
    """An openai SDK exception as the `TransientError`/`BackendError` our retry loop understands."""
    return map_sdk_error(openai, exc)


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


class OpenAIBackend(SDKBackend):
    """Chat completions through `openai.AsyncOpenAI` (the shared plumbing is `SDKBackend`'s)."""

    api = API

    def __init__(self, model: str, endpoint: EndpointConfig) -> None:
        super().__init__(model, endpoint)
        self._max_tokens_field = str(endpoint.options.get("max_tokens_field", "max_tokens"))

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
        if settings.response_format is not None:
            kwargs["response_format"] = settings.response_format
        return kwargs

    def read_reply(self, body: dict[str, Any]) -> Reply:
        return read_completion(body)


aclose = closer(API)  # close this event loop's openai clients


@register_provider("openai", check=require_key, aclose=aclose)
def create(endpoint: EndpointConfig, model: str) -> OpenAIBackend:
    return OpenAIBackend(model, endpoint)
