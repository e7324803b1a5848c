"""The suites over the raw tables run whole unless the build only adds games to a build whose gate vouched for the
raw tables with this gate's code (quality.delta): an increment that replaces or removes a game, `--full-refresh`, a
published build that ran no gate, or a gate whose code changed since."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from unittest import mock

import duckdb
import pytest

from mafiabench.quality import delta
from mafiabench.transform.build.marts import build_models
from mafiabench.warehouse.raw import load_records
from support.gate_increments import assert_same_gate, build, copy
from support.increments import remove_game
from support.records import mini_record


def _replace_a_game(con: duckdb.DuckDBPyConnection) -> None:
    load_records(con, [mini_record("e0-0", models="X", votes={"Alice": "Bob", "Bob": "Alice", "Charlie": "Bob"})],
                 replace=True)


CASES: dict[str, Callable[[duckdb.DuckDBPyConnection], object]] = {
    "a game replaced": _replace_a_game,
    "a game removed": lambda con: remove_game(con, "e0-3"),
    "published without a gate": lambda con: build_models(con),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_raw_suites_run_whole(case: str, landed_increment: Path, tmp_path: Path) -> None:
    results = []
    for whole in (False, True):
        con = copy(landed_increment, tmp_path)
        try:
            CASES[case](con)
            results.append(build(con, whole_gate=whole))
        finally:
            con.close()
    got, whole_gate = results
    assert got.published and got.proven_suites == []
    assert_same_gate(got, whole_gate)


def test_a_full_refresh_and_another_gate_code_run_whole(landed_increment: Path, tmp_path: Path) -> None:
    con = copy(landed_increment, tmp_path)
    try:
        assert build(con, full_refresh=True).proven_suites == []
        with mock.patch.object(delta, "gate_digest", lambda: "another gate"):
            assert build(con).proven_suites == []
        assert build(con).proven_suites == []  # the build before was recorded by the other code
        assert build(con).proven_suites != []
    finally:
        con.close()
