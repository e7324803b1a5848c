"""The gate pulls only the rows a check could flag (`gate.candidate_sql`): on data full of edge cases every
expectation must give the same verdict, count and failing rows as GX on the whole frame."""

from __future__ import annotations

import math

import duckdb

from mafiabench.quality.gate import SUITES, Check, Suite, _not_blank, _Validator, candidate_sql, run_suites

ROWS = [
    # id, key, name, x, flag, model
    (1, "a", "n1", 0.5, True, "gpt"),
    (2, "a", "n2", -0.1, True, " "),  # below the range; a blank model
    (3, "b", "n1", 1.5, False, "\u00a0"),  # above; not in the set; Python's \s matches U+00A0, RE2's does not
    (4, "c", "n3", math.nan, None, "\x1c"),  # NaN and null: pandas treats both as missing
    (4, None, None, None, True, ""),  # duplicate id; null keys
    (6, None, None, math.inf, True, None),  # duplicate compound key of nulls
    (7, "d", "n4", 1.0, True, "\t\n"),
    (8, "a", "n1", 0.2, True, "x"),  # duplicate (key, name)
]

CHECKS = (
    Check("ExpectColumnValuesToBeUnique", {"column": "id"}, "unique id"),
    Check("ExpectCompoundColumnsToBeUnique", {"column_list": ["key", "name"]}, "unique key and name"),
    Check("ExpectColumnValuesToBeBetween", {"column": "x", "min_value": 0.0, "max_value": 1.0}, "x in [0, 1]"),
    Check("ExpectColumnValuesToBeBetween", {"column": "x", "min_value": 0}, "x not negative"),
    Check("ExpectColumnValuesToBeBetween", {"column": "x", "max_value": 1}, "x at most 1"),
    Check("ExpectColumnValuesToBeInSet", {"column": "flag", "value_set": [True]}, "flag set"),
    Check("ExpectColumnValuesToBeInSet", {"column": "key", "value_set": ["a", "b'", "d"]}, "known key"),
    Check("ExpectColumnValuesToNotBeNull", {"column": "x"}, "x present"),
    Check("ExpectColumnValuesToNotBeNull", {"column": "model"}, "model present"),
    _not_blank("model", "model not blank"),
)


def _con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("create table t (id integer, key varchar, name varchar, x double, flag boolean, model varchar)")
    con.executemany("insert into t values (?, ?, ?, ?, ?, ?)", ROWS)
    return con


def test_narrowed_suites_give_the_verdicts_of_the_whole_frame() -> None:
    con = _con()
    validator = _Validator()
    for i, check in enumerate(CHECKS):
        suite = Suite(f"edge_case_{i}", "select * from t", (check,))
        assert candidate_sql(suite) is not None, check
        (narrowed,) = run_suites(con, suites=[suite])
        (whole,) = validator.validate(suite, con.sql(suite.query).df())
        assert not whole.success, check  # every check fails on these rows, so the comparison means something
        assert (narrowed.success, narrowed.unexpected_count, narrowed.element_count) == (
            whole.success, whole.unexpected_count, whole.element_count), check
        assert narrowed.failing_rows == whole.failing_rows, check


def test_clean_rows_are_not_pulled_but_counted() -> None:
    con = _con()
    con.execute("delete from t where id <> 1")
    con.execute("insert into t select r.i + 10, 'a', 'm' || r.i, 0.25, true, 'm' from range(1000) r(i)")
    suite = Suite("clean", "select * from t", CHECKS)
    assert con.sql(candidate_sql(suite)).fetchall() == []
    results = run_suites(con, suites=[suite])
    assert all(r.success and r.element_count == 1001 and r.unexpected_count == 0 for r in results)


def test_every_row_wise_suite_is_narrowed_and_table_level_ones_are_not() -> None:
    for suite in SUITES:
        table_level = any(c.expectation == "ExpectTableRowCountToEqual" for c in suite.checks)
        assert (candidate_sql(suite) is None) == table_level, suite.name
