"""One Ctrl-C stops a run within 3 s, Prefect path included (issue 31, item 1): a real `mafiabench run` through the
shared local Prefect server, with game worker processes, gets SIGINT as a terminal sends it (to its whole process
group) while it plays. It exits 130 within 3 s with the resume hint and nothing else (no traceback, no crash report),
its children are gone (none left running or defunct), the server stays up for the next run and stops once idle, and
the resume plays exactly the missing games. A run that does not wind down (injected: a coroutine that ignores its
cancellation, a child that ignores SIGINT) is ended at `INTERRUPT_GRACE_S` by the first Ctrl-C and at once by a
second, its child killed and reaped and its temporary folders removed."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from mafiabench.commands import INTERRUPT_GRACE_S, RESUME_HINT
from mafiabench.prefect_server import ServerState, server_dir
from mafiabench.study.design import expand
from mafiabench.study.spec import load_experiment
from mafiabench.warehouse import landing
from support.processes import CLI, Spawn, cli_env, cmdline, ctrl_c, descendants, exists, wait_for

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

# 96 games of 3 calls at 150 ms, 8 at a time: about 15 games a second however loaded the machine (the calls sleep), so
# the Ctrl-C sent once 12 have landed finds the run some 5 s from its end, and the resume plays the rest in as many
# (200 games made the resume alone about 12 s).
EXPERIMENT = """
name = "ctrlc"
games_per_cell = 96
shard_size = 4
warehouse = "{warehouse}"

[[cells]]
name = "slow"
agents = {{ mafioso = "slowfake/m", default = "policy/random" }}

[endpoints.slowfake]
kind = "fake"
options = {{ latency_ms = 150 }}

[concurrency]
games = 8
processes = 2
"""


def env(home: Path, tmp: Path, idle: str = "2") -> dict[str, str]:
    """The server stops 2 s after its last lease goes: between the interrupted run and its resume the test holds one
    (`held`), so the resume finds the server up however long a loaded machine takes to start it."""
    return cli_env(PREFECT_HOME=str(home), TMPDIR=str(tmp), MAFIABENCH_PREFECT_IDLE_S=idle,
                   PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="300")  # a loaded CI machine starts it slowly


@contextlib.contextmanager
def held(home: Path) -> Iterator[None]:
    """The home's server lease, held as a run holds it (a shared lock: `mafiabench.prefect_server`)."""
    with open(server_dir(home) / "lease", "a+b") as lease:
        fcntl.flock(lease, fcntl.LOCK_SH)
        yield


