"""The gate's expectations as set-based DuckDB queries: each declared check compiled to SQL with the meaning the
Great Expectations expectation it names has on a pandas frame (GX 1.24), so a build never pulls a suite's rows.

Per suite, one aggregate query counts the suite's rows and every row-level check's unexpected rows in one scan, and
shows in the same scan that a uniqueness check's keys are distinct (their hashes are); only a key that may repeat
gets a `group by` of its own to count the rows whose key repeats, and only a failing check's first rows
(`SAMPLE_ROWS`) are fetched, to name them. GX on the frame stays the reference: `tests/quality/test_gate_sql.py`
compares the two on rows full of edge cases, and the golden verdicts (`tests/gate_verdicts.py`) hold.

What each check means (GX's pandas engine; "missing" is null, or NaN in a floating-point column, as pandas reads
both):
- `ExpectColumnValuesToNotBeNull`: a missing value is unexpected.
- `ExpectColumnValuesToBeInSet`, `...ToBeBetween` (bounds inclusive), `...ToNotMatchRegex` (the gate's one regex,
  `not_blank`'s `^\\s*$` with Python's `\\s`): a present value that breaks it; missing values are skipped.
- `ExpectColumnValuesToBeUnique`: every present value that occurs more than once (each of its rows).
- `ExpectCompoundColumnsToBeUnique`: rows whose key (missing values equal to each other) occurs more than once,
  rows missing every key column skipped (GX's `ignore_row_if="all_values_are_missing"`).
- `ExpectTableRowCountToEqual`: every row is unexpected when the count differs.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from mafiabench.quality.suites import Check, Suite, ident

SAMPLE_ROWS = 5  # a failing check's rows shown (GX's `partial_unexpected_count` as the gate used it)


@dataclass
class ExpectationResult:
    suite: str
    expectation: str  # GX expectation type, or the assert file's name
    rule: str  # what the expectation means, in words
    kwargs: dict[str, Any]
    success: bool
    element_count: int
    unexpected_count: int
    failing_rows: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.rule} [{self.suite}: {self.expectation}({args})]"


def json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if hasattr(value, "tolist"):  # numpy scalars and arrays (a list column)
        return json_safe(value.tolist())
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return str(value)


def json_safe_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows (a check's failing rows, a dbt data test's violating rows) as JSON-safe dicts for `validation_results`."""
    return [{k: json_safe(v) for k, v in row.items()} for row in rows]

# The expectations compiled to SQL (every kind `quality.suites` declares).
COMPILED = frozenset({
    "ExpectColumnValuesToNotBeNull", "ExpectColumnValuesToBeInSet", "ExpectColumnValuesToBeBetween",
    "ExpectColumnValuesToNotMatchRegex", "ExpectColumnValuesToBeUnique", "ExpectCompoundColumnsToBeUnique",
    "ExpectTableRowCountToEqual",
})
_FLOATS = frozenset({"FLOAT", "DOUBLE", "REAL"})
_BLANK_REGEX = r"^\s*$"


@functools.cache
def _python_space_class() -> str:
    """An RE2 character class of what Python's `\\s` matches in a str pattern (`str.isspace`): RE2's own `\\s` is
    ASCII only (U+00A0, U+001C-U+001F, U+2028, ... differ)."""
    spaces = [c for c in range(0x110000) if chr(c).isspace()]
    return "[" + "".join(f"\\x{{{c:x}}}" for c in spaces) + "]"


def expectation_type(name: str) -> str:
    """GX's type name of an expectation class: `ExpectColumnValuesToBeUnique` -> `expect_column_values_to_be_unique`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"'{value!r}'::double"
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


class UnsupportedCheck(ValueError):
    """A check this compiler does not know; the message names the suite and the check."""


class _Columns:
    """The suite's column types, to say what "missing" means for each (NaN only in floating-point columns)."""

    def __init__(self, types: dict[str, str]) -> None:
        self.types = types

    def missing(self, column: str) -> str:
        col = ident(column)
        if self.types.get(column, "").upper() in _FLOATS:
            return f"({col} is null or isnan({col}))"
        return f"({col} is null)"

    def present(self, column: str) -> str:
        return f"(not {self.missing(column)})"

    def value(self, column: str) -> str:
        """The column as compared: booleans as 0/1, as Python compares them with numbers."""
        col = ident(column)
        return f"{col}::integer" if self.types.get(column, "").upper() == "BOOLEAN" else col

    def key(self, column: str, table: str = "") -> str:
        """The column as a grouping key in which null and NaN are one missing value, as pandas' `duplicated`."""
        col = f"{table}.{ident(column)}" if table else ident(column)
        if self.types.get(column, "").upper() in _FLOATS:
            return f"(case when isnan({col}) then null else {col} end)"
        return col


