"""`mafiabench run <experiment.toml>`: play the experiment's missing games and land them in the warehouse.

By default through the Prefect flow (`mafiabench.flows.study`) on a local Prefect server that the runs share: the
first run starts it, later runs find it, and it stops itself once no run has used it for a while
(`mafiabench.prefect_server`); with PREFECT_API_URL set, that server. `--no-prefect` runs the same steps directly
(same records, same summary, no Prefect UI).

Before Prefect starts, the command takes the warehouse lock (a second run fails in a second with one clear line).
One Ctrl-C stops a run within seconds, with the resume hint and exit code 130 (`commands.Interrupt`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from mafiabench.commands import Interrupt, command, process_started

# Quiet, robust defaults for Prefect's client and the local server; a user's own settings win.
PREFECT_DEFAULTS = {
    "DO_NOT_TRACK": "1",  # Prefect's client telemetry, and its "Prefect collects anonymous usage data" notice
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "PREFECT_TASKS_DEFAULT_NO_CACHE": "true",
}
# Without --verbose the terminal gets warnings and errors only: no task completion lines, no server notices. The
# INFO lines still reach Prefect's API (its UI and the flow run's logs); only the console handler is raised.
QUIET_PREFECT = {"PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING"}


def prefect_settings() -> None:
    """Prefect's environment for a command that runs a flow: quiet defaults (a user's own settings win), then the
    shared local server (its address in PREFECT_API_URL). Before Prefect is imported: it reads its settings then."""
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    from mafiabench.prefect_server import ensure_server

    ensure_server()


def quiet_prefect(verbose: bool) -> None:
    """Set Prefect's console log level before Prefect is imported (it reads its logging settings at import)."""
    if not verbose:
        for key, value in QUIET_PREFECT.items():
            os.environ.setdefault(key, value)
    logging.getLogger("prefect.flow_runs").addFilter(_no_user_error_traceback)


def _no_user_error_traceback(record: logging.LogRecord) -> bool:
    """Drop Prefect's ERROR lines for a flow that stopped on a `UserError` (its traceback, then its failed state):
    the CLI prints the error itself, as one line. Other exceptions keep their traceback."""
    from mafiabench.errors import UserError

    exc = record.exc_info[1] if record.exc_info else None
    if isinstance(exc, UserError):
        _user_errors.add(str(exc))
        return False
    message = record.getMessage()
    return not (message.startswith("Finished in state Failed") and any(e in message for e in _user_errors))


_user_errors: set[str] = set()


def register(app: typer.Typer) -> None:
    command(
        app,
        "run",
        short_help="play an experiment's missing games and land them in the warehouse",
        help=(
            "Play every planned game of the experiment that is not landed yet (re-running resumes: landed games "
            "are skipped, failed ones replayed), land each record in the raw folder and the DuckDB warehouse, and "
            "print a run summary. Runs through a local Prefect server shared by the runs (started on demand, stopped "
            "when idle) or PREFECT_API_URL's, unless --no-prefect. Ctrl-C stops it (run it again to resume)."
        ),
    )(main)


def interrupted_line() -> str:
    """Ctrl-C's line: how many planned games are kept and how many remain (the run's summary counts them)."""
    from mafiabench.commands import RESUME_HINT
    from mafiabench.study.summary import latest

    summary = latest()
    return RESUME_HINT if summary is None else summary.interrupted_line()


@contextlib.contextmanager
def build_bar(show: bool) -> Iterator[None]:
    """With --publish, the build after the games shows its bar per model (on a terminal), as `mafiabench build`'s."""
    if not show:
        yield
        return
    from mafiabench.publish import showing_progress
    from mafiabench.study.progress import CountProgress

    with showing_progress(lambda: CountProgress("build", "models", then="then the quality gate")):
        yield


def flow_module() -> ModuleType:
    """The study flow's module (package code, so it is found wherever mafiabench is installed)."""
    return importlib.import_module("mafiabench.flows.study")


