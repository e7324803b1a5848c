"""A local HTTP server that speaks both the OpenAI and the Anthropic wire formats, answering with the FakeBrain.

Tests and benchmarks point the real SDKs at it, so the whole HTTP path (client, retries, error mapping, token
accounting) runs without a network or a key. Faults are scripted (a queue consumed by the next requests) or drawn
at fixed rates from a seeded generator; a fixed latency makes throughput measurable. Every request is recorded with
its authorization header reduced to "had auth", so a test can assert what was sent and that no key was echoed.

It is one asyncio event loop on a background thread with a minimal HTTP/1.1 (keep-alive, Content-Length) reader:
a held request is a timer, not a thread, so hundreds of requests in flight cost the machine little CPU (it shares
the cores with the client it measures: benchmarks/bench_throughput.py reports its CPU per call).

    with FakeModelServer(latency_s=0.0) as srv:
        srv.push_faults(["429", "timeout"])
        client = openai.AsyncOpenAI(base_url=srv.base_url_openai, api_key="x")
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import itertools
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast

import orjson

from mafiabench.backends.backend import Message
from mafiabench.backends.fake import MALFORMED_ANSWER, estimate_tokens
from mafiabench.testing.fake_model import FakeBrain

FAULT_KINDS = (
    "400",
    "401",
    "404",
    "429",
    "500",
    "502",
    "503",
    "529",
    "timeout",
    "disconnect",
    "empty",
    "malformed",
    "bad_json",
)
_REDACTED_HEADERS = ("authorization", "x-api-key", "api-key")
_CACHE_BLOCK_CHARS = 1024  # OpenAI caches prompt prefixes in blocks; we emulate it per 1024 characters


@dataclass(frozen=True)
class Fault:
    """One injected fault. HTTP codes answer with that status (429/5xx may carry `retry-after-ms`); `timeout` holds
    the request for `hang_s` (longer than the client waits) and closes; `disconnect` closes at once; `empty` and
    `malformed` are well-formed 200 responses whose text is empty or garbage; `bad_json` is a 200 that is not JSON."""

    kind: str
    retry_after_s: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {self.kind!r}; known: {', '.join(FAULT_KINDS)}")

    @classmethod
    def parse(cls, spec: str | int | Fault | Mapping[str, Any]) -> Fault:
        if isinstance(spec, Fault):
            return spec
        if isinstance(spec, Mapping):
            return cls(str(spec["kind"]), spec.get("retry_after_s"))
        return cls(str(spec))


_REASONS = {429: "Too Many Requests", 529: "Overloaded"}
_MAX_HEAD = 64 * 1024  # request line and headers; more is refused


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return _REASONS.get(status, "Unknown")


class _Connection(asyncio.Protocol):
    """One client connection: reads requests one after another (keep-alive), hands each to the server, and writes
    its response when the server answers (after the latency, on the loop's timer)."""

    def __init__(self, owner: FakeModelServer) -> None:
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False  # a request is being answered: later bytes wait in the buffer (no pipelining)
        self.keep_alive = True
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.owner._track(self, add=True)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.owner._track(self, add=False)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next_request()

    def _next_request(self) -> None:
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            if len(self.buffer) > _MAX_HEAD:
                self.keep_alive = False
                self.send_json(431, {"error": {"message": "request head too large", "type": "invalid_request"}})
            return
        try:
            lines = bytes(self.buffer[:head_end]).decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length") or 0)
            if length < 0 or "chunked" in headers.get("transfer-encoding", "").lower():
                raise ValueError("chunked or negative length")
        except ValueError:
            self.keep_alive = False
            self.send_json(400, {"error": {"message": "malformed request", "type": "invalid_request"}})
            return
        if len(self.buffer) < head_end + 4 + length:
            return  # the body is still coming
        body = bytes(self.buffer[head_end + 4 : head_end + 4 + length])
        del self.buffer[: head_end + 4 + length]
        connection = headers.get("connection", "").lower()
        self.keep_alive = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
        self.busy = True
        self.owner._dispatch(self, method, target, headers, body)

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        """Run `callback` after `delay` seconds unless the connection is closed first."""
        if self.transport is None:
            return
        loop = asyncio.get_running_loop()
        if delay <= 0:
            callback()
            return

        def fire() -> None:
            self.timer = None
            callback()

        self.timer = loop.call_later(delay, fire)

    def send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self.send_bytes(status, orjson.dumps(payload), headers)

    def send_bytes(self, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return  # the client gave up (e.g. timed out); nothing to do
        head = [f"HTTP/1.1 {status} {_reason(status)}", "Content-Type: application/json"]
        head.append(f"Content-Length: {len(data)}")
        head.extend(f"{k}: {v}" for k, v in (headers or {}).items())
        if not self.keep_alive:
            head.append("Connection: close")
        transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        if not self.keep_alive:
            transport.close()
            return
        self.busy = False
        if self.buffer:
            self._next_request()

    def close(self) -> None:
        """Close without an answer (a dropped or hung-up connection)."""
        self.keep_alive = False
        if self.transport is not None:
            self.transport.close()


class FakeModelServer:
    """OpenAI (`POST /v1/chat/completions`, and plain `POST /v1/completions` as llama.cpp serves it) and Anthropic
    (`POST /v1/messages`) on 127.0.0.1, served by one event loop on a background thread. Runtime knobs: `latency_s`,
    `push_faults(...)`, `set_rates(...)`, `hang_s`."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        rates: Mapping[str, float] | None = None,
        seed: int | None = 0,
        hang_s: float = 5.0,
        record: bool = True,
        max_records: int = 10_000,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.latency_s = latency_s
        self.hang_s = hang_s
        # The message of injected HTTP errors; real providers put things like the refused key's prefix here.
        self.error_message: str | None = None
        # A hostile or broken server: put the credential it received into error messages and answers (a test of
        # redaction: the value must then be nowhere in what the benchmark stores or logs).
        self.echo_credentials = False
        self.record = record
        self._host = host
        self._port = port
        self._rates: dict[str, float] = {}
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._faults: collections.deque[Fault] = collections.deque()
        self._records: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_records)
        self._seen_prefixes: set[bytes] = set()
        self._connections: set[_Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._id_prefix = secrets.token_hex(6)  # ids unique across restarts too
        self.request_count = 0
        self.connections_opened = 0  # with keep-alive, far fewer than requests
        self.brain_seed = seed
        if rates:
            self.set_rates(**rates)

    # --- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> FakeModelServer:
        """Listen (an `OSError` if the address is taken) and serve on a background thread."""
        if self._server is not None:
            return self
        loop = asyncio.new_event_loop()
        try:
            server = loop.run_until_complete(
                loop.create_server(
                    lambda: _Connection(self),
                    self._host,
                    self._port,
                    backlog=1024,  # a small backlog drops connections when hundreds of games start at once
                    reuse_address=True,
                )
            )
        except BaseException:
            loop.close()
            raise
        self._loop, self._server = loop, server
        self._thread = threading.Thread(target=loop.run_forever, name="fake-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, drop held requests, close open keep-alive connections and release the port."""
        loop, server, thread = self._loop, self._server, self._thread
        if loop is None or server is None:
            return

        async def shutdown() -> None:
            server.close()
            for conn in list(self._connections):
                if conn.transport is not None:
                    conn.transport.abort()
            await server.wait_closed()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        if not loop.is_running():
            loop.close()
        self._loop = self._server = self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def base_url_openai(self) -> str:
        return f"{self.url}/v1"

    @property
    def base_url_anthropic(self) -> str:
        return self.url

    # --- fault control ---------------------------------------------------------------------------------------

    def push_faults(self, faults: Iterable[str | int | Fault | Mapping[str, Any]]) -> None:
        """Queue faults for the next requests, one per request, in order (before any rate is drawn)."""
        parsed = [Fault.parse(f) for f in faults]
        with self._lock:
            self._faults.extend(parsed)

    def set_rates(self, **rates: float) -> None:
        """Probability per request of each fault kind, e.g. `set_rates(**{"429": 0.1, "timeout": 0.01})`. Kinds not
        named keep their rate; 0 switches one off."""
        for kind, p in rates.items():
            Fault(kind)  # validates the kind
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"rate for {kind!r} must be in [0, 1], got {p}")
        with self._lock:
            self._rates.update(rates)
            self._rates = {k: v for k, v in self._rates.items() if v > 0}

    def clear(self) -> None:
        """Forget queued faults, rates, recorded requests and the emulated prompt cache."""
        with self._lock:
            self._faults.clear()
            self._rates.clear()
            self._records.clear()
            self._seen_prefixes.clear()
            self.request_count = 0
            self.connections_opened = 0

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Recorded requests: path, headers (without any key), had_auth, body, fault, status, response."""
        with self._lock:
            return list(self._records)

    # --- request handling (runs on the server's event loop) ---------------------------------------------------

    def _track(self, conn: _Connection, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
                self.connections_opened += 1
            else:
                self._connections.discard(conn)

    def _next_fault(self) -> Fault | None:
        with self._lock:
            self.request_count += 1
            if self._faults:
                return self._faults.popleft()
            if self._rates:
                roll = self._rng.random()
                edge = 0.0
                for kind, p in self._rates.items():
                    edge += p
                    if roll < edge:
                        return Fault(kind)
        return None

    def _dispatch(self, conn: _Connection, method: str, target: str, headers: dict[str, str], raw: bytes) -> None:
        path = target.split("?", 1)[0].rstrip("/")
        if method == "GET":
            if path in ("", "/health"):
                conn.send_json(200, {"ok": True})
            else:
                conn.send_json(404, {"error": {"message": f"no route {target}", "type": "not_found"}})
            return
        if method != "POST":
            conn.send_json(501, {"error": {"message": f"unsupported method {method}", "type": "not_implemented"}})
            return
        try:
            body: Any = orjson.loads(raw or b"{}")
        except orjson.JSONDecodeError:
            body = None
        had_auth = any(headers.get(k) for k in _REDACTED_HEADERS)
        entry: dict[str, Any] = {
            "path": path,
            "headers": {k: v for k, v in headers.items() if k not in _REDACTED_HEADERS},
            "had_auth": had_auth,
            "body": body,
            "fault": None,
            "status": None,
            "response": None,
        }
        fault = self._next_fault()
        entry["fault"] = fault.kind if fault else None
        echo = ""
        if self.echo_credentials:
            auth = headers.get("x-api-key") or headers.get("api-key") or headers.get("authorization") or ""
            echo = auth.removeprefix("Bearer ").strip()
        if self.record:
            with self._lock:
                self._records.append(entry)
        conn.later(self.latency_s, lambda: self._respond(conn, path, body, fault, echo, entry))

    def _respond(
        self, conn: _Connection, path: str, body: Any, fault: Fault | None, echo: str, entry: dict[str, Any]
    ) -> None:
        if path.endswith("/chat/completions"):
            api = "openai"
        elif path.endswith("/completions"):  # plain text completions (llama.cpp, vLLM): errors as OpenAI's
            api = "openai-text"
        elif path.endswith("/messages"):
            api = "anthropic"
        else:
            entry["status"] = 404
            conn.send_json(404, _error_body("openai", 404, f"no route {path}"))
            return
        if not isinstance(body, dict):
            entry["status"] = 400
            conn.send_json(400, _error_body(api, 400, "request body is not a JSON object"))
            return

        if fault is not None:
            if fault.kind == "timeout":
                entry["status"] = "hung"
                conn.later(self.hang_s, conn.close)
                return
            if fault.kind == "disconnect":
                entry["status"] = "disconnected"
                conn.close()
                return
            if fault.kind == "bad_json":
                entry["status"] = 200
                conn.send_bytes(200, b'{"id": "broken", "choices": [')
                return
            if fault.kind.isdigit():
                status = int(fault.kind)
                extra: dict[str, str] = {}
                if fault.retry_after_s is not None:
                    extra["retry-after-ms"] = str(int(fault.retry_after_s * 1000))
                entry["status"] = status
                message = self.error_message or f"injected {status}"
                if echo:
                    message += f" (you sent {echo})"
                conn.send_json(status, _error_body(api, status, message), extra)
                return

        override: str | None = None
        if fault is not None and fault.kind == "empty":
            override = ""
        elif fault is not None and fault.kind == "malformed":
            override = MALFORMED_ANSWER
        try:
            if api == "openai-text":
                response = self._openai_text(body, override, echo)
            else:
                response = self._openai(body, override, echo) if api == "openai" else self._anthropic(
                    body, override, echo)
        except (KeyError, TypeError, ValueError) as exc:
            entry["status"] = 400
            conn.send_json(400, _error_body(api, 400, f"bad request: {exc}"))
            return
        entry["status"] = 200
        entry["response"] = response
        conn.send_json(200, response)

    def _new_id(self) -> str:
        return f"{self._id_prefix}{next(self._ids):012x}"

    def _answer(self, model: str, messages: list[Message], override: str | None, echo: str = "") -> str:
        text = override if override is not None else FakeBrain(model, seed=self.brain_seed).answer(messages)
        return f"{text} {echo}" if echo else text

    def _prefix_cache(self, breakpoints: list[tuple[int, bytes]]) -> tuple[int, int]:
        """(chars read from cache, chars newly written) for a prompt's cacheable prefixes, longest seen wins."""
        if not breakpoints:
            return 0, 0
        with self._lock:
            read = max((n for n, d in breakpoints if d in self._seen_prefixes), default=0)
            self._seen_prefixes.update(d for _, d in breakpoints)
        longest = max(n for n, _ in breakpoints)
        return read, longest - read

    def _openai(self, body: dict[str, Any], override: str | None, echo: str = "") -> dict[str, Any]:
        model = str(body["model"])
        messages = [Message(_role(m["role"]), _text(m.get("content"))) for m in body["messages"]]
        prompt = "".join(m.content for m in messages)
        text = self._answer(model, messages, override, echo)
        # emulate automatic prefix caching in 1024-character blocks
        h = hashlib.sha256(model.encode())
        points: list[tuple[int, bytes]] = []
        for start in range(0, len(prompt) - _CACHE_BLOCK_CHARS + 1, _CACHE_BLOCK_CHARS):
            h.update(prompt[start : start + _CACHE_BLOCK_CHARS].encode("utf-8"))
            points.append((start + _CACHE_BLOCK_CHARS, h.copy().digest()))
        read_chars, _ = self._prefix_cache(points)
        prompt_tokens = estimate_tokens(prompt)
        completion_tokens = estimate_tokens(text)
        cached = min(read_chars // 4, prompt_tokens)
        return {
            "id": f"chatcmpl-{self._new_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }

    def _openai_text(self, body: dict[str, Any], override: str | None, echo: str = "") -> dict[str, Any]:
        """A plain completion: the prompt is one text, the answer a choice's `text`."""
        model, prompt = str(body["model"]), body["prompt"]
        if not isinstance(prompt, str):
            raise TypeError("prompt must be a string")
        text = self._answer(model, [Message("user", prompt)], override, echo)
        prompt_tokens, completion_tokens = estimate_tokens(prompt), estimate_tokens(text)
        return {
            "id": f"cmpl-{self._new_id()}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _anthropic(self, body: dict[str, Any], override: str | None, echo: str = "") -> dict[str, Any]:
        model = str(body["model"])
        int(body["max_tokens"])  # required by the real API
        segments: list[tuple[str, bool]] = []  # (text, ends at a cache breakpoint)
        system = body.get("system")
        system_text = ""
        if system is not None:
            for text, mark in _blocks(system):
                segments.append((text, mark))
                system_text += text
        messages: list[Message] = []
        if system_text:
            messages.append(Message("system", system_text))
        for m in body["messages"]:
            content = ""
            for text, mark in _blocks(m.get("content")):
                segments.append((text, mark))
                content += text
            messages.append(Message(_role(m["role"]), content))
        text = self._answer(model, messages, override, echo)
        h = hashlib.sha256(model.encode())
        chars = 0
        points: list[tuple[int, bytes]] = []
        for seg, mark in segments:
            h.update(seg.encode("utf-8"))
            chars += len(seg)
            if mark:
                points.append((chars, h.copy().digest()))
        read_chars, written_chars = self._prefix_cache(points)
        total = estimate_tokens("".join(s for s, _ in segments))
        read_tokens = min(read_chars // 4, total)
        written_tokens = min(written_chars // 4, total - read_tokens)
        return {
            "id": f"msg_{self._new_id()}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": total - read_tokens - written_tokens,
                "output_tokens": estimate_tokens(text),
                "cache_creation_input_tokens": written_tokens,
                "cache_read_input_tokens": read_tokens,
            },
        }


def _role(role: Any) -> Any:
    if role not in ("system", "user", "assistant", "developer"):
        raise ValueError(f"unknown role {role!r}")
    return "system" if role == "developer" else role


def _text(content: Any) -> str:
    return "".join(t for t, _ in _blocks(content))


def _blocks(content: Any) -> list[tuple[str, bool]]:
    """Text parts of a message content (a string or a list of blocks), each with whether it carries
    `cache_control`."""
    if content is None:
        return []
    if isinstance(content, str):
        return [(content, False)]
    out: list[tuple[str, bool]] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            out.append((str(block.get("text", "")), bool(block.get("cache_control"))))
    return out


def _error_body(api: str, status: int, message: str) -> dict[str, Any]:
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    kind = kinds.get(status, "api_error")
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