def test_one_ctrl_c_stops_a_prefect_run_within_3_s_and_the_run_resumes(
    tmp_path: Path, spawn: Spawn, prefect_home: Callable[[Path], Path]
) -> None:
    warehouse = tmp_path / "wh" / "w.duckdb"
    home, tmp = prefect_home(tmp_path / "prefect-home"), tmp_path / "tmp"
    tmp.mkdir()
    exp = tmp_path / "ctrlc.toml"
    exp.write_text(EXPERIMENT.format(warehouse=warehouse))
    planned = {g.game_id for g in expand(load_experiment(exp))}
    folder = landing.raw_dir(warehouse, "ctrlc")
    cmd = [*CLI, "run", str(exp), "--no-progress"]

    run = spawn(cmd, cwd=ROOT, env=env(home, tmp))  # its own group: the terminal we imitate
    wait_for(lambda: len(landing.raw_records(folder)) >= 12, timeout=400)
    children = descendants(run.pid)
    assert len(children) >= 2, "two game workers are playing"
    state = ServerState.read(server_dir(home))
    assert state is not None and state.server_pid not in children and state.keeper_pid not in children
    with held(home):  # from before the Ctrl-C until the resume has run: the server has no idle gap to stop in
        t0 = time.monotonic()
        ctrl_c(run)
        out, err = run.communicate(timeout=60)
        elapsed = time.monotonic() - t0

        assert run.returncode == 130, err[-3000:]
        assert elapsed < 3.0, f"took {elapsed:.1f} s to stop"
        assert out == ""
        line = re.fullmatch(r"interrupted: ([\d,]+) of ([\d,]+) planned games kept \(landed\), ([\d,]+) to play; "
                            r"run the same command again to resume", err.strip())
        assert line, err[-3000:]  # one line: no traceback, no crash report, no Prefect line
        kept, total, remain = (int(g.replace(",", "")) for g in line.groups())
        assert total == len(planned) and kept + remain == total
        left = [pid for pid in children | descendants(run.pid) if exists(pid)]
        assert not left, f"processes left behind: {[(pid, cmdline(pid)) for pid in left]}"
        assert not list(tmp.glob("mafiabench-*"))
        landed_before = len(landing.raw_records(folder))
        assert 12 <= landed_before < len(planned)
        assert kept <= landed_before  # landed in the warehouse; a shard written but not landed lands at the next start

        # the shared server outlived the run, and the next one reuses it
        assert exists(state.server_pid)
        resumed = subprocess.run(cmd, cwd=ROOT, env=env(home, tmp), capture_output=True, text=True, timeout=600)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert ServerState.read(server_dir(home)) == state, "the resume reused the server"
    counts = dict(re.findall(r"^  (skipped \(already landed\)|loaded from raw folder|played) +(\d+)",
                             resumed.stdout, re.M))
    assert int(counts["skipped (already landed)"]) + int(counts["loaded from raw folder"]) == landed_before
    assert int(counts["played"]) == len(planned) - landed_before, resumed.stdout
    # no run holds the server now: it stops once idle
    wait_for(lambda: not exists(state.server_pid) and not exists(state.keeper_pid), timeout=300)
    assert ServerState.read(server_dir(home)) is None

    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        ids = [r[0] for r in con.execute("select game_id from raw_games").fetchall()]
    finally:
        con.close()
    assert sorted(ids) == sorted(planned)  # every planned game once: none lost, none twice


STUBBORN = """
import asyncio, subprocess, sys
from mafiabench import scratch
from mafiabench.commands import Interrupt
grace_s = float(sys.argv[1])

async def stubborn():
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, "
                              "signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"],
                             stdout=subprocess.PIPE)
    child.stdout.readline()  # it ignores SIGINT from here on
    folder = scratch.make("dbt")
    print(child.pid, folder, flush=True)
    while True:  # a run that does not wind down when cancelled
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            print("cancelled", flush=True)

with Interrupt(grace_s=grace_s) as interrupt:
    interrupt.run(stubborn())
"""


@pytest.mark.parametrize("presses", [1, 2])
def test_a_run_that_does_not_wind_down_is_ended_by_the_grace_timer_or_a_second_ctrl_c(
    tmp_path: Path, presses: int, spawn: Spawn
) -> None:
    """Timed from events, not sleeps: the second Ctrl-C is sent once the run has read the first (it says so), and
    with two presses the timer is set far off (60 s), so that ending well before it can only be the second press."""
    grace_s = INTERRUPT_GRACE_S if presses == 1 else 60.0
    proc = spawn([sys.executable, "-c", textwrap.dedent(STUBBORN), str(grace_s)], cwd=ROOT,
                 env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(tmp_path)})
    assert proc.stdout is not None
    child_pid, folder = proc.stdout.readline().split()
    assert Path(folder).is_dir()
    t0 = time.monotonic()
    ctrl_c(proc)
    if presses == 2:
        assert proc.stdout.readline().strip() == "cancelled"  # the first press reached the run, which goes on
        ctrl_c(proc)
    _out, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 130
    assert err.strip() == RESUME_HINT
    if presses == 1:
        assert INTERRUPT_GRACE_S - 0.1 <= elapsed < INTERRUPT_GRACE_S + 5.0  # the timer, not the run, ended it
    else:
        assert elapsed < grace_s / 2  # the second Ctrl-C does not wait for the timer
    assert not exists(int(child_pid)), "the child that ignores SIGINT is killed and reaped"
    assert not Path(folder).exists(), "the temporary folder is removed"
