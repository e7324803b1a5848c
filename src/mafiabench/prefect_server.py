"""One local Prefect server per Prefect home and Python environment, shared by the runs, started on demand and
stopped when idle, or by `mafiabench server stop`.

Prefect's temporary server costs 6 to 13 s to start, and `mafiabench run` used to start one per run; this module
starts one the first time a run needs it and lets the next runs find it, so a run with nothing to play costs what its
own work costs (BENCHMARKS.md, "Fixed cost of a run").

    url = ensure_server()      # before Prefect is imported: sets PREFECT_API_URL for this process

What runs: a small keeper process (`python -m mafiabench.prefect_server`) and its child, Prefect's API app under
uvicorn on a free port of 127.0.0.1 (its ephemeral mode: no UI, no scheduling services, exactly what Prefect's
temporary server ran). The keeper is detached from the run (its own session, not the run's child): a Ctrl-C in the
run's terminal does not reach it, and a run's exit leaves no child behind. Each run holds a shared lock on `lease` in
the server's folder for as long as it lives (the kernel drops it when the run exits, even by kill -9); the keeper
stops the server and exits once nobody has held the lease for `MAFIABENCH_PREFECT_IDLE_S` seconds (default 600; 0
stops it as soon as the last run ends). Starting and stopping are serialised by an exclusive lock on `start`, so a
run never picks up a server that is stopping.

Never orphaned: the server gets SIGKILL from the kernel when its keeper dies, however it dies (PR_SET_PDEATHSIG),
and a keeper whose folder disappears (a temporary PREFECT_HOME deleted) stops its server and exits at once.

The folder is `$PREFECT_HOME/mafiabench-server/<environment>/` (`environment_key`: the Python environment's folder
name and a hash of its path, so two virtual environments never share a server); Prefect's own SQLite database in
`$PREFECT_HOME` holds the flow runs. With `PREFECT_API_URL` set, that server is used and nothing is started;
`prefect server start` with `PREFECT_API_URL` gives the UI and schedules.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from mafiabench.scratch import alive

IDLE_ENV = "MAFIABENCH_PREFECT_IDLE_S"
DEFAULT_IDLE_S = 600.0
STARTUP_TIMEOUT_ENV = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
POLL_S = 0.25
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def prefect_home() -> Path:
    """Prefect's home folder (PREFECT_HOME, else ~/.prefect), as Prefect resolves it."""
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()


def environment_key(prefix: str | None = None) -> str:
    """A Python environment's name among the servers of a home: its folder's name and a hash of its real path (a
    venv's `python` and `python3` are one environment; two venvs, or a venv and the system Python, are two)."""
    path = os.path.realpath(prefix or sys.prefix)
    name = re.sub(r"[^A-Za-z0-9_-]", "", Path(path).name) or "python"
    return f"{name}-{hashlib.sha256(path.encode()).hexdigest()[:10]}"


def servers_dir(home: Path | None = None) -> Path:
    """Where the servers of a Prefect home keep their folders, one per Python environment."""
    return (home or prefect_home()) / "mafiabench-server"


def server_dir(home: Path | None = None, environment: str | None = None) -> Path:
    """This Python environment's (or `environment`'s, a `sys.prefix`) server folder in a Prefect home."""
    return servers_dir(home) / environment_key(environment)


