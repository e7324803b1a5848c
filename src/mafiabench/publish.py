"""The pipeline's last two steps after landing: transform + validate, then render the dashboards.

Shared by the study flow (as two tasks) and `mafiabench run` without Prefect, so both end the same way. A failed
quality gate raises `QualityGateError` naming the expectation and failing rows; the dashboards are then left as they
were (render refuses unless the latest build passed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mafiabench.build.marts import BuildResult, build_warehouse
from mafiabench.dashboards import render_dashboards
from mafiabench.dashboards.render import RenderResult
from mafiabench.errors import UserError
from mafiabench.warehouse.landing import warehouse_lock
from mafiabench.warehouse.raw import connect

DEFAULT_DASHBOARDS = Path("dashboards")


def build(warehouse: Path, **options: Any) -> BuildResult:
    """Rebuild marts and run the gate (options: those of `build_warehouse`), holding the warehouse lock so no run
    lands meanwhile."""
    with warehouse_lock(warehouse, what="build"):
        con = connect(warehouse)
        try:
            return build_warehouse(con, **options)
        finally:
            con.close()


def render(warehouse: Path, out_dir: Path = DEFAULT_DASHBOARDS, **options: Any) -> RenderResult:
    """Render the dashboards from the latest passing build (read-only; options: those of `render_dashboards`)."""
    if not Path(warehouse).is_file():
        raise UserError(f"warehouse {warehouse} not found: run an experiment and `mafiabench build` first")
    con = connect(warehouse, read_only=True)
    try:
        return render_dashboards(con, out_dir, **options)
    finally:
        con.close()
