"""The client's CPU per model call through the openai and anthropic SDKs, the paths replaced and the one kept.

Every variant speaks to the same local fake server (its own process, so its CPU is not ours) through the same
backends and client pools (`ClientGroup`); they differ in how a request is sent and a reply read:

- openai, `create()`: `client.chat.completions.create(...)`, the SDK's `ChatCompletion` model per call and
  `model_dump(mode="json", exclude_unset=True)` for the record (the first path);
- openai, `post()` on httpx: `client.post("/chat/completions", cast_to=httpx2.Response, body=...)` over the SDK's
  default httpx transport, the JSON body read once (the second);
- openai, kept: the same `post()` with the body encoded once by orjson (`content=`), over the SDK's own aiohttp
  transport (`openai.DefaultAioHttpClient`);
- anthropic, `create()`: `client.messages.create(...)`, the SDK's `Message` model and `model_dump` (replaced);
- anthropic, kept: `client.post("/v1/messages", cast_to=httpx2.Response, content=...)` over aiohttp;
- each kept path again inside `lean_gc()` (what a study over HTTP runs its games in: study/workers.py).

CPU per call is this process's `time.process_time()` over the calls (user + system, every thread), divided by the
number of calls; the variants alternate in rounds so that machine noise falls on all of them.

    .venv/bin/python benchmarks/bench_client_cpu.py                       # 2,000 calls × 3 rounds, 64 in flight
    .venv/bin/python benchmarks/bench_client_cpu.py --calls 4000 --concurrency 256
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import httpx2
import openai

from mafiabench.backends import anthropic_backend, openai_backend
from mafiabench.backends.anthropic_backend import AnthropicBackend, map_anthropic_error
from mafiabench.backends.backend import Completion, EndpointConfig, GenerateSettings, Message, TransientError
from mafiabench.backends.openai_backend import OpenAIBackend, map_openai_error, read_completion
from mafiabench.backends.retry import call_with_retries, parse_body
from mafiabench.study.workers import lean_gc

SERVER = """
import sys
from mafiabench.testing.fake_http_server import FakeModelServer
srv = FakeModelServer(latency_s=float(sys.argv[1]), record=False).start()
print(srv.port, flush=True)
sys.stdin.read()
srv.stop()
"""


class ModelBackend(OpenAIBackend):
    """openai's first path: the SDK's response model per call, dumped back to a dict for the record."""

    async def _generate(self, client: Any, messages: Any, settings: GenerateSettings) -> Completion:
        kwargs = self.request_kwargs(messages, settings)
        started = time.perf_counter()

        async def once() -> Any:
            try:
                return await client.chat.completions.create(**kwargs, timeout=settings.timeout_s)
            except openai.OpenAIError as exc:
                raise map_openai_error(exc) from exc
            except json.JSONDecodeError as exc:
                raise TransientError(f"response is not JSON: {exc}", error_class="bad_response") from exc

        response, attempts, last_error = await call_with_retries(once, settings)
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "", input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
            cached_tokens=0, latency_ms=(time.perf_counter() - started) * 1000.0, attempts=attempts,
            error_class=last_error, finish_reason=choice.finish_reason,
            raw=response.model_dump(mode="json", exclude_unset=True),
        )


class PostBackend(OpenAIBackend):
    """openai's second path: the generic `post()` with the SDK encoding the body (run over httpx here)."""

    async def _generate(self, client: Any, messages: Any, settings: GenerateSettings) -> Completion:
        kwargs = self.request_kwargs(messages, settings)
        started = time.perf_counter()

        async def once() -> Any:
            try:
                response = await client.post("/chat/completions", cast_to=httpx2.Response, body=kwargs,
                                             options={"timeout": settings.timeout_s})
                return parse_body(response.content)
            except openai.OpenAIError as exc:
                raise map_openai_error(exc) from exc

        body, attempts, last_error = await call_with_retries(once, settings)
        text, finish, tin, tout, cached = read_completion(body)
        return Completion(text=text, input_tokens=tin, output_tokens=tout, cached_tokens=cached,
                          latency_ms=(time.perf_counter() - started) * 1000.0, attempts=attempts,
                          error_class=last_error, finish_reason=finish, raw=body)


