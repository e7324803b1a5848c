"""Where the test suite's builds spend their dbt time: a pytest plugin that times each `dbt run` and `dbt test` a
build asks for (`transform.build.replay.Session.run`, in the pytest processes: builds in commands the tests start are
not counted) and prints, when the session ends, their count and seconds by how they ran: replayed, by dbt (no
record, or a replay that stopped), or by dbt because the build was `--full-refresh`; a whole build's or an increment's.
Seconds are wall-clock, each command's own (on two workers, beside the other worker's).

    PYTHONPATH=$PWD/src:$PWD/tests:$PWD/benchmarks .venv/bin/python -m pytest -p bench_suite_dbt \\
        -n 2 --dist loadfile -p no:cacheprovider -q tests/transform/test_incremental_build.py

Each process (xdist's workers too) appends one line per command to `$BENCH_SUITE_DBT` (default: a file in the system's
temporary folder named after the controlling process), which the controller reads and removes at the end.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest


def _log() -> Path:
    return Path(os.environ.setdefault("BENCH_SUITE_DBT",
                                      str(Path(tempfile.gettempdir()) / f"bench-suite-dbt-{os.getpid()}.jsonl")))


def pytest_configure(config: pytest.Config) -> None:
    from mafiabench.transform.build import replay

    log = _log()
    run = replay.Session.run

    def timed(self: replay.Session, con: Any, command: str, **kw: Any) -> Any:
        t0, before = time.perf_counter(), len(self.replayed)
        try:
            return run(self, con, command, **kw)
        finally:
            how = "full-refresh" if not self.allowed else "replayed" if len(self.replayed) > before else "dbt"
            shape = "increment" if (kw.get("variables") or {}).get("increment") else "whole"
            with log.open("a") as f:
                f.write(json.dumps({"command": command, "how": how, "shape": shape,
                                    "s": time.perf_counter() - t0}) + "\n")

    replay.Session.run = timed  # type: ignore[method-assign]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    log = _log()
    totals: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for line in log.read_text().splitlines() if log.exists() else []:
        r = json.loads(line)
        t = totals[(r["command"], r["how"], r["shape"])]
        t[0] += 1
        t[1] += r["s"]
    log.unlink(missing_ok=True)
    terminalreporter.section("dbt in the suite's builds (this process and its workers)")
    terminalreporter.write_line(f"{'command':8} {'how':13} {'shape':10} {'runs':>5} {'s':>8} {'each':>6}")
    for (command, how, shape), (n, s) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        terminalreporter.write_line(f"{command:8} {how:13} {shape:10} {int(n):5d} {s:8.1f} {s / n:6.1f}")
    terminalreporter.write_line(f"{'all':33} {int(sum(n for n, _ in totals.values())):5d} "
                                f"{sum(s for _, s in totals.values()):8.1f}")
