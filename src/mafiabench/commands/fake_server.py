"""`mafiabench fake-server`: the package's fake OpenAI/Anthropic HTTP server on a port, for trying an endpoint
configuration offline (the same server the tests point the real SDKs at), with latency and injected faults.

It runs until Ctrl-C or SIGTERM and then stops cleanly: open connections closed, the port released, exit code 0.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Annotated

import typer

from mafiabench.commands import command
from mafiabench.errors import UserError


def register(app: typer.Typer) -> None:
    command(
        app,
        "fake-server",
        short_help="serve a fake OpenAI/Anthropic endpoint locally, with latency and injected faults",
        help="Serve the fake model provider over HTTP (OpenAI `POST /v1/chat/completions`, Anthropic "
        "`POST /v1/messages`) so an endpoint in a game or experiment file can be tried offline with the real "
        "SDKs. Faults are drawn per request at the given rates, e.g. `--faults 429=0.1,500=0.05,timeout=0.01` "
        "(kinds: 400 401 404 429 500 502 503 529 timeout disconnect empty malformed bad_json). Stops on Ctrl-C "
        "or SIGTERM.",
    )(main)


def parse_faults(spec: str) -> dict[str, float]:
    """`KIND=RATE,...` -> {kind: rate}; a bad kind or rate is a UserError naming the flag and the value."""
    from mafiabench.testing.fake_http_server import FAULT_KINDS

    rates: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, sep, value = part.partition("=")
        kind = kind.strip()
        if not sep:
            raise UserError(f"--faults: {part!r} is not KIND=RATE (e.g. 429=0.1)")
        if kind not in FAULT_KINDS:
            raise UserError(f"--faults: unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
        try:
            rate = float(value)
        except ValueError:
            raise UserError(f"--faults: rate of {kind!r} must be a number in [0, 1], got {value.strip()!r}") from None
        if not 0.0 <= rate <= 1.0:
            raise UserError(f"--faults: rate of {kind!r} must be in [0, 1], got {value.strip()}")
        rates[kind] = rate
    if sum(rates.values()) > 1.0:
        raise UserError(f"--faults: the rates add up to {sum(rates.values()):g}, more than 1")
    return rates


def main(
    port: Annotated[int, typer.Option(help="port to listen on (0: any free port)")] = 8765,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    latency: Annotated[float, typer.Option(help="seconds added to every response")] = 0.0,
    faults: Annotated[
        str, typer.Option(help="fault rates per request, KIND=RATE,... (e.g. 429=0.1,500=0.05)")
    ] = "",
    seed: Annotated[
        int | None, typer.Option(help="seed of the fault draws (default: different on every start)")
    ] = None,
    hang: Annotated[float, typer.Option(help="seconds a `timeout` fault holds the request")] = 30.0,
) -> int:
    from mafiabench.testing import FakeModelServer

    if latency < 0 or hang < 0:
        raise UserError(f"--latency and --hang must be >= 0, got {latency:g} and {hang:g}")
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be in 0..65535, got {port}")
    rates = parse_faults(faults)
    server = FakeModelServer(latency_s=latency, rates=rates, seed=seed, hang_s=hang, record=False, host=host,
                             port=port)
    try:
        server.start()
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        faults_text = ", ".join(f"{k} {v:g}" for k, v in rates.items()) or "none"
        print(f"fake model server on {server.url} (latency {latency:g} s; faults: {faults_text})")
        print(f"  OpenAI-compatible: base_url = \"{server.base_url_openai}\"   (kind = \"openai\")")
        print(f"  Anthropic:         base_url = \"{server.base_url_anthropic}\"   (kind = \"anthropic\")")
        print("  any model name and any key work; Ctrl-C or SIGTERM stops it", flush=True)
        while not stop.wait(0.2):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"stopped after {server.request_count} request(s)", file=sys.stderr)
    return 0
