"""The data-quality gate: a runner of the Great Expectations suites declared beside the models (the dbt data tests run
beside it, in `mafiabench.publish`).

The gate holds no rule of its own: each suite is declared in the YAML of the model (or raw table) it guards, under
`meta.gx` (`quality.suites`), and read from there with the build's settings (`gate_suites`). Each suite pulls a
DataFrame with `con.sql(...).df()` and GX validates it (`quality.validator`, in a helper process during a build).
Only the rows a check could flag are pulled (`candidate_sql`: a SQL superset of each expectation's failing rows, GX
decides on them), with the suite's full row count beside them: pulling every row of a million games into pandas cost
minutes. Checks that need the event order (a vote by a player already dead) are computed in SQL first
(`int_game_checks`, `int_votes`) and the suite expects zero violations. Every expectation's outcome is stored in
`validation_results`; any failure fails the build, which then is not published (`warehouse.builds.gate_passed`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

import duckdb

from mafiabench.errors import UserError
from mafiabench.quality.suites import Check, Suite, declared_suites, ident
from mafiabench.quality.validator import ExpectationResult, ValidatorProcess, _Validator, json_safe_rows
from mafiabench.warehouse.builds import ensure_build_tables

__all__ = ["DEFAULT_MAX_UNUSABLE", "Check", "ExpectationResult", "QualityGateError", "Suite", "ValidatorProcess",
           "candidate_sql", "failure_message", "gate_suites", "json_safe_rows", "run_suites", "store_results"]

# The largest share of landed games that may be invalid or unscored before the build is refused (`mafiabench build
# --max-unusable`): marts over a few survivors of a broken import are not results.
DEFAULT_MAX_UNUSABLE = 0.5


class QualityGateError(UserError):
    """The gate failed; the message names every failing expectation and shows failing rows."""

    def __init__(self, message: str, *, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


def gate_suites(docs: Mapping[str, Mapping[str, Any]], max_unusable: float = DEFAULT_MAX_UNUSABLE) -> tuple[Suite, ...]:
    """The suites the project declares (`docs`: its YAML as `transform.build.catalogue.model_docs` reads it), with the
    build's settings: `max_unusable`, the share of invalid or unscored games above which the build is refused."""
    if isinstance(max_unusable, bool) or not 0.0 <= max_unusable <= 1.0:
        raise UserError(f"max_unusable must be within [0, 1], got {max_unusable!r}")
    return declared_suites(docs, params={"max_unusable": max_unusable})


# -- running -----------------------------------------------------------------------------------------------------


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _candidates(check: Check) -> str | None:
    """A SQL predicate over the suite's rows that holds for every row `check` could flag (a superset: nulls and NaN
    included wherever in doubt), or None when the check is not about single rows (it then needs every row)."""
    if check.candidates is not None:
        return check.candidates
    kw = check.kwargs
    kind = check.expectation
    if kind == "ExpectColumnValuesToBeInSet":
        values = ", ".join(_literal(v) for v in kw["value_set"])
        return f"not coalesce({ident(kw['column'])} in ({values}), false)" if values else "true"
    if kind == "ExpectColumnValuesToBeBetween":
        col = ident(kw["column"])
        bounds = []
        if kw.get("min_value") is not None:
            bounds.append(f"{col} >= {_literal(kw['min_value'])}")
        if kw.get("max_value") is not None:
            bounds.append(f"{col} <= {_literal(kw['max_value'])}")
        # DuckDB orders NaN above every number; pandas treats it as missing: either way GX decides on the row.
        return f"not coalesce({' and '.join(bounds)}, false)" if bounds else None
    if kind == "ExpectColumnValuesToNotBeNull":
        col = ident(kw["column"])
        return f"{col} is null or try_cast({col} as double) is not distinct from 'nan'::double"
    return None


def _unique_columns(check: Check) -> list[str] | None:
    if check.expectation == "ExpectColumnValuesToBeUnique":
        return [check.kwargs["column"]]
    if check.expectation == "ExpectCompoundColumnsToBeUnique":
        return list(check.kwargs["column_list"])
    return None


def candidate_sql(suite: Suite) -> str | None:
    """The suite's query narrowed to the rows some check could flag, or None when a check needs every row
    (a table-level expectation). GX still validates what this returns, so it decides each row and names it;
    a clean million-game warehouse yields empty frames instead of tens of millions of rows pulled into pandas.
    Duplicates for the uniqueness checks are every row whose key occurs more than once."""
    parts: list[str] = []
    dups: list[str] = []
    for i, check in enumerate(suite.checks):
        key = _unique_columns(check)
        if key is not None:
            cols = ", ".join(ident(c) for c in key)
            dups.append(f"__dup{i} as (select {cols} from __suite group by all having count(*) > 1)")
            match = " and ".join(f"__dup{i}.{ident(c)} is not distinct from __suite.{ident(c)}" for c in key)
            parts.append(f"exists (select 1 from __dup{i} where {match})")
            continue
        predicate = _candidates(check)
        if predicate is None:
            return None
        parts.append(f"({predicate})")
    if not parts:
        return None
    # Not materialised: the uniqueness checks read the suite twice, and scanning a raw table twice costs less than
    # storing its rows once (raw_players at 1M games: 0.9 -> 0.5 s).
    ctes = ",\n".join([f"__suite as not materialized ({suite.query})", *dups])
    return f"with {ctes}\nselect * from __suite where {' or '.join(parts)}"


def run_suites(
    con: duckdb.DuckDBPyConnection,
    *,
    suites: Sequence[Suite],
    pull: Callable[[duckdb.DuckDBPyConnection, str], Any] | None = None,
    validator: _Validator | ValidatorProcess | None = None,
) -> list[ExpectationResult]:
    """Run the GX suites (a build's: `gate_suites`); return one result per expectation. (The dbt project's data tests
    run in the pipeline beside these: `mafiabench.publish`.) `validator`: where GX runs, by default in this process;
    a build passes its helper (`validator.start_validator`)."""
    validator = validator or _Validator()
    fetch = pull or (lambda c, q: c.sql(q).df())
    pending: list[Future[list[ExpectationResult]]] = []
    for suite in suites:
        narrowed = candidate_sql(suite)
        if narrowed is None:
            pending.append(validator.submit(suite, fetch(con, suite.query)))
            continue
        total = int(con.sql(f"select count(*) from ({suite.query})").fetchall()[0][0])
        pending.append(validator.submit(suite, fetch(con, narrowed), element_count=total))
    return [r for future in pending for r in future.result()]


def store_results(con: duckdb.DuckDBPyConnection, build_id: str, results: Sequence[ExpectationResult]) -> None:
    ensure_build_tables(con)
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [
        (
            build_id,
            r.suite,
            r.expectation,
            r.rule,
            json.dumps(r.kwargs, sort_keys=True),
            r.success,
            r.element_count,
            r.unexpected_count,
            json.dumps(r.failing_rows, sort_keys=True, default=str),
            now,
        )
        for r in results
    ]
    if rows:
        con.executemany("insert into validation_results values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def failure_message(build_id: str, results: Sequence[ExpectationResult]) -> str:
    failed = [r for r in results if not r.success]
    lines = [
        f"quality gate failed for build {build_id}: {len(failed)} of {len(results)} expectations failed; "
        "the build is not published."
    ]
    for r in failed:
        lines.append(f"- FAILED {r.describe()}: {r.unexpected_count} unexpected of {r.element_count} rows")
        for row in r.failing_rows:
            lines.append(f"    {json.dumps(row, sort_keys=True, default=str)}")
    return "\n".join(lines)
