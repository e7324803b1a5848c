"""A local HTTP server that speaks both the OpenAI and the Anthropic wire formats, answering with the FakeBrain.

Tests and benchmarks point the real SDKs at it, so the whole HTTP path (client, retries, error mapping, token
accounting) runs without a network or a key. Faults are scripted (a queue consumed by the next requests) or drawn
at fixed rates from a seeded generator; a fixed latency makes throughput measurable. Every request is recorded with
its authorization header reduced to "had auth", so a test can assert what was sent and that no key was echoed.

    with FakeModelServer(latency_s=0.0) as srv:
        srv.push_faults(["429", "timeout"])
        client = openai.AsyncOpenAI(base_url=srv.base_url_openai, api_key="x")
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import random
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mafiabench.backends.base import Message
from mafiabench.backends.fake import MALFORMED_ANSWER, FakeBrain, estimate_tokens

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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # the default backlog of 5 drops connections when hundreds of games start at once
    owner: FakeModelServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDKs' connection pools reuse connections
    disable_nagle_algorithm = True  # otherwise every response waits about 40 ms for a delayed ACK
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: hundreds of requests per second in benchmarks

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("", "/health"):
            self._send_json(200, {"ok": True})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw or b"{}")
        except ValueError:
            body = None
        self.server.owner._handle(self, body)

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"), headers)

    def _send_bytes(self, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client gave up (e.g. timed out); nothing to do


class FakeModelServer:
    """OpenAI (`POST /v1/chat/completions`) and Anthropic (`POST /v1/messages`) on 127.0.0.1, one thread per
    connection. Runtime knobs: `latency_s`, `push_faults(...)`, `set_rates(...)`, `hang_s`."""

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
        self._connections: set[socket.socket] = set()
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.request_count = 0
        self.connections_opened = 0  # with keep-alive, far fewer than requests
        self.brain_seed = seed
        if rates:
            self.set_rates(**rates)

    # --- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> FakeModelServer:
        if self._server is not None:
            return self
        self._stop.clear()
        server = _Server((self._host, self._port), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, wake held requests, close open keep-alive connections and release the port."""
        server = self._server
        if server is None:
            return
        self._stop.set()
        server.shutdown()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.server_address[1])

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

    # --- request handling (runs on the connection's thread) --------------------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
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

    def _handle(self, h: _Handler, body: Any) -> None:
        path = h.path.split("?", 1)[0].rstrip("/")
        headers = {k.lower(): v for k, v in h.headers.items()}
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

        if self.latency_s > 0 and self._stop.wait(self.latency_s):
            h.close_connection = True
            return
        if path.endswith("/chat/completions"):
            api = "openai"
        elif path.endswith("/messages"):
            api = "anthropic"
        else:
            entry["status"] = 404
            h._send_json(404, _error_body("openai", 404, f"no route {path}"))
            return
        if not isinstance(body, dict):
            entry["status"] = 400
            h._send_json(400, _error_body(api, 400, "request body is not a JSON object"))
            return

        if fault is not None:
            if fault.kind == "timeout":
                self._stop.wait(self.hang_s)
                entry["status"] = "hung"
                h.close_connection = True
                return
            if fault.kind == "disconnect":
                entry["status"] = "disconnected"
                h.close_connection = True
                return
            if fault.kind == "bad_json":
                entry["status"] = 200
                h._send_bytes(200, b'{"id": "broken", "choices": [')
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
                h._send_json(status, _error_body(api, status, message), extra)
                return

        override: str | None = None
        if fault is not None and fault.kind == "empty":
            override = ""
        elif fault is not None and fault.kind == "malformed":
            override = MALFORMED_ANSWER
        try:
            response = self._openai(body, override, echo) if api == "openai" else self._anthropic(body, override, echo)
        except (KeyError, TypeError, ValueError) as exc:
            entry["status"] = 400
            h._send_json(400, _error_body(api, 400, f"bad request: {exc}"))
            return
        entry["status"] = 200
        entry["response"] = response
        h._send_json(200, response)

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
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
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
            "id": f"msg_{uuid.uuid4().hex[:24]}",
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
