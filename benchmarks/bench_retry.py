"""Overhead of the shared retry loop (`backends.retry.call_with_retries`, on tenacity) per model call.

Times N calls that succeed at once, and N calls that fail twice with a transient error before succeeding (sleeps
replaced by a no-op), and prints microseconds per call. Compare with the ~5 ms of client CPU per real HTTP call
(BENCHMARKS.md, study throughput).

    .venv/bin/python benchmarks/bench_retry.py            # 20,000 calls each
"""

from __future__ import annotations

import argparse
import asyncio
import time

from mafiabench.backends import retry
from mafiabench.backends.backend import GenerateSettings, TransientError


async def _no_sleep(seconds: float) -> None:
    return None


async def main(n: int) -> None:
    settings = GenerateSettings(max_attempts=5, backoff_base_s=0.0)
    retry.sleep = _no_sleep

    async def ok() -> int:
        return 1

    t0 = time.perf_counter()
    for _ in range(n):
        await retry.call_with_retries(ok, settings)
    first = (time.perf_counter() - t0) / n * 1e6

    state = {"left": 0}

    async def flaky() -> int:
        if state["left"]:
            state["left"] -= 1
            raise TransientError("429", error_class="rate_limit")
        return 1

    t0 = time.perf_counter()
    for _ in range(n):
        state["left"] = 2
        await retry.call_with_retries(flaky, settings)
    third = (time.perf_counter() - t0) / n * 1e6
    print(f"success at once:      {first:8.1f} us per call ({n:,} calls)")
    print(f"success on 3rd try:   {third:8.1f} us per call (two transient errors, no sleep)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().calls))
