"""Fresh Prefect homes that start their server fast: a server started in an empty home first migrates Prefect's
database and registers its block types (about half of its start: 39 s -> 20 s at load 25, measured with
`ensure_server` beside the suite), so one home is set up that way once per test session, shared by the xdist workers,
and each test that needs a home of its own gets a copy of it (database and block memo: no server, no run, no lease)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVERS = "mafiabench-server"  # the shared server's folder in a home (mafiabench.prefect_server): never copied

# What a run does first (`ensure_server`), then the server is stopped: the home is left migrated and idle.
SET_UP = "from mafiabench.prefect_server import ensure_server, stop_server; ensure_server(); stop_server()"


def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's set-up home, made by the first worker that asks (the others wait on its lock)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    home = root / "prefect-home-template"
    with open(root / "prefect-home-template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (home / "done").is_file():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir()
            env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PREFECT_HOME": str(home),
                   "MAFIABENCH_PREFECT_IDLE_S": "0", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
            env.pop("PREFECT_API_URL", None)
            done = subprocess.run([sys.executable, "-c", SET_UP], env=env, capture_output=True, text=True,
                                  timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            assert (home / "prefect.db").is_file(), sorted(p.name for p in home.iterdir())
            shutil.rmtree(home / SERVERS, ignore_errors=True)
            (home / "done").touch()
    return home


def copy_home(template: Path, home: Path) -> Path:
    """A new home at `home` (which must not exist) holding the template's database and memo."""
    shutil.copytree(template, home, ignore=shutil.ignore_patterns(SERVERS, "done"))
    return home
