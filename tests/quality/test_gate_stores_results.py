"""The gate stores every result in `validation_results`, a row per expectation in the gate's order, its arguments
and failing rows as JSON (quality.gate.store_results): more results than one statement stores too."""

from __future__ import annotations

import json

import duckdb

from mafiabench.quality.gate import STORE_BATCH, ExpectationResult, store_results


def test_every_result_is_stored_in_order() -> None:
    results = [ExpectationResult(
        suite=f"suite {i % 7}", expectation="expect_column_values_to_be_between", rule=f"rule {i}: it's \"quoted\"",
        kwargs={"column": "x", "min_value": 0.5 * i, "max_value": None}, success=i % 3 != 0,
        element_count=2**40 + i, unexpected_count=-1 if i == 5 else (i % 3 == 0) * i,
        failing_rows=[{"game_id": f"g-{i}", "text": "Zoë\u00a0", "n": None}] if i % 3 == 0 else [])
        for i in range(2 * STORE_BATCH + 17)]
    con = duckdb.connect()
    store_results(con, "b-1", results)
    got = con.execute("select * exclude (run_at) from validation_results order by rowid").fetchall()
    assert got == [("b-1", r.suite, r.expectation, r.rule, json.dumps(r.kwargs, sort_keys=True), r.success,
                    r.element_count, r.unexpected_count, json.dumps(r.failing_rows, sort_keys=True)) for r in results]
    ((stamps, missing),) = con.execute("select count(distinct run_at), count(*) - count(run_at) "
                                       "from validation_results").fetchall()
    assert (stamps, missing) == (1, 0)
    store_results(con, "b-2", [])
    assert con.execute("select count(*) from validation_results where build_id = 'b-2'").fetchone() == (0,)
