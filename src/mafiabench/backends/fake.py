"""Provider faults without a model: a wrapper that injects latency and failures around any answerer.

`FakeBackend` knows no game. Its text comes from the `answer` function it is given ((messages, replay key) -> text);
per attempt it draws latency and faults (rate limit, server error, timeout, empty or malformed answer) from a seeded
generator, and transient faults raise `TransientError`, so they travel through the same retry loop as real HTTP
errors. The game-aware answers of the `fake/...` and `scripted/...` providers are `mafiabench.testing.fake_model`'s
(`FakeBrain`), which registers both kinds (see `PROVIDER_MODULES`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .backend import Completion, ConfigError, GenerateSettings, Message, TransientError
from .retry import call_with_retries

# What a fake model answers a request with: (messages, replay key) -> text.
Answerer = Callable[[Sequence[Message], str | None], str]


def request_digest(*parts: Any) -> bytes:
    """A stable hash of JSON-able parts: the seed of every deterministic choice the fake makes."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).digest()


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about four characters per token); real providers report real counts."""
    return len(text) // 4 + 1


_FAULT_OPTIONS = ("p_rate_limit", "p_server_error", "p_timeout", "p_empty", "p_malformed")
_KNOWN_OPTIONS = frozenset((*_FAULT_OPTIONS, "latency_ms", "seed"))
MALFORMED_ANSWER = "<<|endoftext|>> ### {{{ garbled \ufffd output"


def _option_float(options: Mapping[str, Any], key: str) -> float:
    value = options.get(key, 0.0)
    try:
        f = float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"fake endpoint option {key!r} must be a number, got {value!r}") from exc
    if key.startswith("p_") and not 0.0 <= f <= 1.0:
        raise ConfigError(f"fake endpoint option {key!r} must be a probability in [0, 1], got {f}")
    if f < 0:
        raise ConfigError(f"fake endpoint option {key!r} must not be negative, got {f}")
    return f


def check_fault_options(options: Mapping[str, Any] | None) -> tuple[float, dict[str, float], Any]:
    """(latency in seconds, fault probabilities, seed) from a fake endpoint's options; a `ConfigError` names a bad
    or unknown option and its value."""
    opts = dict(options or {})
    unknown = sorted(set(opts) - _KNOWN_OPTIONS)
    if unknown:
        raise ConfigError(f"unknown fake endpoint option(s) {unknown}; known: {sorted(_KNOWN_OPTIONS)}")
    return (_option_float(opts, "latency_ms") / 1000.0, {k: _option_float(opts, k) for k in _FAULT_OPTIONS},
            opts.get("seed"))


_PROCESS_FAULT_SEED = secrets.token_hex(8)


def run_fault_seed() -> str:
    """The fault seed of this run: `$MAFIABENCH_FAULT_SEED` (tests, benchmarks) or a fresh draw per process."""
    return os.environ.get("MAFIABENCH_FAULT_SEED") or _PROCESS_FAULT_SEED


class FakeBackend:
    """An answerer in-process (no HTTP), with optional latency and faults.

    Options (from the endpoint's `options`): `latency_ms`, `p_rate_limit`, `p_server_error`, `p_timeout` (raised
    after the latency, without waiting for `timeout_s`), `p_empty`, `p_malformed`, `seed`. Faults are drawn per
    attempt, so a retry can succeed. Without `seed` they are drawn afresh in every run (from `$MAFIABENCH_FAULT_SEED`
    when set, else a random draw per process), so re-running a study replays its failed games under new faults and
    can complete it; with `seed` they are fixed per request, so a run is reproducible fault for fault.
    """

    def __init__(
        self, model: str, options: Mapping[str, Any] | None, answer: Answerer, *, provider: str = "fake"
    ) -> None:
        self.provider = provider
        self.model = model
        self.latency_s, self.p, self.seed = check_fault_options(options)
        self.fault_seed = self.seed if self.seed is not None else run_fault_seed()
        self.answer = answer

    async def generate(self, messages: Sequence[Message], settings: GenerateSettings) -> Completion:
        started = time.perf_counter()
        digest = request_digest(
            "faults", self.model, [m.to_dict() for m in messages], settings.replay_key, self.fault_seed
        )
        attempt = 0

        async def once() -> str:
            nonlocal attempt
            attempt += 1
            rng = random.Random(int.from_bytes(digest[:8], "big") + attempt)
            if self.latency_s > 0:
                await asyncio.sleep(self.latency_s)
            roll = rng.random()
            edge = 0.0
            for key, error_class in (
                ("p_rate_limit", "rate_limit"),
                ("p_server_error", "server_error"),
                ("p_timeout", "timeout"),
            ):
                edge += self.p[key]
                if roll < edge:
                    raise TransientError(f"injected fault: {error_class}", error_class=error_class)
            roll = rng.random()
            if roll < self.p["p_empty"]:
                return ""
            if roll < self.p["p_empty"] + self.p["p_malformed"]:
                return MALFORMED_ANSWER
            return self.answer(messages, settings.replay_key)

        text, attempts, last_error = await call_with_retries(once, settings)
        prompt_chars = "".join(m.content for m in messages)
        return Completion(
            text=text,
            input_tokens=estimate_tokens(prompt_chars),
            output_tokens=estimate_tokens(text),
            cached_tokens=0,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            attempts=attempts,
            error_class=last_error,
            finish_reason="stop",
            raw={"provider": self.provider, "model": self.model, "text": text},
        )
