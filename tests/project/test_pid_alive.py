"""One test of "is that process gone" (`scratch.alive`), behind the scratch folders' sweep, the dashboards' stale
staging folders and the Prefect server's keeper: a running process is alive; an exited one is not, reaped or still a
zombie (a killed render's parent that has not waited for it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mafiabench import scratch
from mafiabench.dashboards.render import remove_stale_staging


def _zombie() -> subprocess.Popen[bytes]:
    """A child that has exited and not been waited for."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 60
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    return child


def test_running_exited_and_zombie_processes() -> None:
    assert scratch.alive(os.getpid())
    zombie = _zombie()
    try:
        assert not scratch.alive(zombie.pid)
    finally:
        zombie.wait()
    assert not scratch.alive(zombie.pid)  # reaped


def test_a_dead_renders_staging_folders_are_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    out = tmp_path / "dashboards"
    zombie = _zombie()
    try:
        dead = tmp_path / f".dashboards.tmp-{zombie.pid}-abc"
        live = tmp_path / f".dashboards.old-{os.getpid()}-def"
        dead.mkdir()
        live.mkdir()
        assert remove_stale_staging(out) == 1
        assert not dead.exists() and live.exists()
    finally:
        zombie.wait()
