"""Quiet, honest runs (issue 14, item 6), from a real `mafiabench run` through Prefect: without --verbose the
terminal gets no task-completion lines or server notices; with --verbose they come back, each printed whole above the
progress bar (a pty, so the bar is live); the bar ends on the summary's counts; numbers have thousands separators."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXPERIMENT = """
name = "quiet"
games_per_cell = 12
shard_size = 4

[[cells]]
name = "fake"
agents = { mafioso = "fake/alpha", default = "scripted/naive" }
"""
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
# A terminal starts over at a newline, a carriage return, or a cursor move / line erase (how the live bar redraws).
LINE_BREAK = re.compile(r"\r|\n|\x1b\[[0-9;?]*[A-Za-z]")
TIMESTAMPED = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} \| ")
# Prefect at its own default level (the test session quiets it): only mafiabench's defaults may hide INFO lines.
ENV = {**os.environ, "PREFECT_LOGGING_LEVEL": "INFO"}


def total_tokens(summary: str) -> int:
    match = re.search(r"tokens\s+([\d,]+) input \(([\d,]+) cached\) \+ ([\d,]+) output", summary)
    assert match, summary
    inp, _, out = (int(g.replace(",", "")) for g in match.groups())
    assert inp >= 1000 and f"{inp:,}" == match.group(1)  # thousands separators
    return inp + out


def test_a_run_is_quiet_by_default(tmp_path: Path) -> None:
    (tmp_path / "quiet.toml").write_text(EXPERIMENT)
    run = subprocess.run([sys.executable, "-m", "mafiabench.cli", "run", "quiet.toml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=False, env=ENV)
    assert run.returncode == 0, run.stderr[-3000:]
    for noise in ("Task run", "Finished in state", "Starting temporary server", "| INFO", "docs.prefect.io",
                  "anonymous usage data"):
        assert noise not in run.stderr, run.stderr[-3000:]
    assert "status                    completed" in run.stdout
    assert "retry attempts)" in run.stdout
    total_tokens(run.stdout)


def test_verbose_brings_prefect_lines_back_printed_whole_above_the_bar(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    (tmp_path / "quiet.toml").write_text(EXPERIMENT)
    child = pexpect.spawn(sys.executable, ["-m", "mafiabench.cli", "run", "quiet.toml", "--verbose"],
                          cwd=str(tmp_path), env=ENV, encoding="utf-8", timeout=300, dimensions=(50, 200))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before[-3000:]
    lines = [line for line in LINE_BREAK.split(COLOUR.sub("", child.before)) if line]
    logs = [line for line in lines if "| INFO" in line]
    assert any("Task run 'land-" in line and "Finished in state Completed()" in line for line in logs), logs
    assert any("Beginning flow run" in line for line in logs)
    bars = [line for line in lines if "━" in line]
    assert bars, "no progress bar on the terminal"
    # not garbled: every log line starts its own line, and no line carries both the bar and a log record
    assert all(TIMESTAMPED.match(line) for line in logs), [line for line in logs if not TIMESTAMPED.match(line)]
    assert not [line for line in bars if "| INFO" in line]
    # the bar ends on the summary's counts, in the summary's words
    summary = "\n".join(lines[lines.index(next(x for x in lines if x.startswith("Run "))):])
    assert f"0 failed, {total_tokens(summary):,} tokens, $0.0000" in bars[-1], bars[-1]
    assert "12/12 games" in bars[-1]
