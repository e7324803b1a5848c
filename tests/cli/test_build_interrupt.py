"""Ctrl-C during `mafiabench build` (issue 31 item 1, "one Ctrl-C stops any run"): dbt caught the interrupt and the
command said "error: dbt run failed in ..." with exit 2. Now: exit 130, the hint only, the published marts untouched
(publishing is one transaction), and the same command afterwards builds."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from mafiabench.commands.build import BUILD_HINT
from support.processes import CLI, Spawn, cli_env, wait_for

pytestmark = pytest.mark.slow

EXPERIMENT = """
name = "build-interrupt"
games_per_cell = 8
warehouse = "w.duckdb"

[[cells]]
name = "scripted"
agents = { default = "scripted/naive" }
"""


def test_one_ctrl_c_stops_a_build_with_the_hint_and_exit_130(tmp_path: Path, spawn: Spawn) -> None:
    tmp = tmp_path / "tmp"  # the build's scratch folders (mafiabench.scratch), watched below
    tmp.mkdir()
    env = cli_env(NO_COLOR="1", MAFIABENCH_LATENT_METHOD="map", TMPDIR=str(tmp))

    def cli(*args: str) -> subprocess.Popen[str]:
        return spawn([*CLI, *args], cwd=tmp_path, env=env)

    (tmp_path / "e.toml").write_text(EXPERIMENT)
    played = cli("run", "e.toml", "--no-prefect", "--no-progress")
    assert played.wait(timeout=600) == 0, played.communicate()
    build = cli("build", "--warehouse", "w.duckdb")
    # dbt has started (its work folder, named after the build's pid, is made when dbt first runs): a build of these
    # games takes 20 s or more from here
    wait_for(lambda: build.poll() is not None or any(tmp.glob(f"mafiabench-dbt-{build.pid}-*")), timeout=600)
    assert build.poll() is None, "the build ended before it could be interrupted"
    sent = time.monotonic()
    build.send_signal(signal.SIGINT)
    out, err = build.communicate(timeout=30)
    took = time.monotonic() - sent
    assert build.returncode == 130, (out, err)
    assert took < 5, took
    assert err.strip() == BUILD_HINT, err[-4000:]
    assert "Traceback" not in out + err and "dbt run failed" not in out + err
    again = cli("build", "--warehouse", "w.duckdb")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err[-3000:]
