"""A Ctrl-C while a run's worker processes are still starting (Python's start-up and imports, about a second) prints
the one-line resume hint and nothing else: each worker holds SIGINT from its first instruction (`workers.start_deaf`)
and drops it once it ignores Ctrl-C, the parent's to handle. Before, each worker printed a KeyboardInterrupt
traceback from the middle of an import, under the hint. Game workers (a model's games) and shard workers (policy
games a shard at a time) both; a real `mafiabench run` in its own process group, SIGINT as a terminal sends it, as
soon as a worker process exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.processes import CLI, Spawn, cli_env, cmdline, ctrl_c, descendants, exists, wait_for

ROOT = Path(__file__).resolve().parents[2]

GAME_WORKERS = """
[[cells]]
name = "model"
agents = {{ mafioso = "slowfake/m", default = "policy/random" }}

[endpoints.slowfake]
kind = "fake"
options = {{ latency_ms = 150 }}
"""
SHARD_WORKERS = """
[[cells]]
name = "policy"
agents = {{ default = "policy/random" }}
"""


def _workers(pid: int) -> list[int]:
    """The run's spawned workers (multiprocessing's resource tracker aside)."""
    return [p for p in descendants(pid) if "spawn_main" in cmdline(p)]


@pytest.mark.parametrize("cells", [GAME_WORKERS, SHARD_WORKERS], ids=["game-workers", "shard-workers"])
def test_a_ctrl_c_as_the_workers_start_prints_the_hint_alone(tmp_path: Path, spawn: Spawn, cells: str) -> None:
    exp = tmp_path / "start.toml"
    exp.write_text(f'name = "start"\ngames_per_cell = 400\nshard_size = 20\nwarehouse = "{tmp_path / "w.duckdb"}"\n'
                   "[concurrency]\ngames = 8\nprocesses = 2\n" + cells.format())
    run = spawn([*CLI, "run", str(exp), "--no-prefect", "--no-progress"], cwd=ROOT,
                env=cli_env(TMPDIR=str(tmp_path)))
    wait_for(lambda: bool(_workers(run.pid)) or run.poll() is not None, timeout=120)
    assert run.poll() is None, run.communicate()[1][-3000:]
    workers = _workers(run.pid)
    ctrl_c(run)  # the worker is still importing (a Ctrl-C at that moment printed its traceback 3 times in 3)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err[-3000:]
    assert re.fullmatch(r"interrupted: [\d,]+ of [\d,]+ planned games kept \(landed\), [\d,]+ to play; "
                        r"run the same command again to resume", err.strip()), err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and out == ""
    assert not [pid for pid in workers if exists(pid)]
