"""The gate on an increment that only adds games (quality.delta): a published warehouse with games landed since,
copied for each build, and the same build's gate run whole to compare with, result for result."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import duckdb

from mafiabench import publish
from mafiabench.publish import build_warehouse
from mafiabench.transform.build.marts import BuildResult

# The suites over the raw tables (`sources/*.yml`): each is proven from an add-only increment's rows.
RAW_SUITES = ["beliefs", "belief_sums", "raw_detections", "raw_games", "orphan_rows", "copied_games", "raw_model_calls",
              "raw_players", "statement_labels", "statements"]


def copy(path: Path, tmp: Path) -> duckdb.DuckDBPyConnection:
    """A copy of the warehouse `path`, named as the original (w.duckdb: dbt's parsed project is kept per name), in a
    new folder of `tmp`."""
    folder = tmp / f"copy-{len(list(tmp.iterdir()))}"
    folder.mkdir()
    shutil.copyfile(path, folder / "w.duckdb")
    return duckdb.connect(str(folder / "w.duckdb"))


def file_of(con: duckdb.DuckDBPyConnection) -> Path:
    con.execute("checkpoint")
    return Path(con.execute("select path from duckdb_databases() where database_name = current_database()")
                .fetchall()[0][0])


def build(con: duckdb.DuckDBPyConnection, *, whole_gate: bool = False, **options: Any) -> BuildResult:
    """`build_warehouse`, its failure returned; with `whole_gate`, every suite run whole (the gate before
    quality.delta)."""
    if not whole_gate:
        return build_warehouse(con, raise_on_failure=False, **options)
    with mock.patch.object(publish, "_increment_gate", lambda con, staged: None):
        return build_warehouse(con, raise_on_failure=False, **options)


def gate_twice(path: Path, tmp: Path, change: Any = None) -> tuple[BuildResult, BuildResult]:
    """The warehouse at `path` copied twice, `change(con)` applied to each, then built: with the gate as it is, and
    with every suite run whole."""
    out = []
    for whole in (False, True):
        con = copy(path, tmp)
        try:
            if change is not None:
                change(con)
            out.append(build(con, whole_gate=whole))
        finally:
            con.close()
    return out[0], out[1]


def gx_results(result: BuildResult) -> list[Any]:
    """The build's results of its GX suites (the dbt data tests aside), in the gate's order."""
    return [r for r in result.validation if r.suite != "dbt_tests"]


def assert_same_gate(got: BuildResult, whole: BuildResult) -> None:
    """Every field of every expectation equal, in the same order: verdict, counts, failing rows."""
    assert whole.proven_suites == []
    a, b = gx_results(got), gx_results(whole)
    assert [r.suite for r in a] == [r.suite for r in b]
    for x, y in zip(a, b, strict=True):
        assert x == y, (x, y)
    assert got.passed == whole.passed and got.published == whole.published