def main(
    experiment: Annotated[Path, typer.Argument(help="experiment file (TOML), e.g. experiments/demo.toml")],
    warehouse: Annotated[
        Path | None, typer.Option(help="DuckDB file (default: the experiment's `warehouse`)", show_default=False)
    ] = None,
    no_prefect: Annotated[
        bool, typer.Option("--no-prefect", help="run without Prefect (same steps, no flow run)")
    ] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="no progress bar")] = False,
    publish: Annotated[
        bool,
        typer.Option(
            "--publish", help="after landing, rebuild the marts behind the quality gate and render the dashboards"
        ),
    ] = False,
    dashboards: Annotated[
        Path | None,
        typer.Option(help="dashboards folder (with --publish; default: the warehouse's own, dashboards/ for "
                     "mafiabench.duckdb, else dashboards-<name>/)", show_default=False),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="replace a dashboards folder that shows another warehouse's pages")
    ] = False,
    figures: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="with --publish: also write each chart as PNG and SVG into DIR, a folder of "
                     "yours that the next render leaves alone", show_default=False),
    ] = None,
    dask: Annotated[
        str | None,
        typer.Option(help="play the games on this Dask scheduler's workers (tcp://host:8786); overrides [cluster]",
                     show_default=False),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="also print Prefect's task and flow log lines and notices")
    ] = False,
) -> int:
    quiet_prefect(verbose)
    from mafiabench.play.runner import BackendPool
    from mafiabench.redact import install_log_scrubber
    from mafiabench.study.spec import load_experiment

    install_log_scrubber()  # before Prefect logs anything: its logs land in its server's database
    exp = load_experiment(experiment)
    if dask is not None:
        from mafiabench.play.config import validate
        from mafiabench.study.spec import Cluster

        exp = exp.model_copy(update={"cluster": validate(Cluster, {"dask": dask}, "--dask")})
    # Unknown provider, missing key, a dollar cap over an unpriced model: say so in a second, before Prefect starts.
    BackendPool(endpoints=exp.endpoint_configs()).check(exp.agent_specs())
    from mafiabench.prices import free_providers_of, load_prices
    from mafiabench.study.budget import require_prices

    require_prices(exp.budget, exp.agent_specs(),
                   load_prices().with_overrides(exp.prices, free_providers_of(exp.endpoint_configs())))
    progress = False if no_progress else None
    if figures is not None and not publish:
        from mafiabench.errors import UserError

        raise UserError(f"--figures {figures}: the figures are written when the dashboards are, so it needs --publish")
    if publish:  # another warehouse's pages in the way: say so now, not after playing
        from mafiabench.dashboards.render import check_site
        from mafiabench.publish import dashboards_for

        wh = exp.warehouse_path(warehouse)
        check_site(dashboards or dashboards_for(wh), wh.resolve(), force=force)
    from mafiabench.warehouse.landing import warehouse_lock

    try:
        # A second run on the same warehouse stops at the lock, before Prefect starts (the study re-enters it).
        with Interrupt(interrupted_line) as interrupt, warehouse_lock(
            exp.warehouse_path(warehouse), what=f"mafiabench run {exp.name}", share=True
        ), build_bar(publish and progress is not False):
            summary = _run(
                experiment, exp, progress, interrupt, warehouse=warehouse, no_prefect=no_prefect, publish=publish,
                dashboards=dashboards, force=force, figures=figures,
            )
    except KeyboardInterrupt:  # the hint is printed
        return 130
    print(summary.text())
    return int(summary.exit_code)


def _run(
    experiment: Path,
    exp: Any,
    progress: bool | None,
    interrupt: Interrupt,
    *,
    warehouse: Path | None,
    no_prefect: bool,
    publish: bool,
    dashboards: Path | None,
    force: bool,
    figures: Path | None = None,
) -> Any:
    from mafiabench.study.run import run_study
    from mafiabench.study.summary import RunSummary

    summary: RunSummary
    if no_prefect:
        summary = interrupt.run(run_study(exp, warehouse=warehouse, progress=progress, started=process_started()))
        if not summary.shard_errors and (exp.imports or exp.detector is not None):
            from mafiabench.flows.pipeline import after_landing

            summary.after, _ = interrupt.run(after_landing(exp, summary.warehouse))
        if publish and not summary.shard_errors:
            from mafiabench import publish as publishing

            print(publishing.build(Path(summary.warehouse)).summary())
            print(publishing.render(Path(summary.warehouse), dashboards, force=force, figures=figures).summary())
    else:
        from mafiabench.study.run import Study, plan_early

        prefect_settings()  # first: the shared server's lease, before anything that takes time (it stops when idle)
        study = Study(exp, warehouse=warehouse, orchestrator="prefect", progress=progress, started=process_started())
        # A study played in worker processes is planned now and its workers spawned, so that they start while
        # Prefect is imported (the flow takes the study over); others are planned in the flow.
        plan_early(study)
        try:
            summary = _flow(experiment, study, interrupt, warehouse=warehouse, publish=publish, dashboards=dashboards,
                            force=force, figures=figures)
        finally:
            study.__exit__(None, None, None)  # the flow closed it, unless it never ran
    return summary


def _flow(
    experiment: Path,
    study: Any,
    interrupt: Interrupt,
    *,
    warehouse: Path | None,
    publish: bool,
    dashboards: Path | None,
    force: bool,
    figures: Path | None = None,
) -> Any:
    """The study flow through Prefect (imported here, after any early plan), handed the command's study."""
    from mafiabench.study.summary import RunSummary

    summary: RunSummary
    module = flow_module()
    try:
        summary = interrupt.run(
            module.study_flow(
                experiment_path=str(experiment),
                warehouse=None if warehouse is None else str(warehouse),
                progress=study.progress,
                publish=publish,
                dashboards=None if dashboards is None else str(dashboards),
                force=force,
                dask=study.dask_address,
                started=process_started(),
                study=study,
                figures=None if figures is None else str(figures),
            )
        )
    except module.StudyIncomplete as exc:
        summary = exc.summary
    return summary
