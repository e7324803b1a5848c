"""What the HTTP SDK backends share: key lookup, one client group per event loop, error mapping and the call itself.

The OpenAI and Anthropic SDKs are built alike (Stainless): the same error classes under the same names, the same
client options (`max_retries`, `http_client`, `DefaultAioHttpClient`) and the same generic `post()`. A provider module
describes its SDK in an `SDKApi` and subclasses `SDKBackend` with its request body (`request_kwargs`) and how it
reads a reply (`read_reply`); everything else is here, once.
"""

from __future__ import annotations

import functools
import importlib
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar

import httpx2
import orjson

from mafiabench.redact import secret_value, short_error

from .backend import BackendError, Completion, ConfigError, EndpointConfig, GenerateSettings, Message, TransientError
from .retry import (
    ClientGroup,
    LoopLocal,
    call_with_retries,
    dropped_connection,
    parse_body,
    sdk_http_client,
    status_exception,
)

# Sent to servers that accept any key (`key_required = false`; vLLM, Ollama, llama.cpp); never a secret. The SDKs
# insist on some key.
PLACEHOLDER_KEY = "not-needed"

# (text, finish reason, input tokens (the whole prompt), output tokens, cached input tokens) of a reply body.
Reply = tuple[str, str | None, int, int, int]


def _url(exc: Exception) -> str:
    request = getattr(exc, "request", None)
    return str(getattr(request, "url", "") or "the endpoint")


def map_sdk_error(sdk: ModuleType, exc: Exception) -> Exception:
    """An SDK exception as the `TransientError`/`BackendError` our retry loop understands."""
    if isinstance(exc, sdk.APITimeoutError) and not dropped_connection(exc):
        return TransientError("request timed out", error_class="timeout")
    if isinstance(exc, sdk.APIConnectionError):  # name the URL: "endpoint down" must say which endpoint
        return TransientError(f"cannot reach {_url(exc)}: {short_error(exc)}", error_class="connection")
    if isinstance(exc, sdk.APIStatusError):
        return status_exception(
            exc.status_code, f"HTTP {exc.status_code}: {short_error(exc.message)}", exc.response.headers
        )
    if isinstance(exc, sdk.APIResponseValidationError):
        return TransientError(f"malformed response: {short_error(exc)}", error_class="bad_response")
    return BackendError(f"{type(exc).__name__}: {short_error(exc)}", error_class="internal", attempts=1)


@dataclass(frozen=True)
class SDKApi:
    """One SDK as a backend uses it, by name: the module (its error classes, `DefaultAioHttpClient`), its async
    client, the root of its exceptions, the path posted to, and the provider's clients (one group per event loop and
    endpoint). The SDK is imported when a backend is made, not when its provider is registered or checked: a study's
    parent process, which checks the specs and leaves the calls to its worker processes, never pays the 0.5-1 s of
    importing it (issue 31 item 2)."""

    sdk_name: str
    client_name: str
    error_name: str
    path: str
    clients: LoopLocal[ClientGroup[Any]] = field(default_factory=LoopLocal)

    @functools.cached_property
    def sdk(self) -> ModuleType:
        return importlib.import_module(self.sdk_name)

    @property
    def client_class(self) -> Callable[..., Any]:
        return getattr(self.sdk, self.client_name)  # type: ignore[no-any-return]

    @property
    def base_error(self) -> type[Exception]:
        return getattr(self.sdk, self.error_name)  # type: ignore[no-any-return]


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for every SDK client of this process: making one loads the CA bundle (about 25 ms of
    CPU), and a study makes a client per 16 calls in flight. The same context the transport would make for itself
    (httpx's defaults: certifi's bundle, or SSL_CERT_FILE / SSL_CERT_DIR), made once; contexts are safe to share."""
    return httpx2.create_ssl_context()


class SDKBackend:
    """A model behind an SDK client (SDK retries off; `call_with_retries` counts attempts), over the SDK's aiohttp
    transport unless the endpoint says `options.transport = "httpx"`. Subclasses set `api` and write
    `request_kwargs` and `read_reply`."""

    api: ClassVar[SDKApi]

    def __init__(self, model: str, endpoint: EndpointConfig) -> None:
        self.provider = endpoint.name
        self.model = model
        self.endpoint = endpoint
        self.path = self.api.path  # a subclass may post elsewhere (OpenAI's plain completions)
        sdk_http_client(endpoint, lambda: None)  # a bad `options.transport` fails here, before any game

    def _api_key(self) -> str:
        env = self.endpoint.api_key_env
        key = os.environ.get(env) if env else None
        if key:
            secret_value(key)  # sent as a credential: scrubbed wherever text is stored or logged
            return key
        if self.endpoint.key_required:  # as `check_backend` decides: a local server may need none
            raise ConfigError(f"endpoint {self.endpoint.name!r} needs an API key in ${env}, which is not set")
        return PLACEHOLDER_KEY

    def _clients(self) -> ClientGroup[Any]:
        ep = self.endpoint
        return self.api.clients.get(
            (ep.name, ep.base_url, ep.api_key_env),
            lambda: ClientGroup(
                lambda: self.api.client_class(
                    api_key=self._api_key(),
                    base_url=ep.base_url,
                    max_retries=0,
                    http_client=sdk_http_client(
                        ep, lambda: self.api.sdk.DefaultAioHttpClient(verify=shared_ssl_context())
                    ),
                )
            ),
        )

    def request_kwargs(self, messages: Sequence[Message], settings: GenerateSettings) -> dict[str, Any]:
        raise NotImplementedError

    def read_reply(self, body: dict[str, Any]) -> Reply:
        raise NotImplementedError

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        with self._clients().lease() as client:
            return await self._generate(client, messages, settings)

    async def _generate(self, client: Any, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
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
                    self.path, cast_to=httpx2.Response, content=content, options={"timeout": settings.timeout_s}
                )
                return parse_body(response.content)
            except self.api.base_error as exc:
                raise map_sdk_error(self.api.sdk, exc) from exc

        body, attempts, last_error = await call_with_retries(once, settings)
        latency_ms = (time.perf_counter() - started) * 1000.0
        text, finish_reason, input_tokens, output_tokens, cached = self.read_reply(body)
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


def closer(api: SDKApi) -> Callable[[], Awaitable[None]]:
    """A provider's `aclose`: close the running event loop's clients of `api`."""

    async def aclose() -> None:
        for group in api.clients.pop_current():
            for client in group.clients:
                await client.close()

    return aclose
