"""The shared retry loop: what is retried, how often, how long it waits, and how attempts are counted."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mafiabench.backends import retry
from mafiabench.backends.backend import BackendError, GenerateSettings, TransientError
from mafiabench.backends.retry import (
    LoopLocal,
    backoff_delay,
    call_with_retries,
    parse_retry_after,
    status_error_class,
    status_exception,
)

FAST = GenerateSettings(max_attempts=4, backoff_base_s=0.001, backoff_max_s=0.01)


class Flaky:
    """Fails with the given exceptions, in order, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the delays the loop asks for instead of sleeping."""
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(retry, "sleep", fake_sleep)
    return recorded


def test_first_try_success_counts_one_attempt() -> None:
    fn = Flaky()
    assert asyncio.run(call_with_retries(fn, FAST)) == ("ok", 1, None)


def test_transient_errors_are_retried_and_counted() -> None:
    fn = Flaky(TransientError("429", error_class="rate_limit"), TransientError("500", error_class="server_error"))
    result, attempts, last = asyncio.run(call_with_retries(fn, FAST))
    assert (result, attempts, last, fn.calls) == ("ok", 3, "server_error", 3)


def test_exhausted_retries_raise_backend_error_with_attempts() -> None:
    fn = Flaky(*[TransientError("busy", error_class="rate_limit") for _ in range(10)])
    with pytest.raises(BackendError) as info:
        asyncio.run(call_with_retries(fn, FAST))
    assert info.value.attempts == FAST.max_attempts == fn.calls
    assert info.value.error_class == "rate_limit"


def test_non_transient_error_is_not_retried() -> None:
    fn = Flaky(BackendError("HTTP 400", error_class="bad_request", attempts=1))
    with pytest.raises(BackendError) as info:
        asyncio.run(call_with_retries(fn, FAST))
    assert (info.value.attempts, info.value.error_class, fn.calls) == (1, "bad_request", 1)


def test_non_transient_after_transient_reports_true_attempts() -> None:
    fn = Flaky(
        TransientError("429", error_class="rate_limit"), BackendError("HTTP 401", error_class="auth", attempts=1)
    )
    with pytest.raises(BackendError) as info:
        asyncio.run(call_with_retries(fn, FAST))
    assert (info.value.attempts, info.value.error_class) == (2, "auth")


def test_unexpected_exception_becomes_backend_error() -> None:
    fn = Flaky(KeyError("choices"))
    with pytest.raises(BackendError) as info:
        asyncio.run(call_with_retries(fn, FAST))
    assert info.value.error_class == "internal" and fn.calls == 1
    assert isinstance(info.value.__cause__, KeyError)


def test_retry_after_is_honoured(sleeps: list[float]) -> None:
    settings = GenerateSettings(max_attempts=3, backoff_base_s=0.001, backoff_max_s=5.0)
    fn = Flaky(TransientError("429", error_class="rate_limit", retry_after_s=0.25))
    asyncio.run(call_with_retries(fn, settings))
    assert sleeps == [0.25]


def test_retry_after_is_capped_by_backoff_max(sleeps: list[float]) -> None:
    settings = GenerateSettings(max_attempts=3, backoff_base_s=0.001, backoff_max_s=2.0)
    fn = Flaky(TransientError("429", error_class="rate_limit", retry_after_s=3600))
    asyncio.run(call_with_retries(fn, settings))
    assert sleeps == [2.0]


def test_real_sleep_follows_retry_after() -> None:
    settings = GenerateSettings(max_attempts=2, backoff_base_s=0.0, backoff_max_s=1.0)
    fn = Flaky(TransientError("429", error_class="rate_limit", retry_after_s=0.15))
    started = time.perf_counter()
    asyncio.run(call_with_retries(fn, settings))
    assert time.perf_counter() - started >= 0.14


def test_backoff_grows_exponentially_with_full_jitter(sleeps: list[float]) -> None:
    settings = GenerateSettings(max_attempts=6, backoff_base_s=1.0, backoff_max_s=8.0)
    fn = Flaky(*[TransientError("x", error_class="server_error") for _ in range(5)])
    asyncio.run(call_with_retries(fn, settings))
    assert len(sleeps) == 5
    for attempt, delay in enumerate(sleeps, start=1):
        assert 0.0 <= delay <= min(8.0, 2 ** (attempt - 1))


@given(
    attempt=st.integers(min_value=1, max_value=40),
    base=st.floats(min_value=0.0, max_value=10.0),
    cap=st.floats(min_value=0.0, max_value=100.0),
)
def test_backoff_delay_bounds(attempt: int, base: float, cap: float) -> None:
    settings = GenerateSettings(backoff_base_s=base, backoff_max_s=cap)
    delay = backoff_delay(attempt, settings)
    assert 0.0 <= delay <= min(cap, base * 2 ** (attempt - 1)) + 1e-9


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "100", "retry-after": "9"}) == 0.1  # ms is more precise
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    parsed = parse_retry_after({"retry-after": future})
    assert parsed is not None and 25 <= parsed <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None


@pytest.mark.parametrize(
    ("status", "error_class", "transient"),
    [
        (429, "rate_limit", True),
        (500, "server_error", True),
        (503, "server_error", True),
        (529, "overloaded", True),
        (408, "timeout", True),
        (400, "bad_request", False),
        (401, "auth", False),
        (404, "not_found", False),
    ],
)
def test_status_classification(status: int, error_class: str, transient: bool) -> None:
    assert status_error_class(status) == (error_class, transient)
    exc = status_exception(status, "msg", {"retry-after-ms": "50"})
    assert isinstance(exc, TransientError if transient else BackendError)
    if isinstance(exc, TransientError):
        assert exc.retry_after_s == 0.05


def test_loop_local_one_object_per_loop() -> None:
    cache: LoopLocal[object] = LoopLocal()
    made: list[object] = []

    def factory() -> object:
        made.append(object())
        return made[-1]

    async def two_gets() -> tuple[object, object, object]:
        return cache.get("k", factory), cache.get("k", factory), cache.get("other", factory)

    a, b, c = asyncio.run(two_gets())
    assert a is b and a is not c
    d, _, _ = asyncio.run(two_gets())  # a new loop gets a new object; the closed loop's entries are dropped
    assert d is not a
    assert len(made) == 4 and len(cache) == 2