def _unexpected(check: Check, cols: _Columns, suite: str) -> str | None:
    """A predicate true of exactly the rows `check` finds unexpected, or None for the checks counted otherwise
    (uniqueness: by groups; the table's row count)."""
    kw = check.kwargs
    kind = check.expectation
    if kind == "ExpectColumnValuesToNotBeNull":
        return cols.missing(kw["column"])
    if kind == "ExpectColumnValuesToBeInSet":
        values = kw.get("value_set")
        if values is None:  # GX: vacuously true
            return "false"
        listed = ", ".join(_literal(v) for v in values)
        inside = f"{ident(kw['column'])} in ({listed})" if listed else "false"
        return f"({cols.present(kw['column'])} and not coalesce({inside}, false))"
    if kind == "ExpectColumnValuesToBeBetween":
        low, high = kw.get("min_value"), kw.get("max_value")
        if low is None and high is None:
            raise UnsupportedCheck(f"suite {suite!r}: {check.rule!r}: a range needs min_value, max_value or both")
        if kw.get("strict_min") or kw.get("strict_max"):
            raise UnsupportedCheck(f"suite {suite!r}: {check.rule!r}: strict bounds are not declared by the gate")
        value = cols.value(kw["column"])
        bounds = [f"{value} >= {_literal(low)}"] if low is not None else []
        bounds += [f"{value} <= {_literal(high)}"] if high is not None else []
        return f"({cols.present(kw['column'])} and not ({' and '.join(bounds)}))"
    if kind == "ExpectColumnValuesToNotMatchRegex":
        if kw.get("regex") != _BLANK_REGEX:
            raise UnsupportedCheck(f"suite {suite!r}: {check.rule!r}: only the regex {_BLANK_REGEX!r} is compiled "
                                   f"to SQL, not {kw.get('regex')!r}")
        col = ident(kw["column"])
        return f"({cols.present(kw['column'])} and regexp_full_match({col}, '{_python_space_class()}*'))"
    if kind in ("ExpectColumnValuesToBeUnique", "ExpectCompoundColumnsToBeUnique", "ExpectTableRowCountToEqual"):
        return None
    raise UnsupportedCheck(f"suite {suite!r}: {check.rule!r}: no SQL for the expectation {kind!r}")


def _key_columns(check: Check) -> list[str] | None:
    if check.expectation == "ExpectColumnValuesToBeUnique":
        return [check.kwargs["column"]]
    if check.expectation == "ExpectCompoundColumnsToBeUnique":
        return list(check.kwargs["column_list"])
    return None


def _counted(key: list[str], cols: _Columns) -> str:
    """The rows a uniqueness check looks at: a single column's present values; a compound key's rows that have at
    least one of its values."""
    return " or ".join(cols.present(c) for c in key)


def _duplicates_sql(key: list[str], cols: _Columns) -> str:
    keys = ", ".join(f"{cols.key(c)} as {ident(c)}" for c in key)
    return f"select {keys}, count(*) as __n from __suite where {_counted(key, cols)} group by all having count(*) > 1"


def _distinct_keys(key: list[str], cols: _Columns) -> list[str] | None:
    """Two aggregates whose values are equal only if no key repeats: the rows a uniqueness check looks at, and their
    keys' distinct hashes (equal keys hash alike, so a repeat always shows; a collision only costs the exact count).
    Counted in the suite's one scan, so a unique key costs no query of its own. None for a floating-point key
    column, whose equal values (0.0 and -0.0) need not hash alike."""
    if any(cols.types.get(c, "").upper() in _FLOATS for c in key):
        return None
    counted = _counted(key, cols)
    hashed = f"hash({', '.join(ident(c) for c in key)})"
    return [f"count(*) filter (where {counted})", f"count(distinct {hashed}) filter (where {counted})"]


def _with_suite(query: str) -> str:
    # Not materialised: the uniqueness checks read the suite again, and scanning a raw table twice costs less than
    # storing its rows once (raw_players at 1M games: 0.9 -> 0.5 s).
    return f"with __suite as not materialized ({query})\n"


