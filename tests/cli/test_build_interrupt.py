"""Ctrl-C during `mafiabench build` (issue 31 item 1, "one Ctrl-C stops any run"): dbt caught the interrupt and the
command said "error: dbt run failed in ..." with exit 2. Now: exit 130, the hint only, the published marts untouched
(publishing is one transaction), and the same command afterwards builds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mafiabench.commands.build import BUILD_HINT

pytestmark = pytest.mark.slow

EXPERIMENT = """
name = "build-interrupt"
games_per_cell = 8
warehouse = "w.duckdb"

[[cells]]
name = "scripted"
agents = { default = "scripted/naive" }
"""


def cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "NO_COLOR": "1", "MAFIABENCH_LATENT_METHOD": "map"}
    return subprocess.Popen([sys.executable, "-m", "mafiabench.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def test_one_ctrl_c_stops_a_build_with_the_hint_and_exit_130(tmp_path: Path) -> None:
    (tmp_path / "e.toml").write_text(EXPERIMENT)
    played = cli("run", "e.toml", "--no-prefect", "--no-progress", cwd=tmp_path)
    assert played.wait(timeout=300) == 0, played.communicate()
    build = cli("build", "--warehouse", "w.duckdb", cwd=tmp_path)
    time.sleep(6)  # imports done, dbt staging the models (a build of these games takes 20 s or more)
    assert build.poll() is None, "the build ended before it could be interrupted"
    sent = time.monotonic()
    build.send_signal(signal.SIGINT)
    out, err = build.communicate(timeout=30)
    took = time.monotonic() - sent
    assert build.returncode == 130, (out, err)
    assert took < 5, took
    assert err.strip() == BUILD_HINT, err[-4000:]
    assert "Traceback" not in out + err and "dbt run failed" not in out + err
    again = cli("build", "--warehouse", "w.duckdb", cwd=tmp_path)
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err[-3000:]
