"""The gate's suites as the models' YAML declares them, and checks over a table full of edge cases, for the gate
tests."""

from __future__ import annotations

import functools
import math

import duckdb

from mafiabench.quality.gate import Check, Suite, gate_suites
from mafiabench.quality.suites import not_blank
from mafiabench.transform.build.catalogue import model_docs
from mafiabench.transform.build.dbt_runner import PACKAGED_PROJECT


@functools.cache
def _declared(max_unusable: float) -> tuple[Suite, ...]:
    return gate_suites(model_docs(PACKAGED_PROJECT), max_unusable)


def declared_suites(max_unusable: float = 0.5) -> tuple[Suite, ...]:
    """The suites the packaged project declares (what a build runs), for the tests of the gate."""
    return _declared(max_unusable)


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
    not_blank("model", "model not blank"),
)


def _con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("create table t (id integer, key varchar, name varchar, x double, flag boolean, model varchar)")
    con.executemany("insert into t values (?, ?, ?, ?, ?, ?)", ROWS)
    return con
