"""Each dbt data test named `assert_*` (the singular ones in transform/sql/tests/, the rest declared beside their model
in its YAML) returns no rows on clean data and the offending rows on corrupted data; the tests run through dbt on a
staged build, as the quality gate runs them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from mafiabench.publish import dbt_test_results
from mafiabench.quality.gate import run_suites
from mafiabench.transform.build import dbt_runner
from mafiabench.transform.build.marts import Staged, stage, staged_views
from mafiabench.warehouse.raw import load_records
from support import gate_verdicts
from support.gate import declared_suites
from support.records import cell_records, design, engine_records, fresh_con

TESTS = dbt_runner.PACKAGED_PROJECT / "tests"


def run_asserts(con: duckdb.DuckDBPyConnection, staged: Staged, case: str | None = None) -> dict[str, list]:
    """Every data test's violating rows (a sample), by test name; its verdicts checked against the golden `case`."""
    results = dbt_test_results(con, staged)
    if case is not None:  # the rules that left the dbt tests are checked by the GX suites that now hold them alone
        with staged_views(con, staged) as cur:
            gate_verdicts.check(case, results, beside=run_suites(cur, suites=declared_suites()))
    return {r.expectation: r.failing_rows for r in results}


def staged_table(name: str) -> str:
    return dbt_runner.STAGED_PREFIX + name


def clean_con() -> duckdb.DuckDBPyConnection:
    con = fresh_con()
    recs = cell_records("h", n=6, mafia_wins=2, models="X", design=design("homogeneous|X", None, "X", "X"))
    recs += engine_records(20) + engine_records(5, seed=1, variant="classic",
                                                 rules={"n_players": 6, "n_mafia": 1, "decision": "belief"})
    load_records(con, recs)
    return con


CORRUPTIONS: dict[str, Callable[[duckdb.DuckDBPyConnection], None]] = {
    "assert_distinct_seats": lambda c: c.execute("update raw_players set seat = 0 where game_id = 'h-3'"),
    "assert_rates_in_unit_interval": lambda c: c.execute(
        f"update {staged_table('mart_win_rates')} set laplace_mean = 1.5"
    ),
    "assert_homogeneous_cells_invariant": lambda c: c.execute(
        f"update {staged_table('mart_capability_win_rates')} set laplace_mean = 0.9 where capability = 'detect'"
    ),
    # An interval counting games narrower than Wilson's: a design effect below 1 would give it.
    "assert_failure_intervals_by_game_hold_wilson": lambda c: c.execute(
        f"update {staged_table('mart_format_failures')} set wilson_high_by_game = wilson_high - 0.01"
    ),
}

# The corruptions of the rules that left the dbt tests (now GX checks alone: `test_quality`), still planted, so the
# data is the data the golden verdicts were recorded on.
RETIRED_CORRUPTIONS: list[Callable[[duckdb.DuckDBPyConnection], object]] = [
    lambda c: c.execute("create table _g as select * from raw_games; drop table raw_games; "
                        "alter table _g rename to raw_games; insert into raw_games select * from raw_games limit 1"),
    lambda c: c.execute("delete from raw_events where game_id = 'h-1' and seq = 3"),
    lambda c: c.execute("update raw_players set model = ' ' where game_id = 'h-4'"),
    lambda c: c.execute("update raw_games set winner = null where game_id = 'h-0'"),
    lambda c: c.execute(
        "update raw_beliefs set probability = probability + 0.5 where rowid = (select min(rowid) from raw_beliefs)"),
]


def test_asserts_pass_on_clean_data() -> None:
    con = clean_con()
    results = run_asserts(con, stage(con), "dbt tests clean")
    assert {name for name in results if name.startswith("assert_")} == set(CORRUPTIONS)  # each has its corruption
    for name, bad in results.items():
        assert bad == [], name


@pytest.fixture(scope="module")
def corrupted() -> dict[str, list]:
    """One warehouse with every corruption (each in its own game or mart row), built and tested once: dbt's start-up
    per build makes one build per case slow. Raw corruptions go in before the build, mart ones into the staged
    marts after it."""
    con = clean_con()
    mart_level = ("assert_rates_in_unit_interval", "assert_homogeneous_cells_invariant",
                  "assert_failure_intervals_by_game_hold_wilson")
    for corrupt in RETIRED_CORRUPTIONS:
        corrupt(con)
    for name, corrupt in CORRUPTIONS.items():
        if name not in mart_level:
            corrupt(con)
    staged = stage(con)
    for name in mart_level:
        CORRUPTIONS[name](con)
    return run_asserts(con, staged, "dbt tests corrupted")


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_assert_fails_on_corrupted_data(name: str, corrupted: dict[str, list]) -> None:
    assert corrupted[name], name


def test_sql_dir_exists() -> None:
    assert Path(TESTS).is_dir()

