"""The one retry loop every backend shares (tenacity), so that attempts are counted the same way for every provider.

Each provider decides what is retryable by how it maps its SDK's errors: a `TransientError` (429, 5xx, timeouts,
resets: see `status_exception`) is retried, a `BackendError` is final. SDK clients are created with their own
retries switched off (`max_retries=0`): if the SDK retried silently, the game record could not say how many tries a
call took, and faults injected by the fake provider would bypass the loop. Also here, the plumbing the HTTP backends
share: HTTP status and `retry-after` headers to `TransientError`s, and one SDK client per event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from types import SimpleNamespace
from typing import Any, Generic, TypeVar, cast

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_base, wait_random_exponential

from mafiabench.redact import short_error

from .backend import BackendError, ConfigError, GenerateSettings, TransientError

T = TypeVar("T")
C = TypeVar("C")

# Module-level so tests can replace it (e.g. with a recorder that does not sleep).
sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


class wait_retry_after_or_full_jitter(wait_base):
    """A server's `retry-after` wins (capped by `backoff_max_s`, so a hostile header cannot stall a study);
    otherwise "full jitter": uniform in [0, min(cap, base * 2**(attempt-1))], which spreads the retries of many
    concurrent games instead of having them hammer a rate-limited provider in lockstep."""

    def __init__(self, settings: GenerateSettings) -> None:
        self.cap = max(0.0, settings.backoff_max_s)
        self.jitter = wait_random_exponential(multiplier=max(0.0, settings.backoff_base_s), max=self.cap)

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        retry_after = exc.retry_after_s if isinstance(exc, TransientError) else None
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.cap)
        return float(self.jitter(retry_state))


def backoff_delay(attempt: int, settings: GenerateSettings, retry_after_s: float | None = None) -> float:
    """Seconds the loop waits after failed try number `attempt` (1-based), as `wait_retry_after_or_full_jitter`."""
    failed = SimpleNamespace(exception=lambda: TransientError("", error_class="", retry_after_s=retry_after_s))
    state = SimpleNamespace(attempt_number=attempt, outcome=failed)
    return wait_retry_after_or_full_jitter(settings)(cast(RetryCallState, state))


def _final_error(exc: Exception, attempt: int) -> BackendError:
    """An unexpected exception as the one error type callers catch, with the true attempt count."""
    return BackendError(f"unexpected {type(exc).__name__}: {exc}", error_class="internal", attempts=attempt)


async def call_with_retries(fn: Callable[[], Awaitable[T]], settings: GenerateSettings) -> tuple[T, int, str | None]:
    """Run `fn` until it succeeds; return `(result, attempts, last_transient_error_class)`.

    Only `TransientError` is retried, at most `settings.max_attempts` tries in all. A `BackendError` raised by `fn`
    is re-raised with the true attempt count; any other exception is a non-retryable failure and is wrapped in a
    `BackendError` (error class "internal") so callers only ever need to catch one type.

    The first try runs outside tenacity: most calls succeed at once, and building tenacity's loop costs about 0.1 ms
    of CPU per call (benchmarks/bench_retry.py). A transient first failure is replayed as tenacity's first attempt,
    so attempts, waits and the give-up rule are tenacity's.
    """
    try:
        return await fn(), 1, None
    except TransientError as exc:
        first: TransientError | None = exc
    except BackendError as exc:
        exc.attempts = 1
        raise
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # deliberately broad: callers catch one error type
        raise _final_error(exc, 1) from exc

    async def attempt_once() -> T:
        nonlocal first
        if first is not None:
            replay, first = first, None
            raise replay
        return await fn()

    transient: list[str] = []

    def note(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, TransientError):
            transient.append(exc.error_class)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(max(1, settings.max_attempts)),
        wait=wait_retry_after_or_full_jitter(settings),
        retry=retry_if_exception_type(TransientError),
        sleep=lambda seconds: sleep(seconds),
        after=note,
        reraise=True,
    )
    attempt = 0
    try:
        async for trial in retrying:
            attempt = trial.retry_state.attempt_number
            with trial:
                result: Any = await attempt_once()
    except TransientError as exc:
        raise BackendError(
            f"gave up after {attempt} attempt(s); last error: {exc}", error_class=exc.error_class, attempts=attempt
        ) from exc
    except BackendError as exc:
        exc.attempts = attempt
        raise
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # deliberately broad: callers catch one error type
        raise _final_error(exc, attempt) from exc
    return cast(T, result), attempt, transient[-1] if transient else None


# --- shared HTTP error classification --------------------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a server asked us to wait, from `retry-after-ms` (OpenAI, Anthropic) or `retry-after` (seconds or an
    HTTP date); None when absent or unparseable."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = lower.get("retry-after")
    if ra is not None:
        try:
            return max(0.0, float(ra))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(ra)
            except (TypeError, ValueError):
                return None
            if when is None:
                return None
            return max(0.0, when.timestamp() - time.time())
    return None


def status_error_class(status: int) -> tuple[str, bool]:
    """(error_class, transient) for an HTTP status: 408/409/429/5xx are worth retrying, other 4xx are not."""
    if status == 429:
        return "rate_limit", True
    if status == 408:
        return "timeout", True
    if status == 409:
        return "conflict", True
    if status == 529:
        return "overloaded", True
    if status >= 500:
        return "server_error", True
    if status in (401, 403):
        return "auth", False
    if status == 404:
        return "not_found", False
    if status == 400 or status == 422:
        return "bad_request", False
    return f"http_{status}", False


def status_exception(status: int, message: str, headers: Mapping[str, str] | None) -> Exception:
    """The exception our retry loop expects for an HTTP error response."""
    error_class, transient = status_error_class(status)
    if transient:
        return TransientError(message, error_class=error_class, retry_after_s=parse_retry_after(headers))
    return BackendError(message, error_class=error_class, attempts=1)


def parse_body(content: bytes) -> dict[str, Any]:
    """A 200's body as a JSON object; anything else (cut, garbled, not an object) is a retryable bad response."""
    try:
        body = json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a 200 whose body is cut or garbled (proxies do this)
        raise TransientError(f"response is not JSON: {short_error(exc)}", error_class="bad_response") from exc
    if not isinstance(body, dict):
        raise TransientError(f"response is JSON but not an object ({type(body).__name__})", error_class="bad_response")
    return body


