"""The Python models' modules (numpy, polars, scipy's stats and optimize: 0.6-1.3 s of one core at import) are imported
on a thread started before dbt runs the SQL models, so the gate's path (the Python models run after dbt) does not
pay for them (issue 37)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import duckdb

from mafiabench.transform import models
from mafiabench.transform.build import dbt_runner
from mafiabench.transform.build.marts import stage

CHECK = """
import sys
from mafiabench.transform.models import PYTHON_MODELS, import_beside
assert "scipy.stats" not in sys.modules and "mafiabench.transform.models.ratings" not in sys.modules
thread = import_beside([m for m in PYTHON_MODELS if m.name in ("mart_ratings", "mart_detector")])
assert thread.daemon and thread.name == "import-models"
thread.join()
assert {"scipy.stats", "scipy.optimize", "mafiabench.transform.models.ratings",
        "mafiabench.transform.models.detector"} <= set(sys.modules)
assert "mafiabench.transform.models.coherence" not in sys.modules  # only the models asked for
"""


def test_import_beside_imports_the_models_modules_on_a_thread() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_stage_starts_the_import_before_dbt_runs(fresh_warehouse: duckdb.DuckDBPyConnection, monkeypatch: Any) -> None:
    events: list[tuple[str, ...]] = []
    monkeypatch.setattr(models, "import_beside", lambda steps: events.append(("import", *(s.name for s in steps))))
    monkeypatch.setattr(dbt_runner, "manifest", lambda *a, **k: None)
    monkeypatch.setattr(dbt_runner, "run", lambda *a, **k: events.append(("dbt run",)) or [])
    stage(fresh_warehouse, only=["mart_ratings"], python=False)
    assert events == [("import", "mart_ratings"), ("dbt run",)]
