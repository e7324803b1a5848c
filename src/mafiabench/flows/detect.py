"""The detector flow: import an experiment's `[[imports]]` datasets, run the Mafia Detector over the warehouse's
eligible games (every day cut not landed yet), and optionally rebuild the marts and render the dashboards.

    mafiabench detect experiments/hidden_in_plain_text_offline.toml --publish

Thin by design: the logic lives in `mafiabench.detect` (tested without Prefect); each step is one task. Model-call
retries live in the backends; a detection whose call failed for good is not landed and the next run asks again.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from mafiabench.detect.detection_runs import DetectorSpec
from mafiabench.errors import UserError
from mafiabench.flows.tasks import build_marts, detect_games, import_dataset, render_dashboards
from mafiabench.redact import install_log_scrubber
from mafiabench.study.spec import load_experiment
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE


def resolve(experiment_path: str | None, warehouse: str | None, spec: DetectorSpec | None
            ) -> tuple[Any, str, DetectorSpec, Any, str | None]:
    """(experiment or None, warehouse, detector spec, endpoints, cache dir) from the flow's parameters."""
    exp = load_experiment(experiment_path) if experiment_path else None
    if spec is None:
        if exp is None or exp.detector is None:
            raise UserError(
                f"{experiment_path or 'no experiment file'}: no [detector] section; add one (models = [...], "
                "simulated = true, imported = [...]) or give detectors on the command line (--model)"
            )
        spec = exp.detector_spec()
    wh = warehouse or (exp.warehouse if exp is not None else str(DEFAULT_WAREHOUSE))
    endpoints = exp.endpoint_configs() if exp is not None else None
    return exp, wh, spec, endpoints, (exp.cache_dir if exp is not None else None)


@flow(name="mafiabench-detect", log_prints=False)
async def detect_flow(
    experiment_path: str | None = None,
    warehouse: str | None = None,
    spec: DetectorSpec | None = None,
    publish: bool = False,
    dashboards: str | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Import the experiment's datasets, detect, and (publish) build + render; returns the detection report with
    the import lines under `imports`."""
    install_log_scrubber()
    logger = get_run_logger()
    exp, wh, detector, endpoints, cache_dir = resolve(experiment_path, warehouse, spec)
    lines = [import_dataset(i.format, i.path, wh, i.study) for i in (exp.imports if exp is not None else [])]
    for line in lines:
        logger.info(line)
    report = await detect_games(detector, wh, endpoints, cache_dir)
    report["imports"] = lines
    logger.info("detect: %d planned, %d landed, %d already landed, %d failed", report["planned"], report["landed"],
                report["already_landed"], len(report["failed"]))
    if publish:
        logger.info(build_marts(wh))
        logger.info(render_dashboards(wh, dashboards, force))
    return report