class SqlSuite:
    """One suite compiled against the connection's tables (the column types decide what "missing" is)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, suite: Suite) -> None:
        self.con = con
        self.suite = suite
        rel = con.sql(suite.query)
        self.cols = _Columns({c: str(t) for c, t in zip(rel.columns, rel.types, strict=True)})

    def _scalar(self, sql: str) -> int:
        ((value,),) = self.con.execute(_with_suite(self.suite.query) + sql).fetchall()
        return int(value or 0)

    def _rows(self, sql: str) -> list[dict[str, Any]]:
        cur = self.con.execute(_with_suite(self.suite.query) + sql)
        names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def _sample(self, predicate: str) -> list[dict[str, Any]]:
        return self._rows(f"select * from __suite where {predicate} limit {SAMPLE_ROWS}")

    def _dup_predicate(self, key: list[str]) -> str:
        match = " and ".join(f"__dup.{ident(c)} is not distinct from {self.cols.key(c, '__suite')}" for c in key)
        dup = _duplicates_sql(key, self.cols)
        return f"({_counted(key, self.cols)}) and exists (select 1 from ({dup}) __dup where {match})"

    def _counts(self, predicates: dict[int, str], unique: dict[int, list[str]]
                ) -> tuple[int, dict[int, int], dict[int, str], set[int]]:
        """The suite's rows, each row-level check's unexpected rows and the uniqueness checks whose keys are all
        distinct (`_distinct_keys`), in one scan; a check whose SQL fails (a column it names is missing) gets its
        error, and the others still count (the uniqueness checks then by their own queries)."""
        select = ["count(*)", *(f"count_if({p})" for p in predicates.values()),
                  *(agg for aggs in unique.values() for agg in aggs)]
        try:
            ((total, *counted),) = self.con.execute(
                _with_suite(self.suite.query) + f"select {', '.join(select)} from __suite").fetchall()
            rows, pairs = counted[:len(predicates)], counted[len(predicates):]
            distinct = {i for j, i in enumerate(unique) if pairs[2 * j] == pairs[2 * j + 1]}
            return int(total), {i: int(n or 0) for i, n in zip(predicates, rows, strict=True)}, {}, distinct
        except duckdb.Error:
            pass
        total = self._scalar("select count(*) from __suite")
        counts: dict[int, int] = {}
        errors: dict[int, str] = {}
        for i, p in predicates.items():
            try:
                counts[i] = self._scalar(f"select count_if({p}) from __suite")
            except duckdb.Error as exc:
                errors[i] = str(exc)
        return total, counts, errors, set()

    def _unexpected(self, check: Check, total: int, counted: int | None, predicate: str | None
                    ) -> tuple[int, list[dict[str, Any]]]:
        key = _key_columns(check)
        if key is not None:
            n = self._scalar(f"select sum(__n) from ({_duplicates_sql(key, self.cols)})")
            return n, self._sample(self._dup_predicate(key)) if n else []
        if check.expectation == "ExpectTableRowCountToEqual":
            n = total if total != check.kwargs["value"] else 0
            return n, self._rows(f"select * from __suite limit {SAMPLE_ROWS}") if n else []
        assert counted is not None and predicate is not None
        return counted, self._sample(predicate) if counted else []

    def run(self) -> list[ExpectationResult]:
        """One result per check, in the suite's order."""
        checks = self.suite.checks
        predicates = {i: p for i, c in enumerate(checks)
                      if (p := _unexpected(c, self.cols, self.suite.name)) is not None}
        unique = {i: aggs for i, c in enumerate(checks)
                  if (key := _key_columns(c)) is not None and (aggs := _distinct_keys(key, self.cols)) is not None}
        total, counts, errors, distinct = self._counts(predicates, unique)
        out = []
        for i, check in enumerate(checks):
            try:
                if i in errors:
                    raise duckdb.Error(errors[i])
                sample: list[dict[str, Any]] = []
                if i in distinct:
                    unexpected = 0
                else:
                    unexpected, sample = self._unexpected(check, total, counts.get(i), predicates.get(i))
            except duckdb.Error as exc:  # as GX reports an expectation that raised
                unexpected, sample = -1, [{"exception": str(exc)}]
            out.append(ExpectationResult(
                suite=self.suite.name,
                expectation=expectation_type(check.expectation),
                rule=check.rule,
                kwargs=dict(check.kwargs),
                success=unexpected == 0,
                element_count=total,
                unexpected_count=unexpected,
                failing_rows=json_safe_rows(sample),
            ))
        return out


def run_suite(con: duckdb.DuckDBPyConnection, suite: Suite) -> list[ExpectationResult]:
    """Each check of `suite` on the connection's tables, as a result (verdict, counts, first failing rows)."""
    return SqlSuite(con, suite).run()
