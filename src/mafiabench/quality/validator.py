"""Great Expectations on a pandas frame: the reference the gate's SQL is held to (`quality.expectations`).

A build does not use it: the gate's checks run as queries in DuckDB, and GX 1.24 cannot validate DuckDB through
SQLAlchemy (every expectation fails upstream). `_Validator` validates a frame through an ephemeral context (no files,
no network) the way the gate did until issue 37, and the tests compare the SQL's verdicts, counts and failing rows
with its own on rows full of edge cases (`tests/quality/test_gate_sql.py`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from mafiabench.quality.expectations import SAMPLE_ROWS, ExpectationResult, json_safe
from mafiabench.quality.suites import Suite


def _rows(df: Any, index: Sequence[Any] | None = None, limit: int = SAMPLE_ROWS) -> list[dict[str, Any]]:
    part = df.loc[list(index)[:limit]] if index is not None else df.head(limit)
    return [{k: json_safe(v) for k, v in rec.items()} for rec in part.to_dict(orient="records")]


class _Validator:
    """An ephemeral GX context with one pandas datasource; one asset per suite."""

    def __init__(self) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.gx = gx
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.source = self.context.data_sources.add_pandas("mafiabench")

    def validate(self, suite: Suite, df: Any, element_count: int | None = None) -> list[ExpectationResult]:
        """Validate `df`; `element_count` is the suite's full row count when `df` holds only its candidate rows."""
        gx = self.gx
        asset = self.source.add_dataframe_asset(name=suite.name)
        try:
            return self._validate(gx, asset, suite, df, element_count)
        finally:
            self.source.delete_asset(suite.name)  # the context validates suite after suite

    def _validate(
        self, gx: Any, asset: Any, suite: Suite, df: Any, element_count: int | None
    ) -> list[ExpectationResult]:
        batch = asset.add_batch_definition_whole_dataframe(f"{suite.name}_all").get_batch(
            batch_parameters={"dataframe": df}
        )
        # GX reorders results (by column); `meta.check` ties each result back to its check.
        expectations = [
            getattr(gx.expectations, c.expectation)(**c.kwargs, meta={"check": i}) for i, c in enumerate(suite.checks)
        ]
        gx_suite = gx.ExpectationSuite(name=suite.name, expectations=expectations)
        report = batch.validate(
            gx_suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_ROWS}
        )
        out: list[ExpectationResult] = []
        for res in sorted(report.results, key=lambda r: int((r.expectation_config.meta or {})["check"])):
            check = suite.checks[int(res.expectation_config.meta["check"])]
            info = res.result or {}
            if check.expectation == "ExpectTableRowCountToEqual":
                unexpected = len(df) if not res.success else 0
                sample = _rows(df) if not res.success else []
            else:
                unexpected = int(info.get("unexpected_count") or 0)
                idx = info.get("partial_unexpected_index_list") or []
                sample = _rows(df, idx) if idx else []
            if res.exception_info and res.exception_info.get("raised_exception"):
                unexpected = unexpected or -1
                sample = [{"exception": str(res.exception_info.get("exception_message"))}]
            out.append(
                ExpectationResult(
                    suite=suite.name,
                    expectation=res.expectation_config.type,
                    rule=check.rule,
                    kwargs=dict(check.kwargs),
                    success=bool(res.success),
                    element_count=len(df) if element_count is None else element_count,
                    unexpected_count=unexpected,
                    failing_rows=sample,
                )
            )
        return out
