"""`mafiabench run <experiment.toml>`: play the experiment's missing games and land them in the warehouse.

By default through the Prefect flow (`mafiabench.flows.study`) on Prefect's temporary local server, which needs
nothing started; `--no-prefect` runs the same steps directly (same records, same summary, no Prefect UI).

Before Prefect starts, the command takes the warehouse lock (a second run fails in a second with one clear line)
and, on the temporary server, starts that server itself with a watchdog process: if this process dies, even by
kill -9, the watchdog stops the server, so no Prefect server outlives its run.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from mafiabench.commands import command

# Quiet, robust defaults for Prefect's temporary server; a user's own settings win.
PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "PREFECT_TASKS_DEFAULT_NO_CACHE": "true",
}
# Without --verbose the terminal gets warnings and errors only: no task-completion lines, no server notices. The
# INFO lines still reach Prefect's API (its UI and the flow run's logs); only the console handler is raised.
QUIET_PREFECT = {"PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING"}


def quiet_prefect(verbose: bool) -> None:
    """Set Prefect's console log level before Prefect is imported (it reads its logging settings at import)."""
    if not verbose:
        for key, value in QUIET_PREFECT.items():
            os.environ.setdefault(key, value)


def register(app: typer.Typer) -> None:
    command(
        app,
        "run",
        short_help="play an experiment's missing games and land them in the warehouse",
        help=(
            "Play every planned game of the experiment that is not landed yet (re-running resumes: landed games "
            "are skipped, failed ones replayed), land each record in the raw folder and the DuckDB warehouse, and "
            "print a run summary. Runs through Prefect's temporary local server unless --no-prefect."
        ),
    )(main)


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
    dashboards: Annotated[Path, typer.Option(help="dashboards folder (with --publish)")] = Path("dashboards"),
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
    # Unknown provider or missing key: say so in a second, before Prefect's server starts.
    BackendPool(endpoints=exp.endpoint_configs()).check(exp.agent_specs())
    progress = False if no_progress else None
    from mafiabench.warehouse.landing import warehouse_lock

    try:
        # A second run on the same warehouse stops here, before Prefect starts (the study re-enters this lock).
        with warehouse_lock(exp.warehouse_path(warehouse), what=f"mafiabench run {exp.name}", share=True):
            summary = _run(
                experiment, exp, progress, warehouse=warehouse, no_prefect=no_prefect, publish=publish,
                dashboards=dashboards,
            )
    except KeyboardInterrupt:
        print(
            "\ninterrupted: finished games are in the raw folder; run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    print(summary.text())
    return int(summary.exit_code)


def _run(
    experiment: Path,
    exp: Any,
    progress: bool | None,
    *,
    warehouse: Path | None,
    no_prefect: bool,
    publish: bool,
    dashboards: Path,
) -> Any:
    from mafiabench.study.run import run_study
    from mafiabench.study.summary import RunSummary

    summary: RunSummary
    if no_prefect:
        summary = asyncio.run(run_study(exp, warehouse=warehouse, progress=progress))  # exp carries --dask
        if not summary.shard_errors and (exp.imports or exp.detector is not None):
            from mafiabench.flows.pipeline import after_landing

            summary.after, _ = asyncio.run(after_landing(exp, summary.warehouse))
        if publish and not summary.shard_errors:
            from mafiabench import publish as publishing

            print(publishing.build(Path(summary.warehouse)).summary())
            print(publishing.render(Path(summary.warehouse), dashboards).summary())
    else:
        for key, value in PREFECT_DEFAULTS.items():
            os.environ.setdefault(key, value)
        module = flow_module()
        start_guarded_prefect_server()
        try:
            summary = asyncio.run(
                module.study_flow(
                    experiment_path=str(experiment),
                    warehouse=None if warehouse is None else str(warehouse),
                    progress=progress,
                    publish=publish,
                    dashboards=str(dashboards),
                    dask=None if exp.cluster is None else exp.cluster.dask,
                )
            )
        except module.StudyIncomplete as exc:
            summary = exc.summary
    return summary


WATCHDOG = """
import os, signal, sys, time
parent, server = int(sys.argv[1]), int(sys.argv[2])
def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None
born = start_time(server)
while born is not None and start_time(server) == born:
    if start_time(parent) is None:  # the run is gone (exited, or killed with -9): stop its server
        os.kill(server, signal.SIGTERM)
        for _ in range(50):
            time.sleep(0.1)
            if start_time(server) != born:
                break
        else:
            os.kill(server, signal.SIGKILL)
        break
    time.sleep(0.2)
"""


def start_guarded_prefect_server() -> int | None:
    """Start Prefect's temporary server now (the flow reuses it) and a watchdog that stops it when this process
    dies. Returns the server's pid; None when a real server is configured (PREFECT_API_URL)."""
    if os.environ.get("PREFECT_API_URL"):
        return None
    import subprocess

    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the one instance Prefect's clients use in ephemeral mode: they reuse it
    server.start()
    process = server.server_process
    if process is None:
        return None
    subprocess.Popen(
        [sys.executable, "-c", WATCHDOG, str(os.getpid()), str(process.pid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not killed with our process group: it must outlive us to clean up
    )
    return int(process.pid)
