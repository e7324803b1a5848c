"""The quality gate's GX helper process (`validator.ValidatorProcess`): a build validates there, so importing GX runs
beside the models' build; its verdicts are those of GX in the build's process, and a helper killed with SIGKILL
costs nothing but the fallback to validating in process. And the build's gate beside its Python models: a suite over
a Python model's table waits for it, and the results keep a sequential gate's order.

The frames are `test_gate_candidates`' edge cases (every check fails on them, so equal results mean something).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mafiabench.quality import gate, validator
from mafiabench.quality.gate import Suite, run_suites
from mafiabench.quality.validator import ValidatorProcess, _Validator
from support.gate import CHECKS, _con, declared_suites

SUITES = [Suite(f"edge_case_{i}", "select * from t", (check,)) for i, check in enumerate(CHECKS)]
SUITES.append(Suite("all_checks", "select * from t", CHECKS))


def _in_process() -> list[gate.ExpectationResult]:
    return run_suites(_con(), suites=SUITES, validator=_Validator())


def test_the_helper_gives_the_verdicts_of_gx_in_process() -> None:
    helper = ValidatorProcess()
    try:
        pid = helper.pid
        assert pid is not None and pid != os.getpid()
        expected = _in_process()
        assert [r.success for r in expected].count(False) == len(expected)  # every check fails on these rows
        for _ in range(2):  # the helper's context serves build after build
            results = run_suites(_con(), suites=SUITES, validator=helper)
            assert results == expected  # suite, expectation, counts and failing rows, in order
    finally:
        helper.close()


def test_a_helper_killed_mid_gate_leaves_the_verdicts_whole() -> None:
    helper = ValidatorProcess()
    pid = helper.pid
    assert pid is not None
    pulled: list[str] = []

    def pull(con, sql):  # the gate pulls a suite's frame, then validates it: the helper dies after three suites
        pulled.append(sql)
        if len(pulled) == 4:
            os.kill(pid, signal.SIGKILL)
        return con.sql(sql).df()

    results = run_suites(_con(), suites=SUITES, validator=helper, pull=pull)
    assert len(pulled) == len(SUITES) > 4
    assert results == _in_process()
    assert helper.pid is None  # it validated in process from then on


def test_a_suite_gx_fails_on_raises_as_in_process_and_the_helper_serves_on() -> None:
    broken = Suite("broken", "select * from t", (gate.Check("ExpectNoSuchThing", {"column": "id"}, "no such check"),))
    with pytest.raises(AttributeError, match="ExpectNoSuchThing"):
        run_suites(_con(), suites=[broken], validator=_Validator())
    helper = ValidatorProcess()
    try:
        pid = helper.pid
        with pytest.raises(AttributeError, match="ExpectNoSuchThing"):
            run_suites(_con(), suites=[broken], validator=helper)
        assert helper.pid == pid is not None  # the same helper, still serving
        assert run_suites(_con(), suites=SUITES, validator=helper) == _in_process()
    finally:
        helper.close()


def test_a_stopped_helper_is_let_go_after_its_timeout() -> None:
    helper = ValidatorProcess()
    helper.answer_timeout = 2.0
    pid = helper.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # alive, never answering
    t0 = time.monotonic()
    results = run_suites(_con(), suites=SUITES, validator=helper)
    assert results == _in_process()
    assert time.monotonic() - t0 < 60  # one timeout, then every suite in process
    assert helper.pid is None
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left stopped
        os.kill(pid, 0)


def test_a_build_process_never_imports_gx_itself(tmp_path: Path) -> None:
    """The helper is what moves GX's import out of the build's critical path: the build's own process must not load
    it (it would, were the gate to validate in process), and the build still passes its gate."""
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parents[1])!r})
from mafiabench import publish
from mafiabench.warehouse import raw
from support.records import mini_record
con = raw.connect({str(tmp_path / "w.duckdb")!r})
raw.load_records(con, [mini_record(f"g{{i}}") for i in range(3)])
result = publish.build_warehouse(con)
print(result.published, len(result.validation), "great_expectations" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    published, n_results, gx_loaded = out.stdout.split()
    assert published == "True" and int(n_results) > 50
    assert gx_loaded == "False"


def test_builds_in_one_process_share_one_helper() -> None:
    first = validator.start_validator()
    assert validator.start_validator() is first
    first.close()
    second = validator.start_validator()
    assert second is not first and second.pid is not None


def test_the_gate_waits_for_the_python_models_it_reads(tmp_path: Path) -> None:
    """The build runs its Python models beside the gate: a suite over a Python model's table must wait for it, and
    read the new rows, not those of the published build (here made to fail that suite)."""
    from mafiabench import publish
    from mafiabench.warehouse import raw
    from support.records import mini_record

    con = raw.connect(tmp_path / "w.duckdb")
    raw.load_records(con, [mini_record(f"g{i}") for i in range(3)])
    assert publish.build_warehouse(con).published
    con.execute("insert into mart_detector_accuracy (scope, single_rate) values ('game', 1.5)")  # a broken old mart
    result = publish.build_warehouse(con, raise_on_failure=False)
    assert result.published, [r.describe() for r in result.validation if not r.success]
    # The results come in the order of a sequential gate: the dbt data tests, then each suite in turn.
    names = [s.name for s in declared_suites()]
    seen = [r.suite for r in result.validation]
    n_dbt = seen.count("dbt_tests")
    assert n_dbt > 0 and seen[:n_dbt] == ["dbt_tests"] * n_dbt
    assert seen[n_dbt:] == sorted(seen[n_dbt:], key=names.index) and set(seen[n_dbt:]) == set(names)
    con.close()
