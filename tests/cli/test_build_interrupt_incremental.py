"""Ctrl-C during an incremental `mafiabench build` (transform.build.increment): the build stages deltas of the
per-game tables and applies them only in the publish transaction, so an interrupted increment must leave every
published relation as it was, and the next build must still be incremental and equal a full rebuild, row for row
(the interrupt test of a whole build is test_build_interrupt.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from support.increments import assert_same, full_rebuild, published
from support.processes import CLI, Spawn, cli_env, wait_for

pytestmark = pytest.mark.slow

EXPERIMENT = """
name = "{name}"
games_per_cell = 6
warehouse = "w.duckdb"

[[cells]]
name = "scripted"
agents = {{ default = "scripted/naive" }}
"""


def test_ctrl_c_in_an_incremental_build_leaves_the_published_tables_and_the_next_increment(
    tmp_path: Path, spawn: Spawn
) -> None:
    tmp = tmp_path / "tmp"  # the build's scratch folders (mafiabench.scratch), watched below
    tmp.mkdir()
    env = cli_env(NO_COLOR="1", MAFIABENCH_LATENT_METHOD="map", TMPDIR=str(tmp))

    def cli(*args: str) -> subprocess.Popen[str]:
        return spawn([*CLI, *args], cwd=tmp_path, env=env)

    def finished(*args: str) -> None:
        proc = cli(*args)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, (args, err[-3000:])

    for name in ("first", "second"):
        (tmp_path / f"{name}.toml").write_text(EXPERIMENT.format(name=name))
    finished("run", "first.toml", "--no-prefect", "--no-progress")
    finished("build", "--warehouse", "w.duckdb")
    finished("run", "second.toml", "--no-prefect", "--no-progress")  # lands an increment, builds nothing
    warehouse = tmp_path / "w.duckdb"
    con = duckdb.connect(str(warehouse))
    before = published(con)
    assert sum(before["fct_games"].values()) == 6  # the first experiment's games only
    con.close()

    build = cli("build", "--warehouse", "w.duckdb")
    # dbt has started the increment's models (its work folder, named after the build's pid, is made when it first runs)
    wait_for(lambda: build.poll() is not None or any(tmp.glob(f"mafiabench-dbt-{build.pid}-*")), timeout=600)
    assert build.poll() is None, "the build ended before it could be interrupted"
    build.send_signal(2)  # SIGINT, as a terminal's Ctrl-C
    out, err = build.communicate(timeout=30)
    assert build.returncode == 130, (out, err[-3000:])

    con = duckdb.connect(str(warehouse))
    try:
        assert published(con) == before  # nothing of the interrupted increment was published, nothing staged left
        result = build_warehouse(con)
        assert result.published
        assert any(m.materialized == "incremental" for m in result.models), "the next build was not incremental"
        assert_same(published(con), full_rebuild(con, tmp_path))
    finally:
        con.close()
