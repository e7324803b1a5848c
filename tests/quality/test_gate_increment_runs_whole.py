"""The suites over the raw tables run whole unless the build is an increment of a build whose gate vouched for the
raw tables with this gate's code and each raw table holds that build's rows, less the lander's deletes, plus the
increment's (quality.delta): `--full-refresh`, a published build that ran no gate, a gate whose code changed since,
or, for the tables it had rows in, a game removed outside the lander. (A game replaced by the lander is proven:
test_gate_increment_replaced.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from unittest import mock

import duckdb
import pytest

from mafiabench.quality import delta
from mafiabench.transform.build.marts import build_models
from support.gate_increments import assert_same_gate, build, copy
from support.increments import remove_game

CASES: dict[str, Callable[[duckdb.DuckDBPyConnection], object]] = {
    "a game removed": lambda con: remove_game(con, "e0-3"),
    "published without a gate": lambda con: build_models(con),
}
# The suites over the tables a removed game had rows in, and those reading raw_games (which lost one): the others'
# tables hold the published build's rows plus the increment's, and are proven.
REMOVED_RUN_WHOLE = {"raw_games", "raw_players", "orphan_rows", "copied_games", "raw_detections"}


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
    assert got.published
    if case == "a game removed":
        assert got.proven_suites and not REMOVED_RUN_WHOLE & set(got.proven_suites)
    else:
        assert got.proven_suites == []
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
