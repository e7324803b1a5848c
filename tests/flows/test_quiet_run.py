"""Quiet, honest runs (issue 14, item 6), from a real `mafiabench run` through Prefect: without --verbose the
terminal gets no task completion lines or server notices; with --verbose they come back, each printed whole above the
progress bar (a pty, so the bar is live); the bar ends on the summary's counts; numbers have thousands separators."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from mafiabench.warehouse import landing

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


DETECT_EXPERIMENT = """
name = "quiet-detect"
variant = "async"
games_per_cell = 2
warehouse = "w.duckdb"
[rules]
day_seconds = 40
night_seconds = 20
n_players = 8
[[cells]]
name = "c"
agents = { default = "scripted/naive" }
[detector]
models = ["policy/most-voted"]
"""


def test_detect_through_prefect_is_quiet(tmp_path: Path) -> None:
    """`detect` printed Prefect's INFO lines unasked (issue 31 item 2): through Prefect, as quiet as `run`."""
    (tmp_path / "d.toml").write_text(DETECT_EXPERIMENT)
    run = subprocess.run([sys.executable, "-m", "mafiabench.cli", "run", "d.toml", "--no-prefect", "--no-progress"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=ENV)
    assert run.returncode == 0, run.stderr[-3000:]
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        con.execute("delete from raw_detections")  # what the run detected, to be detected again through Prefect
    detect = subprocess.run([sys.executable, "-m", "mafiabench.cli", "detect", "d.toml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, check=False, env=ENV)
    assert detect.returncode == 0, detect.stderr[-3000:]
    assert "landed" in detect.stdout and " 0 landed" not in detect.stdout, detect.stdout
    for noise in ("Task run", "Flow run", "Finished in state", "Starting temporary server", "| INFO",
                  "docs.prefect.io", "anonymous usage data"):
        assert noise not in detect.stdout + detect.stderr, (detect.stdout + detect.stderr)[-3000:]


def started_at(pid: int) -> float:
    """When process `pid` started (epoch seconds, to 10 ms), from /proc as the command reads its own."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def test_the_summarys_wall_time_is_the_whole_commands(tmp_path: Path) -> None:
    """An 8-game run said "wall time 1.1 s" after 16.9 s (issue 31 item 2): the summary counts from the process's
    start (interpreter, imports, Prefect). Bounded by events, not by a slack on the machine's load: at most the time
    from launching the command to reading the summary, at least the time from the process's start to the last shard
    the run wrote (its mtime, set by the kernel as it was written, before the summary)."""
    (tmp_path / "quiet.toml").write_text(EXPERIMENT)
    launched = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "mafiabench.cli", "run", "quiet.toml", "--no-progress"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
    began = started_at(proc.pid)
    assert proc.stdout is not None
    reported = seen_after = None
    for line in proc.stdout:
        match = re.search(r"wall time\s+([\d.,]+) s", line)
        if match:
            seen_after, reported = time.monotonic() - launched, float(match.group(1).replace(",", ""))
    assert proc.wait(timeout=300) == 0
    assert reported is not None and seen_after is not None, "no wall time in the summary"
    shards = landing.shard_files(landing.raw_dir(tmp_path / "warehouse" / "mafiabench.duckdb", "quiet"))
    assert shards, "the run wrote no shard"
    last_shard = max(p.stat().st_mtime for p in shards) - began
    assert last_shard > 0.5, last_shard  # interpreter, imports and Prefect come before the first game
    # shown to 0.1 s (0.05 rounding), the process's start read from /proc to 10 ms by each side
    assert last_shard - 0.1 <= reported <= seen_after + 0.1, (last_shard, reported, seen_after)