def count(value: Any) -> int:
    """A token count from a response body: a non-negative int, else 0 (as lenient as the SDKs' models)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


# --- the SDK clients' HTTP transport ---------------------------------------------------------------------------

TRANSPORTS = ("aiohttp", "httpx")


def sdk_http_client(endpoint: Any, aiohttp_client: Callable[[], Any]) -> Any | None:
    """The `http_client` to give an SDK client: its own `DefaultAioHttpClient` (the SDKs' documented aiohttp
    transport, `openai[aiohttp]`) unless the endpoint's `options.transport` is "httpx" (None: the SDK's default).

    Why aiohttp by default: the SDK's httpx transport (httpcore's pool on anyio streams) costs about 0.55 ms more
    client CPU per call (benchmarks/bench_client_cpu.py), which caps the calls one core can carry. Requests, auth,
    headers, timeouts and typed errors stay the SDK's either way; only the bytes move differently.
    """
    transport = endpoint.options.get("transport", "aiohttp")
    if transport not in TRANSPORTS:
        raise ConfigError(
            f"endpoint {endpoint.name!r}: options.transport must be one of {list(TRANSPORTS)}, got {transport!r}"
        )
    return aiohttp_client() if transport == "aiohttp" else None


def dropped_connection(exc: BaseException) -> bool:
    """Whether an SDK "timeout" was really a refused or dropped connection.

    The SDKs' vendored aiohttp transport maps every aiohttp connection error, a server closing the connection or
    refusing it included, to httpx's `ConnectTimeout`, so the SDK raises `APITimeoutError`; the aiohttp exception
    is still in the chain, and only aiohttp's read and connect timeouts are `TimeoutError`s.
    """
    aiohttp = sys.modules.get("aiohttp")  # not imported: no aiohttp exception can be in the chain
    if aiohttp is None:
        return False
    seen: set[int] = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, TimeoutError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


# --- one SDK client per event loop -----------------------------------------------------------------------------


class LoopLocal(Generic[C]):
    """One object (an SDK client) per running event loop and key.

    An SDK client's connection pool is bound to the loop it was first used on, and creating one costs about 20 ms:
    games sharing a loop share a client, and a new loop (a new `asyncio.run`, a new Prefect task) gets its own.
    Entries of closed or collected loops are dropped when a new client is made, so the cache does not grow.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[int, Hashable], tuple[weakref.ref[asyncio.AbstractEventLoop], C]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, factory: Callable[[], C]) -> C:
        loop = asyncio.get_running_loop()
        slot = (id(loop), key)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None and entry[0]() is loop:
                return entry[1]
            for k, (ref, _) in list(self._entries.items()):
                dead = ref()
                if dead is None or dead.is_closed():
                    del self._entries[k]
            value = factory()
            self._entries[slot] = (weakref.ref(loop), value)
            return value

    def __len__(self) -> int:
        return len(self._entries)

    def pop_current(self) -> list[C]:
        """Forget and return the running loop's objects (to close them before the loop ends)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            keys = [k for k, (ref, _) in self._entries.items() if ref() is loop]
            return [self._entries.pop(k)[1] for k in keys]


class ClientGroup(Generic[C]):
    """Several SDK clients for one endpoint, each carrying at most `per_client` requests at a time.

    Why: httpx's connection pool checks every pooled connection on each request (a socket poll each), so one client
    serving hundreds of concurrent requests spends milliseconds of CPU per request and caps a 2-core run at about
    100 calls/s. Small pools keep that scan short; clients are created on demand and reused.
    """

    def __init__(self, factory: Callable[[], C], per_client: int = 16) -> None:
        self._factory = factory
        self.per_client = per_client
        self.clients: list[C] = []
        self._busy: list[int] = []

    @contextlib.contextmanager
    def lease(self) -> Iterator[C]:
        i = min(range(len(self.clients)), key=self._busy.__getitem__, default=-1)
        if i < 0 or self._busy[i] >= self.per_client:
            self.clients.append(self._factory())
            self._busy.append(0)
            i = len(self.clients) - 1
        self._busy[i] += 1
        try:
            yield self.clients[i]
        finally:
            self._busy[i] -= 1
