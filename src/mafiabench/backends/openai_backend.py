"""OpenAI and every OpenAI-compatible endpoint (OpenRouter, DeepSeek, xAI, Together, vLLM, Ollama, llama.cpp).

The endpoint supplies the base URL and the *name* of the environment variable that holds the key; the key is read
when the client is made and is never stored on the backend, put in an error message or returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .backend import ConfigError, EndpointConfig, GenerateSettings, Message, register_provider, require_key
from .retry import count
from .sdk_backend import Reply, SDKApi, SDKBackend, closer, map_sdk_error

API = SDKApi("openai", "AsyncOpenAI", "OpenAIError", "/chat/completions")  # the SDK is imported on first use
_CLIENTS = API.clients


def map_openai_error(exc: Exception) -> Exception:
    """An openai SDK exception as the `TransientError`/`BackendError` our retry loop understands."""
    return map_sdk_error(API.sdk, exc)


def read_completion(body: dict[str, Any]) -> tuple[str, str | None, int, int, int]:
    """(text, finish_reason, input, output, cached tokens) of a chat-completions body (or a plain completions body,
    whose choice holds `text`), read as leniently as the SDK's own models read it: missing pieces are empty, not
    errors."""
    text, finish_reason = "", None
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else choices[0].get("text")
        text = content if isinstance(content, str) else ""
        reason = choices[0].get("finish_reason")
        finish_reason = reason if isinstance(reason, str) else None
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    tokens_in, tokens_out = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    return text, finish_reason, tokens_in, tokens_out, count(cached)


API_MODES = ("chat", "completions")


def check_options(endpoint: EndpointConfig) -> tuple[str, str]:
    """(api, prompt_template) of an endpoint, or a `ConfigError` naming the endpoint, the option and its value.

    `api = "completions"` posts the prompt as plain text to `/completions` (a llama.cpp or vLLM server's raw
    completion, as some published studies called their local models: no chat template applied), wrapped in
    `prompt_template` (`{prompt}` stands for the prompt; default: the prompt as it is)."""
    api = endpoint.options.get("api", "chat")
    if api not in API_MODES:
        raise ConfigError(f"endpoint {endpoint.name!r}: options.api must be one of {list(API_MODES)}, got {api!r}")
    template = endpoint.options.get("prompt_template", "{prompt}")
    if not isinstance(template, str) or template.count("{prompt}") != 1:
        raise ConfigError(f"endpoint {endpoint.name!r}: options.prompt_template must hold {{prompt}} once, "
                          f"got {template!r}")
    if api == "chat" and "prompt_template" in endpoint.options:
        raise ConfigError(f"endpoint {endpoint.name!r}: options.prompt_template needs options.api = 'completions'")
    return str(api), template


class OpenAIBackend(SDKBackend):
    """Chat completions through `openai.AsyncOpenAI` (the shared plumbing is `SDKBackend`'s), or plain completions
    with `options.api = "completions"`."""

    api = API

    def __init__(self, model: str, endpoint: EndpointConfig) -> None:
        super().__init__(model, endpoint)
        self._max_tokens_field = str(endpoint.options.get("max_tokens_field", "max_tokens"))
        self._mode, self._template = check_options(endpoint)
        # Recorded with every call (and part of its cache key) when the messages are not sent as they are.
        self.request_format: dict[str, Any] | None = None
        if self._mode == "completions":
            self.path = "/completions"
            self.request_format = {"api": "completions", "prompt_template": self._template}

    def request_kwargs(self, messages: Sequence[Message], settings: GenerateSettings) -> dict[str, Any]:
        """The request body (without the model's reply settings we do not set, so provider defaults apply)."""
        kwargs: dict[str, Any] = {"model": self.model}
        if self._mode == "completions":  # one prompt: the messages' text in order, in the endpoint's template
            kwargs["prompt"] = self._template.replace("{prompt}", "\n\n".join(m.content for m in messages))
        else:
            kwargs["messages"] = [{"role": m.role, "content": m.content} for m in messages]
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


def check(endpoint: EndpointConfig, model: str, spec: str) -> None:
    check_options(endpoint)
    require_key(endpoint, model, spec)


@register_provider("openai", check=check, aclose=aclose)
def create(endpoint: EndpointConfig, model: str) -> OpenAIBackend:
    return OpenAIBackend(model, endpoint)
