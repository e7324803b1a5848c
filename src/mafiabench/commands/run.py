"""`mafiabench run <experiment.toml>`: play the experiment's missing games and land them in the warehouse.

By default through the Prefect flow (`flows/study_flow.py`) on Prefect's temporary local server, which needs
nothing started; `--no-prefect` runs the same steps directly (same records, same summary, no Prefect UI).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from mafiabench.errors import UserError

FLOW_FILE = Path("flows") / "study_flow.py"

# Quiet, robust defaults for Prefect's temporary server; a user's own settings win.
PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "PREFECT_TASKS_DEFAULT_NO_CACHE": "true",
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="play an experiment's missing games and land them in the warehouse",
        description=(
            "Play every planned game of the experiment that is not landed yet (re-running resumes: landed games "
            "are skipped, failed ones replayed), land each record in the raw folder and the DuckDB warehouse, and "
            "print a run summary. Runs through Prefect's temporary local server unless --no-prefect."
        ),
    )
    p.add_argument("experiment", type=Path, help="experiment file (TOML), e.g. experiments/demo.toml")
    p.add_argument("--warehouse", type=Path, default=None, help="DuckDB file (default: the experiment's `warehouse`)")
    p.add_argument("--no-prefect", action="store_true", help="run without Prefect (same steps, no flow run)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--publish",
        action="store_true",
        help="after landing, rebuild the marts behind the quality gate and render the dashboards",
    )
    p.add_argument("--dashboards", type=Path, default=Path("dashboards"), help="dashboards folder (with --publish)")
    p.set_defaults(func=main)


def flow_module() -> ModuleType:
    """Import `flows/study_flow.py` from the working directory or the checkout the package runs from."""
    here = Path(__file__).resolve()
    candidates = [Path.cwd() / FLOW_FILE, here.parents[3] / FLOW_FILE]
    for path in candidates:
        if path.is_file():
            spec = importlib.util.spec_from_file_location("mafiabench_study_flow", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            return module
    raise UserError(
        f"cannot find {FLOW_FILE} (looked in {', '.join(str(c.parent) for c in candidates)}); run from the "
        "repository or use --no-prefect"
    )


def main(args: argparse.Namespace) -> int:
    from mafiabench.play.runner import BackendPool
    from mafiabench.redact import install_log_scrubber
    from mafiabench.study.spec import load_experiment

    install_log_scrubber()  # before Prefect logs anything: its logs land in its server's database
    exp = load_experiment(args.experiment)
    # Unknown provider or missing key: say so in a second, before Prefect's server starts.
    BackendPool(endpoints=exp.endpoint_configs()).check(exp.agent_specs())
    progress = False if args.no_progress else None
    try:
        summary = _run(args, exp, progress)
    except KeyboardInterrupt:
        print(
            "\ninterrupted: finished games are in the raw folder; run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    print(summary.text())
    return int(summary.exit_code)


def _run(args: argparse.Namespace, exp: Any, progress: bool | None) -> Any:
    from mafiabench.study.run import run_study
    from mafiabench.study.summary import RunSummary

    summary: RunSummary
    if args.no_prefect:
        summary = asyncio.run(run_study(exp, warehouse=args.warehouse, progress=progress))
        if args.publish and not summary.shard_errors:
            from mafiabench import publish

            print(publish.build(Path(summary.warehouse)).summary())
            print(publish.render(Path(summary.warehouse), args.dashboards).summary())
    else:
        for key, value in PREFECT_DEFAULTS.items():
            os.environ.setdefault(key, value)
        module = flow_module()
        try:
            summary = asyncio.run(
                module.study_flow(
                    experiment_path=str(args.experiment),
                    warehouse=None if args.warehouse is None else str(args.warehouse),
                    progress=progress,
                    publish=args.publish,
                    dashboards=str(args.dashboards),
                )
            )
        except module.StudyIncomplete as exc:
            summary = exc.summary
    return summary
