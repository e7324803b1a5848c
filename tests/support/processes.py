"""Commands in child processes, as a terminal runs them: the environment they get, Ctrl-C to their process group,
and what is left of them in /proc. The `spawn` fixture (tests/conftest.py) starts them and ends what a failed test
left running; the waits here poll for an event, with a cap, never a fixed sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# `mafiabench ...` in a child process, through the installed command's entry (`mafiabench.__main__`): the checkout's own
# code, whatever is installed.
CLI = (sys.executable, "-m", "mafiabench")
# The `spawn` fixture's type: `spawn(argv, cwd=..., env=..., **popen)` -> the started process.
Spawn = Callable[..., "subprocess.Popen[str]"]


def cli_env(**extra: str) -> dict[str, str]:
    """This process's environment with the checkout's src first on PYTHONPATH and no Prefect server named (a run
    starts or shares its own local one), plus `extra`."""
    out = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **extra}
    out.pop("PREFECT_API_URL", None)
    return out


def hear_ctrl_c() -> None:
    """Let the commands this process starts take Ctrl-C as from a terminal, however it was started: a script's
    background job (`make test &`) ignores SIGINT and an ignored signal stays ignored across exec (a `play` at a pty
    then never heard its Ctrl-C); a handler, unlike SIG_IGN, is reset to the default at exec."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def ctrl_c(proc: subprocess.Popen[str]) -> None:
    """SIGINT as a terminal sends it: to the whole process group (the child was started in its own session)."""
    os.killpg(proc.pid, signal.SIGINT)


def end(proc: subprocess.Popen[str]) -> None:
    """Kill what is left of `proc` (its group, when it leads one) and reap it; close its pipes."""
    if proc.poll() is None:
        try:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children, their children, ...)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"


def exists(pid: int) -> bool:
    """Running or defunct: any process table entry left."""
    return Path(f"/proc/{pid}").exists()


def wait_for(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.05)
