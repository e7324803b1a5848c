"""A run that stops on a user's error inside the Prefect flow prints that error as one line, not Prefect's ERROR
traceback and failed-state lines before it (issue 40 item 2): here a cell changed since its games were landed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXPERIMENT = """
name = "changed"
games_per_cell = 2
warehouse = "w.duckdb"
[rules]
discussion_rounds = {rounds}
[[cells]]
name = "c"
agents = {{ default = "policy/random" }}
"""


def run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mafiabench.cli", "run", "e.toml", "--no-progress", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)


def test_a_user_error_inside_the_flow_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "e.toml").write_text(EXPERIMENT.format(rounds=2))
    assert run(tmp_path, "--no-prefect").returncode == 0
    (tmp_path / "e.toml").write_text(EXPERIMENT.format(rounds=3))
    refused = run(tmp_path)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith("error: experiment 'changed': 1 cell(s) changed")