def idle_seconds() -> float:
    raw = os.environ.get(IDLE_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_IDLE_S
    except ValueError:
        from mafiabench.errors import UserError

        raise UserError(f"{IDLE_ENV} must be a number of seconds, got {raw!r}") from None


@dataclass(frozen=True)
class ServerState:
    """What the keeper writes once its server answers: where it is and who runs it."""

    keeper_pid: int
    server_pid: int
    port: int
    python: str

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @classmethod
    def read(cls, folder: Path) -> ServerState | None:
        try:
            data = json.loads((folder / "state.json").read_text())
            return cls(int(data["keeper_pid"]), int(data["server_pid"]), int(data["port"]), str(data["python"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, folder: Path) -> None:
        tmp = folder / f".state.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(self.__dict__))
        os.replace(tmp, folder / "state.json")


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError, ValueError):
        return False


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[IO[bytes]]:
    with open(path, "a+b") as f:
        fcntl.flock(f, mode)
        try:
            yield f
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_lease: IO[bytes] | None = None  # this process's shared lock on the lease: held until it exits


def ensure_server(timeout: float | None = None) -> str | None:
    """The API URL of this Prefect home's shared server, started if none is running, with PREFECT_API_URL set to it
    in this process's environment (so call it before importing Prefect); this process holds the server's lease until
    it exits. None when PREFECT_API_URL already names a server (the user's own)."""
    global _lease
    if os.environ.get("PREFECT_API_URL"):
        return None
    folder = server_dir()
    folder.mkdir(parents=True, exist_ok=True)
    limit = timeout if timeout is not None else float(os.environ.get(STARTUP_TIMEOUT_ENV) or 90)
    with _flock(folder / "start", fcntl.LOCK_EX):
        state = ServerState.read(folder)
        if state is not None and alive(state.keeper_pid) and not healthy(state.api_url, timeout=10.0):
            _stop_keeper(state)  # one that does not answer is stopped, never left running beside a new one
            state = None
        if state is None or not alive(state.keeper_pid):
            state = _start_keeper(folder, limit)
        lease = open(folder / "lease", "a+b")  # noqa: SIM115 (held open, and locked, for the process's life)
        fcntl.flock(lease, fcntl.LOCK_SH)
    if _lease is not None:
        _lease.close()
    _lease = lease
    os.environ["PREFECT_API_URL"] = state.api_url
    _plain_http_client(folder)
    return state.api_url


def _plain_http_client(folder: Path) -> None:
    """Our server speaks plain HTTP on 127.0.0.1, yet every Prefect client builds a verifying SSL context for it
    (certifi's ~150 certificates: 27 ms of CPU each, two or three clients a run, none ever used over http://). Point
    PREFECT_API_SSL_CERT_FILE (read by Prefect's clients only, for the API's URL) at a file holding one certificate,
    written once beside the server's state, so that context costs half a millisecond (issue 31 item 2). A user's own
    setting wins; without certifi nothing changes."""
    if os.environ.get("PREFECT_API_SSL_CERT_FILE"):
        return
    path = folder / "plain-http-ca.pem"
    try:
        if not path.exists():
            import certifi

            text = Path(certifi.where()).read_text(encoding="ascii")
            end = text.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")
            pem = text[text.rindex("-----BEGIN CERTIFICATE-----", 0, end):end] + "\n"
            tmp = path.with_name(f"{path.name}.{os.getpid()}")
            tmp.write_text(pem, encoding="ascii")
            os.replace(tmp, path)
    except (ImportError, OSError, ValueError):
        return
    os.environ["PREFECT_API_SSL_CERT_FILE"] = str(path)


def _start_keeper(folder: Path, timeout: float) -> ServerState:
    """Start a keeper (detached: it is not our child once started) and wait until its server answers."""
    with contextlib.suppress(FileNotFoundError):
        (folder / "state.json").unlink()
    log = folder / "server.log"
    with open(log, "ab") as out:
        intermediate = subprocess.Popen(
            [sys.executable, "-m", "mafiabench.prefect_server", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # Ctrl-C in our terminal does not reach it
            env=_env_finding_us(),
        )
    intermediate.wait()  # it forks the keeper and exits at once: the keeper is nobody's child of ours
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = ServerState.read(folder)
        if state is not None:
            return state
        if (folder / "failed").exists():
            break
        time.sleep(0.05)
    failed = (folder / "failed").read_text() if (folder / "failed").exists() else f"not ready after {timeout:g} s"
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise RuntimeError(f"Prefect's local server did not start ({failed}); see {log}\n{tail}")


def _env_finding_us() -> dict[str, str]:
    """Our environment, with this mafiabench's folder first on PYTHONPATH (a checkout's src/ run in place)."""
    ours = str(Path(__file__).resolve().parents[1])
    paths = [ours, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != ours)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


# -- the keeper ----------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _uvicorn(port: int) -> subprocess.Popen[bytes]:
    """Prefect's API app, as its temporary server runs it (prefect.server.api.server.SubprocessASGIServer), set to
    die with the keeper."""
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    env.pop("PREFECT_API_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "error", "--lifespan", "on"],
        stdin=subprocess.DEVNULL,
        env=env,
        preexec_fn=_dies_with(os.getpid()),
    )


def _dies_with(keeper: int) -> Callable[[], None]:
    """For the server's child side of the fork: the kernel sends it SIGKILL when the keeper dies, however it dies (a
    kill -9 included), as testing/llama_server.py does for llama-server. A keeper that died before the request
    (the child's parent is no longer it) ends the child at once."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork: the child only calls it

    def request() -> None:  # pragma: no cover - runs in the child between fork and exec
        with contextlib.suppress(OSError, AttributeError):
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != keeper:
            os._exit(1)

    return request


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def keep(folder: Path) -> int:
    """The keeper: start the server, publish its state, stop it after `idle_seconds()` without a lease, on SIGTERM
    or SIGINT, or as soon as its folder is gone (a deleted PREFECT_HOME); whatever ends this function stops the
    server first, and the kernel stops it if the keeper itself is killed."""
    (folder / "failed").unlink(missing_ok=True)
    identity = folder.stat().st_ino
    timeout = float(os.environ.get(STARTUP_TIMEOUT_ENV) or 90)
    stopping = False

    def on_term(*_: object) -> None:
        nonlocal stopping
        stopping = True

    def gone() -> bool:
        try:
            return folder.stat().st_ino != identity
        except OSError:
            return True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    process: subprocess.Popen[bytes] | None = None
    try:
        state: ServerState | None = None
        for _ in range(5):  # a port taken between choosing and binding: choose again
            port = _free_port()
            process = _uvicorn(port)
            state = ServerState(os.getpid(), process.pid, port, sys.executable)
            deadline = time.monotonic() + timeout
            while process.poll() is None and time.monotonic() < deadline and not stopping and not gone():
                if healthy(state.api_url, timeout=1.0):
                    break
                time.sleep(0.1)
            else:
                if process.poll() is None:
                    _stop(process)
                    if stopping or gone() or time.monotonic() >= deadline:
                        break
                continue
            break
        if process is None or state is None or process.poll() is not None or stopping or gone() \
                or not healthy(state.api_url):
            if not gone():
                code = process.returncode if process is not None else None
                (folder / "failed").write_text(f"server exited with code {code}")
            return 1
        state.write(folder)
        _serve_until_idle(folder, state, process, lambda: stopping, gone)
        return 0
    finally:
        if process is not None and process.poll() is None:
            _stop(process)


def _serve_until_idle(folder: Path, state: ServerState, process: subprocess.Popen[bytes],
                      stopping: Callable[[], bool], gone: Callable[[], bool]) -> None:
    """Poll until the server exits, a signal, the folder's disappearance, or `idle_seconds()` without a lease; then
    withdraw the state file (under the start lock, so no run picks the server up meanwhile)."""
    idle = idle_seconds()
    idle_since = time.monotonic()
    with open(folder / "lease", "a+b") as lease:
        while process.poll() is None and not stopping() and not gone():
            time.sleep(POLL_S)
            if not _nobody_holds(lease):
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= idle:
                with _flock(folder / "start", fcntl.LOCK_EX):
                    if _nobody_holds(lease):
                        _retire(folder, state)
                        return
                idle_since = time.monotonic()
    if not gone():
        with _flock(folder / "start", fcntl.LOCK_EX):
            _retire(folder, state)


def _nobody_holds(lease: IO[bytes]) -> bool:
    try:
        fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(lease, fcntl.LOCK_UN)
    return True


def _retire(folder: Path, state: ServerState) -> None:
    """Withdraw the state file (ours only), so no run picks up the server being stopped."""
    if ServerState.read(folder) == state:
        (folder / "state.json").unlink(missing_ok=True)


def _stop_keeper(state: ServerState, timeout: float = 10.0) -> None:
    """SIGTERM a keeper (it stops its server and exits) and SIGKILL it if it has not exited by `timeout` (its server
    then dies with it); a server still there after that (a keeper of an older version) is killed too."""
    keeper, server = state.keeper_pid, state.server_pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(keeper, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(keeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(keeper):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(keeper, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while alive(server) and _is_uvicorn(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(server) and _is_uvicorn(server):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(server, signal.SIGKILL)


def _is_uvicorn(pid: int) -> bool:
    """Whether `pid` is still a uvicorn server (not a process that took over the number)."""
    try:
        return b"uvicorn" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def running_servers(home: Path | None = None) -> list[tuple[Path, ServerState]]:
    """The servers of a Prefect home whose keeper runs, every Python environment's: (folder, state)."""
    found = []
    for folder in sorted(servers_dir(home).glob("*/")):
        state = ServerState.read(folder)
        if state is not None and alive(state.keeper_pid):
            found.append((folder, state))
    return found


def in_use(folder: Path) -> bool:
    """Whether a run holds the lease of the server in `folder`."""
    try:
        with open(folder / "lease", "a+b") as lease:
            return not _nobody_holds(lease)
    except OSError:
        return False


def stop_server(home: Path | None = None, timeout: float = 10.0, *, every_environment: bool = False) -> int:
    """Stop a home's shared server now (this Python environment's, or with `every_environment` all of them); how
    many were running."""
    mine = server_dir(home)
    stopped = 0
    for folder, state in running_servers(home):
        if every_environment or folder == mine:
            _stop_keeper(state, timeout)
            stopped += 1
    return stopped


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    if os.fork() > 0:  # the run waits for this parent only: the keeper below is reparented, nobody's child of its
        return 0
    os.setsid()
    return keep(folder)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
