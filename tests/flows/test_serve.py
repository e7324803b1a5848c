"""`mafiabench serve`: a schedule in a stated time zone, runs that land games, a clean stop on SIGTERM (exit 0, no
traceback) that leaves no Prefect server behind; bad schedules named before anything starts."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.warehouse import landing

SMALL = """
name = "served"
games_per_cell = 6
shard_size = 4

[[cells]]
name = "naive"
agents = { default = "scripted/naive" }
"""


def processes_with(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_serve_runs_on_schedule_and_stops_cleanly_on_sigterm(
    tmp_path: Path, prefect_home: Callable[[Path], Path]
) -> None:
    (tmp_path / "served.toml").write_text(SMALL)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # serve starts its own server
    env.update(PREFECT_HOME=str(prefect_home(tmp_path / "prefect-home")), PREFECT_UI_ENABLED="false",
               PREFECT_RUNNER_POLL_FREQUENCY="1", PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="2")
    out, err = open(tmp_path / "out.txt", "w+b"), open(tmp_path / "err.txt", "w+b")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "mafiabench.cli", "serve", "served.toml", "--interval", "5", "--timezone",
         "Europe/Berlin"],
        cwd=tmp_path, env=env, stdout=out, stderr=err, start_new_session=True,
    )
    raw = landing.raw_dir(tmp_path / "warehouse" / "mafiabench.duckdb", "served")
    try:
        deadline = time.monotonic() + 180
        while len(landing.raw_records(raw)) < 6:  # a scheduled run played the games, in the working folder
            assert proc.poll() is None, (tmp_path / "err.txt").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "err.txt").read_text()[-3000:]
            time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        out.close()
        err.close()
    stdout, stderr = (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "never awaited" not in stderr
    assert stderr.rstrip().endswith("stopped serving")
    assert "every 5 s in time zone Europe/Berlin (next run" in stdout and "CET" in stdout
    port = int(re.search(r"started a Prefect server on http://127\.0\.0\.1:(\d+)", stdout).group(1))  # type: ignore[union-attr]
    assert not processes_with(f"--port {port}")  # the server it started is gone
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--cron", "0 3 * *"], "--cron: Invalid cron string"),
     (["--timezone", "Mars/Base"], '--timezone: Invalid timezone: "Mars/Base"'),
     (["--interval", "0"], "--interval must be > 0 seconds")],
)
def test_a_bad_schedule_is_named_before_anything_starts(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "served.toml").write_text(SMALL)
    assert main(["serve", str(tmp_path / "served.toml"), *args]) == 2
    assert message in capsys.readouterr().err
