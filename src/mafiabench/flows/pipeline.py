"""The steps after landing an experiment's games, as plain functions (no Prefect): import the experiment's
`[[imports]]` datasets, then run its `[detector]`. The Prefect flows wrap them as tasks; `mafiabench run
--no-prefect` and `mafiabench detect --no-prefect` call them directly, so both paths do the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mafiabench.detect.detection_runs import DetectorSpec, DetectReport, detect_warehouse
from mafiabench.importers import run_import
from mafiabench.importers.common import unreadable_line
from mafiabench.warehouse.landing import warehouse_lock
from mafiabench.warehouse.raw import connect


def import_one(fmt: str, path: str, warehouse: Path | str, study: str | None = None) -> dict[str, Any]:
    """`mafiabench import FORMAT PATH` under the warehouse lock (idempotent); returns the report as a dict."""
    with warehouse_lock(Path(warehouse), what=f"import {fmt}"):
        con = connect(warehouse)
        try:
            return run_import(fmt, Path(path), con, study=study).to_dict()
        finally:
            con.close()


def import_text(fmt: str, report: dict[str, Any]) -> str:
    """One line of counts, then each game the import left out (unreadable) by name and why."""
    return "\n".join([
        f"import {fmt}: {report['games_read']} games read, {report['landed']} landed, "
        f"{report['skipped']} already present, {len(report['unreadable'])} unreadable",
        *(f"  unreadable: {unreadable_line(u['file'], u['reason'])}" for u in report["unreadable"])])


def import_sources(experiment: Any, warehouse: Path | str) -> list[str]:
    """Import every `[[imports]]` dataset of the experiment; one summary line each."""
    return [import_text(i.format, import_one(i.format, i.path, warehouse, i.study)) for i in experiment.imports]


async def detect(spec: DetectorSpec, warehouse: Path | str, *, endpoints: Any = None,
                 cache_dir: str | None = None) -> DetectReport:
    """The Mafia Detector over the warehouse's eligible games (see `mafiabench.detect.detection_runs`)."""
    return await detect_warehouse(warehouse, spec, endpoints=endpoints, cache_dir=cache_dir)


async def after_landing(experiment: Any, warehouse: Path | str) -> tuple[list[str], DetectReport | None]:
    """Imports, then the detector, for an experiment that has them; (summary lines, the detection report)."""
    lines = import_sources(experiment, warehouse)
    spec = experiment.detector_spec()
    if spec is None:
        return lines, None
    report = await detect(spec, warehouse, endpoints=experiment.endpoint_configs(), cache_dir=experiment.cache_dir)
    lines.append("detect: " + report.to_text())
    return lines, report