class AnthropicModelBackend(AnthropicBackend):
    """anthropic's replaced path: `messages.create()`, the SDK's `Message` model, `model_dump` for the record."""

    async def _generate(self, client: Any, messages: Any, settings: GenerateSettings) -> Completion:
        kwargs = self.request_kwargs(messages, settings)
        started = time.perf_counter()

        async def once() -> Any:
            try:
                return await client.messages.create(**kwargs, timeout=settings.timeout_s)
            except anthropic.AnthropicError as exc:
                raise map_anthropic_error(exc) from exc
            except json.JSONDecodeError as exc:
                raise TransientError(f"response is not JSON: {exc}", error_class="bad_response") from exc

        response, attempts, last_error = await call_with_retries(once, settings)
        text = "".join(getattr(b, "text", "") for b in (response.content or []) if getattr(b, "type", "") == "text")
        usage = response.usage
        read = usage.cache_read_input_tokens or 0
        written = usage.cache_creation_input_tokens or 0
        return Completion(
            text=text, input_tokens=usage.input_tokens + read + written, output_tokens=usage.output_tokens,
            cached_tokens=read, latency_ms=(time.perf_counter() - started) * 1000.0, attempts=attempts,
            error_class=last_error, finish_reason=response.stop_reason,
            raw=response.model_dump(mode="json", exclude_unset=True),
        )


async def run(backend: Any, calls: int, concurrency: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) for `calls` calls, `concurrency` at a time."""
    settings = GenerateSettings(max_tokens=50, timeout_s=60, max_attempts=3)
    prompt = [Message("user", "You're Alice, the villager. " * 60 + "Who do you vote for?")]
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            out = await backend.generate(prompt, settings)
            assert out.text, out

    await asyncio.gather(*(one(i) for i in range(min(concurrency, calls))))  # warm the pools
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0, help="server seconds per call")
    args = parser.parse_args()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(args.latency)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())

    def endpoint(kind: str, transport: str) -> EndpointConfig:
        base = f"http://127.0.0.1:{port}" + ("/v1" if kind == "openai" else "")
        return EndpointConfig(f"local-{kind}-{transport}", kind, base_url=base, key_required=False,
                              options={"transport": transport})

    close: dict[str, Callable[[], Awaitable[None]]] = {"openai": openai_backend.aclose,
                                                       "anthropic": anthropic_backend.aclose}
    variants: list[tuple[str, type[Any], str, str, bool]] = [
        ("openai, before: create() + response model + model_dump (httpx)", ModelBackend, "openai", "httpx", False),
        ("openai, post(body=), httpx transport", PostBackend, "openai", "httpx", False),
        ("openai, after: post(content=orjson), aiohttp transport", OpenAIBackend, "openai", "aiohttp", False),
        ("openai, after, with the run's lean_gc()", OpenAIBackend, "openai", "aiohttp", True),
        ("anthropic, before: messages.create() + response model + model_dump (httpx)", AnthropicModelBackend,
         "anthropic", "httpx", False),
        ("anthropic, after: post(content=orjson), aiohttp transport", AnthropicBackend, "anthropic", "aiohttp", False),
        ("anthropic, after, with the run's lean_gc()", AnthropicBackend, "anthropic", "aiohttp", True),
    ]
    results: dict[str, list[float]] = {label: [] for label, *_ in variants}
    try:
        for _ in range(args.rounds):
            for label, cls, kind, transport, lean in variants:
                async def measure(cls: type[Any] = cls, kind: str = kind, how: str = transport) -> tuple[float, float]:
                    try:
                        return await run(cls("fake-model", endpoint(kind, how)), args.calls, args.concurrency)
                    finally:
                        await close[kind]()

                with lean_gc() if lean else contextlib.nullcontext():
                    cpu, wall = asyncio.run(measure())
                results[label].append(cpu / args.calls * 1000)
                print(f"  {label}: {cpu / args.calls * 1000:.2f} ms CPU/call, {args.calls / wall:.0f} calls/s",
                      flush=True)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    print(f"\nClient CPU per call, {args.calls} calls × {args.rounds} rounds, {args.concurrency} in flight, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, openai {openai.__version__}, "
          f"anthropic {anthropic.__version__}, load average {os.getloadavg()[0]:.1f}")
    print("| path | CPU per call (median) | range |\n| --- | ---: | ---: |")
    for label, values in results.items():
        print(f"| {label} | {statistics.median(values):.2f} ms | {min(values):.2f}-{max(values):.2f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
