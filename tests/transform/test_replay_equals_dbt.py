"""A scheduled build replays what dbt did at the published build (transform.build.replay) only when nothing dbt's
statements depend on changed, and then publishes what dbt would, row for row, with the same gate verdicts and the
same results per model and test (but their seconds)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import replay
from mafiabench.transform.build.dbt_runner import PACKAGED_PROJECT, NodeResult
from mafiabench.warehouse.landing import record_run
from support.increments import assert_same, published
from support.replays import copy, heard, scheduled

# Its warehouses' first builds run dbt, then replay their own records; a long file, it starts early (tests/conftest.py).
pytestmark = [pytest.mark.dbt_runs_each_build, pytest.mark.slow]


def _results(results: list[NodeResult]) -> list[dict[str, Any]]:
    return sorted(({k: v for k, v in dataclasses.asdict(r).items() if k != "seconds"} for r in results),
                  key=lambda r: (r["kind"], r["name"]))


def _verdicts(result: Any) -> list[str]:
    """In any order: dbt's tests finish in another order each time on more than one thread."""
    return sorted(repr((v.suite, v.expectation, v.rule, v.kwargs, v.success, v.element_count, v.unexpected_count,
             v.failing_rows)) for v in result.validation)


def test_a_replayed_increment_publishes_and_reports_what_dbt_does(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    con = scheduled()
    by_dbt = copy(con, tmp_path)
    by_dbt.execute(f"delete from {replay.TABLE}")  # no records: dbt runs
    runs = heard(monkeypatch)
    replayed = build_warehouse(con)
    ran = build_warehouse(by_dbt)
    assert replayed.published and ran.published
    assert replayed.replayed == ["run", "test"] and ran.replayed == []
    assert "dbt run and test replayed" in replayed.summary() and "replayed" not in ran.summary()  # the CLI's line
    assert_same(published(con), published(by_dbt))
    assert _verdicts(replayed) == _verdicts(ran)
    assert sorted((m.name, m.layer, m.kind, m.materialized, m.rows) for m in replayed.models) == \
        sorted((m.name, m.layer, m.kind, m.materialized, m.rows) for m in ran.models)
    (run_r, replayed_run), (test_r, replayed_test), (run_d, dbt_run), (test_d, dbt_test) = runs
    assert (run_r, test_r, run_d, test_d) == ("run", "test", "run", "test")
    assert _results(replayed_run) == _results(dbt_run) and len(replayed_run) > 30
    assert _results(replayed_test) == _results(dbt_test) and len(replayed_test) > 10
    assert all(r.seconds > 0 for r in replayed_run + replayed_test)
    # the build after a replay replays again: the records stay with the published build
    assert {r[0] for r in con.execute(f"select kind from {replay.TABLE}").fetchall()} == {"graph", "run", "test"}


def test_a_changed_key_never_replays(tmp_path: Path) -> None:
    con = scheduled()
    project = tmp_path / "sql"
    shutil.copytree(PACKAGED_PROJECT, project)
    model = project / "models" / "marts" / "mart_win_rates.sql"
    model.write_text(model.read_text() + "\n-- an edit\n")
    other_var = build_warehouse(copy(con, tmp_path), upset_threshold=0.1)
    other_project = build_warehouse(copy(con, tmp_path), sql_dir=project)
    whole = build_warehouse(copy(con, tmp_path), full_refresh=True)
    runs = copy(con, tmp_path)
    record_run(runs, {"run_id": "r1", "experiment": "e", "status": "done", "wall_s": 10.0, "games_planned": 8,
                      "games_done": 8, "calls": 20, "unpriced_models": []})  # the runs' marts are kept no more
    other_kept = build_warehouse(runs)
    assert all(b.published and b.replayed == [] for b in (other_var, other_project, whole, other_kept))
    assert build_warehouse(con).replayed == ["run", "test"]  # the same warehouse, unchanged: replayed


@pytest.mark.parametrize(("severity", "failures"), [("error", 0), ("error", 1), ("error", 3), ("warn", 0),
                                                    ("warn", 1), ("warn", 2)])
def test_a_replayed_tests_status_and_message_are_dbts(severity: str, failures: int) -> None:
    from types import SimpleNamespace

    from dbt.flags import set_from_args
    from dbt.task.test import TestResultData, TestRunner

    set_from_args(SimpleNamespace(), None)  # dbt's default flags: no --warn-error
    config = SimpleNamespace(severity=severity, warn_if="!= 0", error_if="!= 0")
    row = TestResultData(failures=failures, should_warn=failures != 0, should_error=failures != 0,
                         adapter_response={})
    dbt = TestRunner.build_test_run_result(None, SimpleNamespace(config=config), row)  # type: ignore[arg-type]
    mine = replay._test_status({"severity": severity, "warn_if": "!= 0", "error_if": "!= 0"}, failures,
                               failures != 0, failures != 0)
    assert mine == (str(dbt.status), dbt.message)
