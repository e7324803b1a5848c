"""The gate's verdicts, check for check, against golden files (`tests/golden/gate/<case>.json`).

The golden files were recorded from the gate as it was before its rules moved into the models' YAML (the 280-line
`SUITES` literal of `quality/gate.py` and the singular tests of `transform/sql/tests/`), on the planted-corruption
cases of `test_quality` and `test_sql_asserts`: every later build of the same case must give the same verdict for
every check (suite, expectation, rule, arguments, success, counts). Regenerate deliberately with UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "golden" / "gate"


def verdicts(results: Iterable[Any]) -> list[dict[str, Any]]:
    """One plain record per check, sorted (the order of suites is the runner's, not a verdict). A dbt test's file
    is left out: the rule moved files, its verdict did not."""
    out = []
    for r in results:
        kwargs = {k: v for k, v in r.kwargs.items() if k != "file"}
        out.append({"suite": r.suite, "expectation": r.expectation, "rule": r.rule, "kwargs": kwargs,
                    "success": r.success, "element_count": r.element_count, "unexpected_count": r.unexpected_count})
    return sorted(out, key=lambda v: json.dumps(v, sort_keys=True))


def _file(case: str) -> Path:
    return GOLDEN / (re.sub(r"[^a-z0-9]+", "_", case.lower()).strip("_") + ".json")


def check(case: str, results: Iterable[Any]) -> None:
    """Compare a build's verdicts with the case's golden file (write it under UPDATE_GOLDEN=1)."""
    got = verdicts(results)
    path = _file(case)
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    expected = json.loads(path.read_text())
    assert got == expected, _diff(case, expected, got)


def _diff(case: str, expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> str:
    key = [json.dumps(v, sort_keys=True) for v in expected]
    new = [json.dumps(v, sort_keys=True) for v in got]
    lines = [f"gate verdicts changed for case {case!r}:"]
    lines += [f"- {v}" for v in key if v not in new]
    lines += [f"+ {v}" for v in new if v not in key]
    return "\n".join(lines)
