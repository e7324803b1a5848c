"""The data-quality gate: a runner of the expectation suites declared beside the models (the dbt data tests run
beside it, in `mafiabench.publish`).

The gate holds no rule of its own: each suite is declared in the YAML of the model (or raw table) it guards, under
`meta.gx` (`quality.suites`: Great Expectations' expectations by name), and read from there with the build's
settings (`gate_suites`). Each suite runs in DuckDB as set-based queries with the meaning its GX expectations have
(`quality.expectations`): its rows are counted where they are, and only a failing check's first rows are fetched, so
a million games' tables never reach Python (the gate pulled frames into GX until issue 37; GX on a frame remains the
reference the SQL is tested against, `quality.validator`). Checks that need the event order (a vote by a player
already dead) are computed in SQL first (`int_game_checks`, `int_votes`) and the suite expects zero violations.
Every expectation's outcome is stored in `validation_results`; any failure fails the build, which then is not
published (`warehouse.builds.gate_passed`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import duckdb

from mafiabench.errors import UserError
from mafiabench.quality.expectations import ExpectationResult, json_safe_rows, run_suite
from mafiabench.quality.suites import Check, Suite, declared_suites
from mafiabench.warehouse.builds import ensure_build_tables

__all__ = ["DEFAULT_MAX_UNUSABLE", "Check", "ExpectationResult", "QualityGateError", "Suite", "failure_message",
           "gate_suites", "json_safe_rows", "run_suites", "store_results"]

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


def run_suites(con: duckdb.DuckDBPyConnection, *, suites: Sequence[Suite]) -> list[ExpectationResult]:
    """Run the suites (a build's: `gate_suites`) as queries in DuckDB (`quality.expectations`); return one result
    per expectation, in the suites' order. (The dbt project's data tests run in the pipeline beside these:
    `mafiabench.publish`.)"""
    return [r for suite in suites for r in run_suite(con, suite)]


STORE_BATCH = 200  # results stored a statement


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
    # A statement per few hundred rows, not one per row (`executemany`): 101 results at a million games' warehouse
    # 0.085-0.10 -> 0.015 s, and up to 0.36 s beside other work at load 4.
    for start in range(0, len(rows), STORE_BATCH):
        part = rows[start:start + STORE_BATCH]
        marks = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(part))
        con.execute(f"insert into validation_results values {marks}", [v for row in part for v in row])


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
