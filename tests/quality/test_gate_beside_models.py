"""The build's gate beside its Python models: a suite over a Python model's table waits for it, the results keep a
sequential gate's order, and the build's process runs no Great Expectations (the gate is SQL in DuckDB).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.gate import declared_suites


@pytest.mark.slow
def test_a_build_process_never_imports_gx_itself(tmp_path: Path) -> None:
    """The gate runs in DuckDB: a build loads no Great Expectations (importing it and its context cost 2-3 s of CPU,
    in a helper process until issue 37), starts no helper process, and passes its gate."""
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parents[1])!r})
from mafiabench import publish
from mafiabench.warehouse import raw
from support.records import mini_record
con = raw.connect({str(tmp_path / "w.duckdb")!r})
raw.load_records(con, [mini_record(f"g{{i}}") for i in range(3)])
result = publish.build_warehouse(con)
print(result.published, len(result.validation), "great_expectations" in sys.modules,
      "mafiabench.quality.validator" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    published, n_results, gx_loaded, helper_loaded = out.stdout.split()
    assert published == "True" and int(n_results) > 50
    assert gx_loaded == "False" and helper_loaded == "False"


@pytest.mark.slow
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
