"""The local fake model server: wire formats, fault injection, request recording, concurrency, clean stop."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from typing import Any

import openai
import pytest

from mafiabench.testing import FakeModelServer, Fault

VOTE = "Vote to arrest one player from: Alice, Bob, Carol; reply with just a name"


def post(srv: FakeModelServer, path: str, body: Any, timeout: float = 5.0) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        conn.request(
            "POST",
            path,
            body=json.dumps(body),
            headers={"Content-Type": "application/json", "Authorization": "Bearer k"},
        )
        resp = conn.getresponse()
        data = resp.read()
        try:
            payload = json.loads(data)
        except ValueError:
            payload = data
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload
    finally:
        conn.close()


def chat_body(prompt: str = VOTE, model: str = "m") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}]}


def messages_body(prompt: str = VOTE, model: str = "claude") -> dict[str, Any]:
    return {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": prompt}]}


@pytest.fixture
def srv(fake_server: FakeModelServer) -> FakeModelServer:
    server = fake_server
    server.clear()
    server.latency_s = 0.0
    return server


def test_urls(srv: FakeModelServer) -> None:
    assert srv.base_url_openai == f"http://127.0.0.1:{srv.port}/v1"
    assert srv.base_url_anthropic == f"http://127.0.0.1:{srv.port}"


def test_openai_shape(srv: FakeModelServer) -> None:
    status, _, body = post(srv, "/v1/chat/completions", chat_body())
    assert status == 200
    assert body["object"] == "chat.completion" and body["model"] == "m"
    assert body["choices"][0]["message"]["content"].split("\n")[0] in {"Alice", "Bob", "Carol"}
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert "cached_tokens" in usage["prompt_tokens_details"]


def test_anthropic_shape(srv: FakeModelServer) -> None:
    status, _, body = post(srv, "/v1/messages", messages_body())
    assert status == 200
    assert body["type"] == "message" and body["content"][0]["type"] == "text"
    assert body["content"][0]["text"].split("\n")[0] in {"Alice", "Bob", "Carol"}
    assert set(body["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens"}


def test_prompt_cache_emulation(srv: FakeModelServer) -> None:
    shared = "rules " * 400  # 2400 chars: two 1024-char blocks
    _, _, first = post(srv, "/v1/chat/completions", chat_body(shared + "memory one\n" + VOTE))
    _, _, second = post(srv, "/v1/chat/completions", chat_body(shared + "memory two\n" + VOTE))
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 2048 // 4

    def anthropic_body(tail: str) -> dict[str, Any]:
        blocks = [
            {"type": "text", "text": shared, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": tail},
        ]
        return {"model": "c", "max_tokens": 8, "messages": [{"role": "user", "content": blocks}]}

    _, _, a1 = post(srv, "/v1/messages", anthropic_body("one " + VOTE))
    _, _, a2 = post(srv, "/v1/messages", anthropic_body("two " + VOTE))
    assert a1["usage"]["cache_creation_input_tokens"] == len(shared) // 4
    assert a1["usage"]["cache_read_input_tokens"] == 0
    assert a2["usage"]["cache_read_input_tokens"] == len(shared) // 4
    assert a2["usage"]["cache_creation_input_tokens"] == 0


def test_scripted_faults_in_order(srv: FakeModelServer) -> None:
    srv.push_faults([Fault("429", retry_after_s=0.5), "500", "400", "empty", "malformed"])
    status, headers, body = post(srv, "/v1/chat/completions", chat_body())
    assert status == 429 and headers["retry-after-ms"] == "500" and "error" in body
    assert post(srv, "/v1/messages", messages_body())[0] == 500
    status, _, body = post(srv, "/v1/messages", messages_body())
    assert status == 400 and body["type"] == "error"
    assert post(srv, "/v1/chat/completions", chat_body())[2]["choices"][0]["message"]["content"] == ""
    malformed = post(srv, "/v1/chat/completions", chat_body())[2]["choices"][0]["message"]["content"]
    assert malformed and malformed.split("\n")[0] not in {"Alice", "Bob", "Carol"}
    assert post(srv, "/v1/chat/completions", chat_body())[0] == 200  # queue drained
    assert [r["fault"] for r in srv.requests] == ["429", "500", "400", "empty", "malformed", None]


def test_timeout_fault_hangs_then_closes(srv: FakeModelServer) -> None:
    srv.push_faults(["timeout"])
    with pytest.raises((TimeoutError, socket.timeout)):
        post(srv, "/v1/chat/completions", chat_body(), timeout=0.3)
    assert post(srv, "/v1/chat/completions", chat_body())[0] == 200


def test_disconnect_and_bad_json(srv: FakeModelServer) -> None:
    srv.push_faults(["disconnect", "bad_json"])
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        post(srv, "/v1/chat/completions", chat_body())
    status, _, body = post(srv, "/v1/chat/completions", chat_body())
    assert status == 200 and isinstance(body, bytes)


def test_rates_roughly_honoured(srv: FakeModelServer) -> None:
    srv.set_rates(**{"429": 0.3})
    statuses = [post(srv, "/v1/chat/completions", chat_body())[0] for _ in range(200)]
    assert 0.2 < statuses.count(429) / 200 < 0.4
    srv.set_rates(**{"429": 0.0})
    assert post(srv, "/v1/chat/completions", chat_body())[0] == 200
    with pytest.raises(ValueError):
        srv.set_rates(teapot=0.1)
    with pytest.raises(ValueError):
        srv.set_rates(**{"500": 1.5})


def test_records_requests_without_keys(srv: FakeModelServer) -> None:
    post(srv, "/v1/chat/completions", chat_body("hello Bob"))
    (rec,) = srv.requests
    assert rec["path"] == "/v1/chat/completions"
    assert rec["had_auth"] is True
    assert "authorization" not in rec["headers"]
    assert rec["body"]["messages"][0]["content"] == "hello Bob"
    assert rec["status"] == 200 and rec["response"]["usage"]["prompt_tokens"] > 0


def test_unknown_route_and_bad_body(srv: FakeModelServer) -> None:
    assert post(srv, "/v1/embeddings", {"input": "x"})[0] == 404
    assert post(srv, "/v1/chat/completions", ["not", "an", "object"])[0] == 400
    assert post(srv, "/v1/messages", {"model": "c", "messages": []})[0] == 400  # max_tokens is required


async def raw_post(port: int, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """One request on its own connection with plain asyncio streams (no SDK overhead in the measurement)."""
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.encode() + data)
        await writer.drain()
        status_line, *header_lines = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in header_lines if ": " in line)
        payload = json.loads(await reader.readexactly(int(headers["content-length"])))
        return int(status_line.split()[1]), payload
    finally:
        writer.close()


def test_latency_and_concurrency(srv: FakeModelServer) -> None:
    """256 concurrent requests with 0.3 s latency finish in about 0.5 s, not 77 s: one thread per connection and a
    listen backlog large enough for a burst of new connections."""
    srv.latency_s = 0.3

    async def burst() -> list[tuple[int, Any]]:
        return await asyncio.gather(
            *(raw_post(srv.port, "/v1/chat/completions", chat_body(f"{VOTE} #{i}")) for i in range(256))
        )

    started = time.perf_counter()
    results = asyncio.run(burst())
    elapsed = time.perf_counter() - started
    assert [status for status, _ in results] == [200] * 256
    assert all(p["choices"][0]["message"]["content"].split("\n")[0] in {"Alice", "Bob", "Carol"} for _, p in results)
    # About 0.5 s on a quiet machine; the bound is loose so a loaded CI machine passes, while the failure it guards
    # against (requests served one after another: 256 × 0.3 s = 77 s) still fails it by far.
    assert 0.3 <= elapsed < 10.0, elapsed


def test_sdk_client_over_keep_alive(srv: FakeModelServer) -> None:
    """The OpenAI SDK reuses keep-alive connections across a burst (HTTP/1.1 + Content-Length on every reply)."""
    srv.latency_s = 0.05

    async def bursts() -> tuple[int, int]:
        client = openai.AsyncOpenAI(api_key="k", base_url=srv.base_url_openai, max_retries=0)
        try:
            for _ in range(2):
                await asyncio.gather(
                    *(
                        client.chat.completions.create(model="m", messages=[{"role": "user", "content": VOTE}])
                        for _ in range(32)
                    )
                )
        finally:
            await client.close()
        return len(srv.requests), srv.connections_opened

    requests, connections = asyncio.run(bursts())
    assert requests == 64 and connections <= 32


def test_stop_is_prompt_with_hung_and_idle_connections() -> None:
    srv = FakeModelServer(hang_s=60.0).start()
    port = srv.port
    idle = socket.create_connection(("127.0.0.1", port))  # an idle keep-alive style connection
    srv.push_faults(["timeout"])
    outcome: list[BaseException] = []

    def hold() -> None:
        try:
            post(srv, "/v1/messages", messages_body())
        except (OSError, http.client.HTTPException) as exc:  # closed without a response, as intended
            outcome.append(exc)

    hung = threading.Thread(target=hold)
    hung.start()
    time.sleep(0.1)
    started = time.perf_counter()
    srv.stop()
    assert time.perf_counter() - started < 2.0
    hung.join(timeout=2.0)
    assert not hung.is_alive() and len(outcome) == 1
    idle.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5)
    srv.stop()  # idempotent


def test_deterministic_answers(srv: FakeModelServer) -> None:
    a = post(srv, "/v1/chat/completions", chat_body("What message do you want to say? Players: Ann, Ben, Cy"))
    b = post(srv, "/v1/chat/completions", chat_body("What message do you want to say? Players: Ann, Ben, Cy"))
    assert a[2]["choices"][0]["message"] == b[2]["choices"][0]["message"]
