"""An expectation that passed over no rows checked nothing, and the build says so (`checked_nothing`): a per-row
expectation over an empty table, not a table-level rule over an empty table of violations, not a dbt test (its count
is of failing rows), not a failure. A build of Mini-Mafia games, which hold no beliefs, statements or detections,
counts those on its summary line."""

from __future__ import annotations

import pytest

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.builds import checked_nothing
from mafiabench.warehouse.raw import load_records
from support.records import fresh_con, mini_record, rotated_seats


@pytest.mark.parametrize(("suite", "expectation", "success", "rows", "nothing"), [
    ("beliefs", "expect_column_values_to_be_between", True, 0, True),
    ("raw_detections", "expect_compound_columns_to_be_unique", True, 0, True),
    ("beliefs", "expect_column_values_to_be_between", True, 12, False),  # rows checked
    ("beliefs", "expect_column_values_to_be_between", False, 0, False),  # a failure is a failure
    ("copied_games", "expect_table_row_count_to_equal", True, 0, False),  # no violation: the table checked
    ("dbt_tests", "not_null_fct_games_study", True, 0, False),  # dbt's count is of failing rows
    ("beliefs", "expect_column_values_to_be_between", True, None, True),
])
def test_which_results_checked_nothing(suite: str, expectation: str, success: bool, rows: int | None,
                                       nothing: bool) -> None:
    assert checked_nothing(suite, expectation, success, rows) is nothing


def test_a_build_without_beliefs_says_how_many_expectations_checked_no_rows() -> None:
    con = fresh_con()
    load_records(con, [mini_record(f"g{i}", seats=rotated_seats(i)) for i in range(8)])
    result = build_warehouse(con)
    assert result.published
    empty = [r for r in result.validation if r.success and r.element_count == 0
             and r.expectation.startswith("expect_column_") and r.suite == "beliefs"]
    assert empty and result.checked_nothing >= len(empty)
    assert result.checked_nothing == sum(checked_nothing(r.suite, r.expectation, r.success, r.element_count)
                                         for r in result.validation)
    line = result.summary().splitlines()[1]
    assert f"passed ({result.checked_nothing} with no rows to check) in " in line, line
