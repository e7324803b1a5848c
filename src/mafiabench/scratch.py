"""Temporary folders that do not outlive their process: `$TMPDIR/mafiabench-<kind>-<pid>-<random>`.

Each is removed when its process exits (atexit), when a run is ended at once after Ctrl-C (`remove_all`, called
before `os._exit` by `commands.Interrupt`), and, when its process could not clean up (kill -9, a crash), by the next
process that makes one of the same kind: `make` first removes the folders of that kind whose process is gone (the pid
in the name). Folders of the older unnamed form (`mafiabench-dbt-<random>`) are left alone.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_mine: list[Path] = []
_NAME = re.compile(r"^mafiabench-(?P<kind>[a-z]+)-(?P<pid>\d+)-")


def make(kind: str) -> Path:
    """A fresh folder `mafiabench-<kind>-<pid>-...` in the temporary folder, removed when this process exits."""
    sweep(kind)
    path = Path(tempfile.mkdtemp(prefix=f"mafiabench-{kind}-{os.getpid()}-"))
    if not _mine:
        atexit.register(remove_all)
    _mine.append(path)
    return path


@contextmanager
def folder(kind: str) -> Iterator[Path]:
    """`make(kind)` for the duration of a `with` block: removed at its end (and, like any, at exit or by a sweep)."""
    path = make(kind)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if path in _mine:
            _mine.remove(path)


def remove_all() -> None:
    """Remove every folder this process made (at exit, and before a hard exit)."""
    while _mine:
        shutil.rmtree(_mine.pop(), ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not reaped, does not): the one test of "is its process gone"
    for folders named after a process, here and in the dashboards' staging, and for the Prefect server's keeper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return state not in ("Z", "X")


def sweep(kind: str) -> list[Path]:
    """Remove the folders of `kind` whose process is gone; the folders removed."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"mafiabench-{kind}-*"):
        match = _NAME.match(path.name)
        if match is None or match["kind"] != kind or int(match["pid"]) == os.getpid() or alive(int(match["pid"])):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
