"""A Ctrl-C at any moment of a command's start ends it without a traceback: while it still imports and assembles
itself, quietly with exit 130 (`mafiabench.__main__`: nothing has started); once it runs, as the command handles
Ctrl-C (a run's resume hint). Before, a Ctrl-C in the first second printed the traceback of whichever import it
interrupted (exit -2). Between the two (the command parsed, not yet running), typer ends it silently with 130.
`python -m mafiabench`, the installed command's own entry, as a terminal starts it."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import pytest

from mafiabench.__main__ import NOTHING_STARTED
from support.processes import CLI, Spawn, cli_env, ctrl_c

ROOT = Path(__file__).resolve().parents[2]

EXPERIMENT = """
name = "start"
games_per_cell = 200
shard_size = 10
warehouse = "{warehouse}"

[[cells]]
name = "policy"
agents = {{ default = "policy/random" }}
"""


def test_the_installed_command_is_this_entry() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"mafiabench": "mafiabench.__main__:run"}


@pytest.mark.parametrize("after_s", [0.15, 0.3, 0.45, 0.6, 0.8, 1.0, 1.3, 1.7])
def test_a_ctrl_c_during_the_start_prints_no_traceback(tmp_path: Path, spawn: Spawn, after_s: float) -> None:
    assert CLI[1:] == ("-m", "mafiabench")  # the installed command's entry
    exp = tmp_path / "start.toml"
    exp.write_text(EXPERIMENT.format(warehouse=tmp_path / "w.duckdb"))
    run = spawn([*CLI, "run", str(exp), "--no-prefect", "--no-progress"], cwd=ROOT,
                env=cli_env(TMPDIR=str(tmp_path)))
    time.sleep(after_s)  # a moment of its start, not an event: the point is any moment
    ctrl_c(run)
    _out, err = run.communicate(timeout=60)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    if run.returncode == 0:  # the games all played first (a fast machine): nothing was interrupted
        return
    assert run.returncode == 130, (run.returncode, err[-3000:])
    # quietly before the command ran, typer's silent exit between, the run's own line once it runs
    assert err in (NOTHING_STARTED, "") or err.strip().startswith("interrupted:"), err[-3000:]
