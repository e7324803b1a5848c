"""The shared local Prefect server is never orphaned (issue 40 item 6): its folder deleted under a keeper whose server
a run is using, or under an idle one, stops the server at once (not at the idle timeout, set far away here); a keeper
killed with SIGKILL takes its server with it; `mafiabench server stop` ends one (and refuses one a run is using);
and each Python environment of a home has its own server folder. Servers are started as a run starts them
(`ensure_server` in a process of its own, which holds the lease until told to go); every wait polls with a
deadline, so the verdict does not depend on the machine's load."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mafiabench.prefect_server import ServerState, environment_key, server_dir, stop_server
from mafiabench.scratch import alive

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
STOPPED_WITHIN_S = 60.0  # the keeper polls every 0.25 s and gives the server 5 s to exit: far below, at any load

# What `mafiabench run` does first: find or start the home's server and hold its lease; print where it is, then keep
# the lease until stdin closes ("hold") or let go at once ("leave").
CLIENT = """
import json, sys
from mafiabench.prefect_server import ServerState, ensure_server, server_dir
ensure_server()
print(json.dumps(ServerState.read(server_dir()).__dict__), flush=True)
if sys.argv[1] == "hold":
    sys.stdin.read()
"""


def env(home: Path) -> dict[str, str]:
    out = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "PREFECT_HOME": str(home),
        "MAFIABENCH_PREFECT_IDLE_S": "900",  # idleness never stops a server within this test: only what it checks
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",  # a loaded machine starts it slowly
    }
    out.pop("PREFECT_API_URL", None)
    return out


def processes(home: Path, kind: bytes) -> list[int]:
    """Live (not zombie) processes with this PREFECT_HOME whose command line names `kind`."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            environ = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if kind in cmd and f"PREFECT_HOME={home}".encode() in environ and alive(int(d.name)):
            found.append(int(d.name))
    return found


def uvicorn_servers(home: Path) -> list[int]:
    return processes(home, b"uvicorn")


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


@pytest.fixture
def homes(tmp_path: Path, prefect_home: Callable[[Path], Path]) -> Iterator[dict[str, Path]]:
    names = ("running", "idle", "killed", "stopped")
    made = {name: prefect_home(tmp_path / name / "prefect-home") for name in names}
    yield made
    for home in made.values():  # whatever a failed assertion left, its home deleted or not
        if home.exists():
            stop_server(home, timeout=5.0, every_environment=True)
        for pid in processes(home, b"mafiabench.prefect_server") + uvicorn_servers(home):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def start_clients(homes: dict[str, Path]) -> tuple[dict[str, ServerState], dict[str, subprocess.Popen[str]]]:
    """One client per home, all at once (each starts its home's server); their servers' states once all answer."""
    clients = {
        name: subprocess.Popen([sys.executable, "-c", CLIENT, "hold" if name == "running" else "leave"],
                               env=env(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        for name, home in homes.items()
    }
    states = {}
    for name, client in clients.items():
        assert client.stdout is not None
        line = client.stdout.readline()  # the server answers before the client prints (its start has a timeout)
        assert line, f"{name}: no server: {client.stderr.read() if client.stderr else ''}"[-3000:]
        states[name] = ServerState(**json.loads(line))
    return states, clients


def test_no_server_outlives_its_keeper_or_its_home(homes: dict[str, Path]) -> None:
    states, clients = start_clients(homes)
    try:
        for name, state in states.items():
            assert uvicorn_servers(homes[name]) == [state.server_pid], name
        for name in ("idle", "killed", "stopped"):
            assert clients[name].wait(timeout=60) == 0  # gone: its lease with it

        # a keeper whose server a run is using: `server stop` refuses; its home deleted, it stops the server
        refused = subprocess.run([sys.executable, "-m", "mafiabench.cli", "server", "stop"], env=env(homes["running"]),
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and "in use by a run" in refused.stderr, refused.stderr
        assert alive(states["running"].server_pid)
        shutil.rmtree(homes["running"])
        wait_for(lambda: not uvicorn_servers(homes["running"]), STOPPED_WITHIN_S, "the running keeper's server")
        wait_for(lambda: not alive(states["running"].keeper_pid), STOPPED_WITHIN_S, "the running keeper")
        assert clients["running"].poll() is None  # the run is still there: the keeper did not wait for it

        # an idle keeper (its idle time 900 s away): its home deleted, it stops the server now
        shutil.rmtree(homes["idle"])
        wait_for(lambda: not uvicorn_servers(homes["idle"]), STOPPED_WITHIN_S, "the idle keeper's server")
        wait_for(lambda: not alive(states["idle"].keeper_pid), STOPPED_WITHIN_S, "the idle keeper")

        # a keeper killed with SIGKILL: the kernel ends its server
        os.kill(states["killed"].keeper_pid, signal.SIGKILL)
        wait_for(lambda: not uvicorn_servers(homes["killed"]), STOPPED_WITHIN_S, "the killed keeper's server")

        # `mafiabench server stop` ends an idle one
        stopped = subprocess.run([sys.executable, "-m", "mafiabench.cli", "server", "stop"], env=env(homes["stopped"]),
                                 capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0 and "stopped 1 Prefect server" in stopped.stdout, stopped.stderr
        assert not uvicorn_servers(homes["stopped"]) and not alive(states["stopped"].keeper_pid)
    finally:
        for client in clients.values():
            if client.poll() is None:
                client.kill()
            client.communicate()
    for name, home in homes.items():
        assert not uvicorn_servers(home), f"{name}: a uvicorn server is left"


def test_each_python_environment_of_a_home_has_its_own_server(tmp_path: Path) -> None:
    venv, other = tmp_path / "venv", tmp_path / "other"
    venv.mkdir()
    other.mkdir()
    (tmp_path / "link").symlink_to(venv)
    home = tmp_path / "home"
    assert server_dir(home, str(venv)) == server_dir(home, str(tmp_path / "link"))  # one environment, two spellings
    assert server_dir(home, str(venv)) != server_dir(home, str(other))
    assert server_dir(home, str(venv)).parent == server_dir(home, str(other)).parent == home / "mafiabench-server"
    assert server_dir(home).name == environment_key(sys.prefix) and environment_key(str(venv)).startswith("venv-")
