"""Prefect flow: import an external game dataset into the warehouse. Thin by design: the logic (reading, landing,
idempotency, the report) is `mafiabench.importers.run_import`, tested without Prefect. One coarse task, since the
warehouse takes one writer and an import is I/O bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, task

from mafiabench.flows.pipeline import import_text
from mafiabench.importers import run_import
from mafiabench.warehouse.landing import warehouse_lock
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE, connect


@task(name="import-dataset", retries=0)
def import_dataset(fmt: str, path: str, warehouse: str, records: str | None, study: str | None = None
                   ) -> dict[str, Any]:
    with warehouse_lock(Path(warehouse), what=f"import {fmt}"):
        con = connect(warehouse)
        try:
            report = run_import(fmt, Path(path), con, records_dir=Path(records) if records else None, study=study)
        finally:
            con.close()
    return report.to_dict()


@flow(name="import", log_prints=True)
def import_flow(fmt: str, path: str, warehouse: str = str(DEFAULT_WAREHOUSE), records: str | None = None,
                study: str | None = None) -> dict[str, Any]:
    """Import `path` (format `mini-mafia`, `dallinger` or `llmafia`) into `warehouse` as one study; returns the
    report."""
    report = import_dataset(fmt, path, warehouse, records, study)
    print(import_text(fmt, report))
    return report
