"""A whole build starts the gate's suites over the raw tables as soon as it knows it is whole (publish._RawSuites):
on a thread of their own, before dbt runs (while dbt is imported beside), with the results the same suites give in
the gate; an incremental build starts none there (its gate proves them from the increment's rows)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from mafiabench import publish
from mafiabench.quality import gate as quality
from mafiabench.transform.build import replay
from support.gate_increments import RAW_SUITES, assert_same_gate, build, copy


def _watched(events: list[tuple[str, str]]) -> Any:
    """Patches recording each suite's thread and each dbt invocation, in order."""
    run_suites, run_dbt = quality.run_suites, replay.Session.run

    def suite(cursor: Any, suites: Any) -> Any:
        events.append((suites[0].name, threading.current_thread().name))
        return run_suites(cursor, suites=suites)

    def dbt(self: Any, con: Any, command: str, **kw: Any) -> Any:
        events.append((f"dbt {command}", threading.current_thread().name))
        return run_dbt(self, con, command, **kw)

    return mock.patch.object(quality, "run_suites", suite), mock.patch.object(replay.Session, "run", dbt)


def _early(events: list[tuple[str, str]]) -> list[str]:
    return [name for name, thread in events if thread.startswith("raw-suites")]


def _watched_build(landed: Path, tmp_path: Path, **options: Any) -> tuple[Any, list[tuple[str, str]]]:
    """A copy of `landed` built, and the suites' threads and dbt's invocations as they came."""
    events: list[tuple[str, str]] = []
    suites, dbt = _watched(events)
    con = copy(landed, tmp_path)
    try:
        with suites, dbt:
            return build(con, **options), events
    finally:
        con.close()


@pytest.mark.slow
def test_a_whole_build_runs_the_raw_suites_before_dbt(landed_increment: Path, tmp_path: Path) -> None:
    got, events = _watched_build(landed_increment, tmp_path, full_refresh=True)
    assert sorted(_early(events)) == sorted(RAW_SUITES)
    # Started before dbt's run: the first of them was called before dbt was (they run on while dbt works).
    first_dbt = [name for name, _ in events].index("dbt run")
    assert any(thread.startswith("raw-suites") for _, thread in events[:first_dbt])
    # The same results as the gate running them itself, in the same place of its results.
    con = copy(landed_increment, tmp_path)
    try:
        with mock.patch.object(publish._RawSuites, "__call__", lambda self, whole: None):
            in_gate = build(con, full_refresh=True)
    finally:
        con.close()
    assert got.published and in_gate.published
    assert_same_gate(got, in_gate)


@pytest.mark.slow
def test_an_incremental_build_starts_none_early(landed_increment: Path, tmp_path: Path) -> None:
    got, events = _watched_build(landed_increment, tmp_path)
    assert got.published and set(got.proven_suites) == set(RAW_SUITES)
    assert _early(events) == []


def test_a_build_stopped_early_runs_no_more_raw_suites(tmp_path: Path) -> None:
    """Ctrl-C while the raw suites are queued: the build stops after the one running, not after all ten."""
    from mafiabench.warehouse import raw
    from support.records import mini_record

    con = raw.connect(tmp_path / "w.duckdb")
    raw.load_records(con, [mini_record(f"g{i}") for i in range(3)])
    ran: list[str] = []

    def slow_suite(cursor: Any, suites: Any) -> Any:
        ran.append(suites[0].name)
        time.sleep(0.2)
        return []

    def interrupted_stage(con: Any, *, planned: Any, **options: Any) -> Any:
        planned(True)
        raise KeyboardInterrupt

    with (mock.patch.object(quality, "run_suites", slow_suite), mock.patch.object(publish, "stage", interrupted_stage),
          pytest.raises(KeyboardInterrupt)):
        publish.build_warehouse(con)
    con.close()
    assert 1 <= len(ran) < len(RAW_SUITES)
