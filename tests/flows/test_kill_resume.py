"""kill -9 a running `mafiabench run`, twice, then resume: exactly the planned games, none twice, none partial.
A second run started while the first holds the warehouse gets a clear error naming the first's pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from mafiabench.study.design import expand
from mafiabench.study.spec import load_experiment
from mafiabench.warehouse import landing
from support.processes import CLI, Spawn
from support.processes import wait_for as waited_for

pytestmark = pytest.mark.slow

EXPERIMENT = """
name = "killme"
games_per_cell = 120
shard_size = 10
warehouse = "{warehouse}"

[[cells]]
name = "slow"
agents = {{ default = "slowfake/m" }}

[[cells]]
name = "policies"
agents = {{ default = "policy/random" }}
games = 30

[endpoints.slowfake]
kind = "fake"
options = {{ latency_ms = 60, p_rate_limit = 0.05 }}

[models.default]
backoff_base_s = 0.0

[concurrency]
games = 8
"""


def test_kill_9_twice_then_resume(tmp_path: Path, spawn: Spawn) -> None:
    warehouse = tmp_path / "wh" / "w.duckdb"
    exp_path = tmp_path / "killme.toml"
    exp_path.write_text(EXPERIMENT.format(warehouse=warehouse))
    planned = {g.game_id for g in expand(load_experiment(exp_path))}
    folder = landing.raw_dir(warehouse, "killme")
    lock = landing.lock_path(warehouse)

    def landed_files() -> int:
        return len(landing.raw_records(folder))

    def start(exp: Path) -> subprocess.Popen[str]:
        return spawn([*CLI, "run", str(exp), "--no-prefect", "--no-progress"])

    def wait_for(predicate: object) -> None:  # events; the cap only ends a test that hangs
        waited_for(predicate, timeout=600)

    first = start(exp_path)
    try:
        wait_for(lambda: lock.exists() and lock.read_text().strip() and landed_files() >= 5)
        # Stopped, the first run holds its lock and plays nothing while the second starts, however long that takes
        # on a loaded machine (running, it could finish every game before the second run is up).
        os.kill(first.pid, signal.SIGSTOP)
        second = subprocess.run(
            [sys.executable, "-m", "mafiabench.cli", "run", str(exp_path), "--no-prefect", "--no-progress"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert second.returncode == 2
        assert "in use by another run" in second.stderr and f"pid {first.pid}" in second.stderr
        os.kill(first.pid, signal.SIGCONT)
        wait_for(lambda: landed_files() >= 40)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.kill()
        first.wait()
    after_first = landed_files()
    assert 40 <= after_first < len(planned)

    resumed = start(exp_path)
    try:
        wait_for(lambda: landed_files() >= after_first + 30)
        os.kill(resumed.pid, signal.SIGKILL)
    finally:
        resumed.kill()
        resumed.wait()

    final = start(exp_path)
    out, err = final.communicate(timeout=900)
    assert final.returncode == 0, err
    assert "status                    completed" in out

    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        ids = [r[0] for r in con.execute("select game_id from raw_games").fetchall()]
        statuses = {r[0] for r in con.execute("select distinct status from raw_games").fetchall()}
        runs = con.execute("select status from raw_runs order by started_at").fetchall()
        calls_games = con.execute("select count(distinct game_id) from raw_model_calls").fetchone()
    finally:
        con.close()
    assert sorted(ids) == sorted(planned)  # exactly the planned games, each once
    assert statuses <= {"finished", "failed"}
    assert calls_games is not None and calls_games[0] == 120  # every model game has its calls, once
    assert [r[0] for r in runs] == ["running", "running", "completed"]  # the killed runs stay marked as such
    stored = list(landing.raw_history(folder))
    assert {g for g, _ in stored} == planned
    assert not list(folder.glob(".tmp-*"))  # the partial files a kill left were cleaned up
    for gid, line in stored:
        assert json.loads(line)["game_id"] == gid  # none partial
    # each shard file was landed once: the resume landed what the kills left written but not landed
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        marked = {f for (f,) in con.execute(f"select file from {landing.LANDED_FILES}").fetchall()}
    finally:
        con.close()
    assert marked == {p.name for p in landing.shard_files(folder)}
