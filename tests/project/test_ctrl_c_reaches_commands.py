"""The suite's commands take Ctrl-C however the suite was started (support.processes.hear_ctrl_c): a process that
ignores SIGINT, as a script's background job does, passes that on to every command it starts unless it undoes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
CHILD = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


@pytest.mark.parametrize(("undo", "heard"), [(False, "False"), (True, "True")])
def test_a_suite_started_ignoring_ctrl_c_gives_its_commands_ctrl_c(undo: bool, heard: str) -> None:
    """Without the undo the child ignores Ctrl-C (the hazard is real here); with it, the child has Python's handler."""
    parent = (
        "import signal, subprocess, sys\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "from support.processes import hear_ctrl_c\n"
        + ("hear_ctrl_c()\n" if undo else "")
        + f"print(subprocess.run([sys.executable, '-c', {CHILD!r}], capture_output=True, text=True).stdout.strip())\n"
    )
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == heard
