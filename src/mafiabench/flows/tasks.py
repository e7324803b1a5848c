"""Prefect tasks shared by the flows (study, detect): the after-landing steps and the publishing tail, each a
thin wrapper over plain code (`mafiabench.flows.pipeline`, `mafiabench.publish`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from mafiabench.detect.detection_runs import DetectorSpec
from mafiabench.flows import pipeline


@task(name="import-dataset", task_run_name="import-{fmt}", cache_policy=NO_CACHE)
def import_dataset(fmt: str, path: str, warehouse: str, study: str | None = None) -> str:
    """Import one dataset (idempotent: a re-run lands nothing twice)."""
    return pipeline.import_text(fmt, pipeline.import_one(fmt, path, warehouse, study))


@task(name="detect", cache_policy=NO_CACHE)
async def detect_games(spec: DetectorSpec, warehouse: str, endpoints: Any = None, cache_dir: str | None = None
                       ) -> dict[str, Any]:
    """Every (game, cut, detector) not landed yet: cleanse, ask, land (once per key)."""
    return (await pipeline.detect(spec, warehouse, endpoints=endpoints, cache_dir=cache_dir)).to_dict()


@task(name="build-marts", cache_policy=NO_CACHE)
def build_marts(warehouse: str) -> str:
    """Rebuild staging, marts and the quality gate; a failed expectation fails the flow run before publishing."""
    from mafiabench import publish as publishing  # dbt, polars and the gate: only a run that publishes pays for them

    return publishing.build(Path(warehouse)).summary()


@task(name="render-dashboards", cache_policy=NO_CACHE)
def render_dashboards(warehouse: str, out_dir: str | None = None, force: bool = False,
                      figures: str | None = None) -> str:
    """Render the static dashboards from the build that just passed its gate (default folder: the warehouse's own;
    the pages of another warehouse are replaced only with `force`)."""
    from mafiabench import publish as publishing

    return publishing.render(Path(warehouse), None if out_dir is None else Path(out_dir), force=force,
                             figures=None if figures is None else Path(figures)).summary()
