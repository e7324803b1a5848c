"""kill -9 on the Prefect path leaves no debris: the shared local Prefect server stops once no run holds it (a
killed run's hold goes with it; the idle time is cut to 2 s here), and the next run removes the dashboard staging
folders, raw temp files and temporary dbt folders a killed run left. A second run on a busy warehouse is refused
before Prefect starts, with one clear line and no traceback; `query` gets in between landings of a running study."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from mafiabench.warehouse import landing
from support.processes import CLI, Spawn, wait_for

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

EXPERIMENT = """
name = "debris"
games_per_cell = 40
shard_size = 5
warehouse = "{warehouse}"

[[cells]]
name = "slow"
agents = {{ mafioso = "slowfake/m", default = "policy/random" }}

[[cells]]
name = "policies"
agents = {{ default = "policy/random" }}
games = 20

[endpoints.slowfake]
kind = "fake"
options = {{ latency_ms = 200 }}  # slow enough that the run still plays when `query` comes, at any load

[concurrency]
games = 4
"""


def env(home: Path) -> dict[str, str]:
    (home.parent / "tmp").mkdir(exist_ok=True)
    out = {
        **os.environ,
        "TMPDIR": str(home.parent / "tmp"),  # the runs' temporary folders (mafiabench.scratch), checked below
        "PYTHONPATH": str(ROOT / "src"),
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",  # a loaded CI machine starts it slowly
        "MAFIABENCH_PREFECT_IDLE_S": "2",
    }
    out.pop("PREFECT_API_URL", None)
    return out


def prefect_servers(home: Path) -> list[int]:
    """Live processes serving Prefect's API with this PREFECT_HOME."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            environ = (d / "environ").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"uvicorn" in cmd and f"PREFECT_HOME={home}".encode() in environ.split(b"\0") and state != "Z":
            found.append(int(d.name))
    return found


def kill9(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()


def test_kill_9_on_the_prefect_path_leaves_no_server_and_no_staging_folder(
    tmp_path: Path, spawn: Spawn, prefect_home: Callable[[Path], Path]
) -> None:
    warehouse = tmp_path / "wh" / "w.duckdb"
    home = prefect_home(tmp_path / "prefect-home")
    dash = tmp_path / "dash"
    exp = tmp_path / "debris.toml"
    exp.write_text(EXPERIMENT.format(warehouse=warehouse))
    folder = landing.raw_dir(warehouse, "debris")

    def start(exp: Path, home: Path, dash: Path, *extra: str) -> subprocess.Popen[str]:
        return spawn([*CLI, "run", str(exp), "--no-progress", "--dashboards", str(dash), *extra], cwd=ROOT,
                     env=env(home))

    # 1. killed while playing: the server must not outlive it for longer than its idle time
    first = start(exp, home, dash, "--publish")
    wait_for(lambda: len(landing.raw_records(folder)) >= 10, timeout=600)
    assert prefect_servers(home), "the local Prefect server is up"
    # a second run is refused before Prefect starts: fast, one clear line, no traceback
    t0 = time.monotonic()
    second = subprocess.run(
        [sys.executable, "-m", "mafiabench.cli", "run", str(exp), "--no-progress"],
        cwd=ROOT, env=env(tmp_path / "other-home"), capture_output=True, text=True, timeout=120,
    )
    assert second.returncode == 2 and time.monotonic() - t0 < 120  # imports only: no Prefect server is started
    assert "in use by another run" in second.stderr and f"pid {first.pid}" in second.stderr
    assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
    assert not prefect_servers(tmp_path / "other-home")
    # `query` gets in between landings of the running study (on a loaded machine a landing can hold the warehouse
    # longer than the query waits, 30 s: it is asked again, as its message says)
    for _ in range(10):
        q = subprocess.run(
            [sys.executable, "-m", "mafiabench.cli", "query", "select count(*) as n from raw_games",
             "--warehouse", str(warehouse)],
            cwd=ROOT, env=env(home), capture_output=True, text=True, timeout=600,
        )
        if "stayed busy" not in q.stderr:
            break
    assert q.returncode == 0, q.stderr
    (folder / ".tmp-half.json").write_text('{"game_id": "cut')  # as a kill mid-write leaves it
    kill9(first)
    wait_for(lambda: not prefect_servers(home), timeout=300)

    # 2. killed while rendering the dashboards: its staging folder stays behind
    resumed = start(exp, home, dash, "--publish")
    parent = dash.parent
    wait_for(lambda: list(parent.glob(".dash.tmp-*")), timeout=600)
    kill9(resumed)
    wait_for(lambda: not prefect_servers(home), timeout=300)
    assert list(parent.glob(".dash.tmp-*")), "the killed render left its staging folder"

    # 3. the next run cleans up what the killed ones left, and finishes
    final = start(exp, home, dash, "--publish")
    out, err = final.communicate(timeout=1200)
    assert final.returncode == 0, err[-3000:]
    assert "status                    completed" in out
    assert not list(parent.glob(".dash.tmp-*")) and not list(parent.glob(".dash.old-*"))
    assert not list(folder.glob(".tmp-*"))
    assert not list((tmp_path / "tmp").glob("mafiabench-*")), "the killed runs' dbt folders are swept, ours removed"
    assert (dash / "index.html").is_file()
    wait_for(lambda: not prefect_servers(home), timeout=300)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        (n,) = con.execute("select count(*) from raw_games").fetchone()  # type: ignore[misc]
    finally:
        con.close()
    assert n == 60
