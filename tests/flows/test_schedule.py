"""A scheduled study: a real `prefect server start`, the flow served with an interval schedule, one scheduled run
completed. Schedules do not work on Prefect's temporary server, hence the real one; every process this test starts
is killed (by process group) even when it fails."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mafiabench.warehouse import landing

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
name = "scheduled"
games_per_cell = 6
shard_size = 4
warehouse = "{warehouse}"

[[cells]]
name = "naive"
agents = {{ default = "scripted/naive" }}

[[cells]]
name = "policies"
agents = {{ default = "policy/informed" }}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def api(url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL what is left."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.fixture
def prefect_server(tmp_path: Path, prefect_home: Callable[[Path], Path]) -> Iterator[tuple[str, dict[str, str]]]:
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(prefect_home(tmp_path / "prefect-home")),
        "PREFECT_API_URL": api_url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_TASKS_DEFAULT_NO_CACHE": "true",
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    prefect = Path(sys.executable).with_name("prefect")
    server = subprocess.Popen(
        [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"prefect server exited: {(tmp_path / 'server.log').read_text()[-2000:]}")
            try:
                api(f"{api_url}/health")
                break
            except (urllib.error.URLError, OSError, ValueError):
                if time.monotonic() > deadline:
                    raise TimeoutError("prefect server did not start") from None
                time.sleep(0.5)
        yield api_url, env
    finally:
        stop(server)
        log.close()


def test_served_flow_runs_on_its_schedule(prefect_server: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    api_url, env = prefect_server
    warehouse = tmp_path / "wh" / "w.duckdb"
    exp = tmp_path / "scheduled.toml"
    exp.write_text(SMALL.format(warehouse=warehouse))
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    served = subprocess.Popen(
        [sys.executable, str(ROOT / "flows" / "study_flow.py"), "serve", str(exp), "--interval", "15"],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        completed: list[Any] = []
        while not completed:
            if served.poll() is not None:
                raise RuntimeError(f"serve exited: {(tmp_path / 'serve.log').read_text()[-3000:]}")
            if time.monotonic() > deadline:
                server_log = (tmp_path / "server.log").read_text()
                hint = (
                    " The server's scheduler crashed on SQLAlchemy 2.1: install sqlalchemy<2.1 (see pyproject)."
                    if "Can't evaluate bulk DML" in server_log
                    else ""
                )
                raise TimeoutError(f"no scheduled run completed.{hint} {(tmp_path / 'serve.log').read_text()[-3000:]}")
            time.sleep(1)
            runs = api(
                f"{api_url}/flow_runs/filter",
                {"flow_runs": {"state": {"type": {"any_": ["COMPLETED", "FAILED", "CRASHED"]}}}},
            )
            bad = [r for r in runs if r["state_type"] != "COMPLETED"]
            assert not bad, f"{bad[0]['state_name']}: {(tmp_path / 'serve.log').read_text()[-3000:]}"
            completed = runs
        run = completed[0]
        assert run["deployment_id"] is not None  # started by the schedule of the served deployment
        deployment = api(f"{api_url}/deployments/{run['deployment_id']}")
        assert deployment["name"] == "scheduled" and deployment["schedules"]
        assert run["parameters"]["experiment_path"] == str(exp)
    finally:
        stop(served)
        log.close()
    files = landing.raw_records(landing.raw_dir(warehouse, "scheduled"))
    assert len(files) == 12
