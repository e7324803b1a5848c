"""`mafiabench serve EXPERIMENT --cron ...`: run the study flow on a schedule (Prefect's `serve`), so new games are
played and, with `--publish`, the marts rebuilt and the dashboards refreshed without anyone typing `run`.

Schedules need a real Prefect server (the temporary one `run` uses cannot schedule). With PREFECT_API_URL set, that
server is used; otherwise this command starts `prefect server start` on a free local port for as long as it serves,
watched so it never outlives the command (even after kill -9). Ctrl-C or SIGTERM stops serving cleanly: the runner
shuts down, the server it started is stopped, exit code 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from mafiabench.commands import command
from mafiabench.errors import UserError


def register(app: typer.Typer) -> None:
    command(
        app,
        "serve",
        short_help="run an experiment on a schedule (cron or interval) through Prefect, until stopped",
        help="Serve the study flow with a schedule: every scheduled run plays the experiment's missing games "
        "(as `mafiabench run` does) and, with --publish, rebuilds the marts behind the quality gate and renders "
        "the dashboards. The cron is read in --timezone (default UTC). Uses the Prefect server at PREFECT_API_URL, "
        "or starts one for as long as it serves. Stops on Ctrl-C or SIGTERM.",
    )(main)


def main(
    experiment: Annotated[Path, typer.Argument(help="experiment file (TOML), e.g. experiments/demo.toml")],
    cron: Annotated[str, typer.Option(help="cron schedule, read in --timezone")] = "0 3 * * *",
    interval: Annotated[
        float | None, typer.Option(help="seconds between runs, instead of --cron", show_default=False)
    ] = None,
    timezone: Annotated[str, typer.Option(help="IANA time zone of the schedule, e.g. Europe/Berlin")] = "UTC",
    publish: Annotated[
        bool, typer.Option("--publish", help="after each run, rebuild the marts and render the dashboards")
    ] = False,
    warehouse: Annotated[
        Path | None, typer.Option(help="DuckDB file (default: the experiment's `warehouse`)", show_default=False)
    ] = None,
    dashboards: Annotated[
        Path | None,
        typer.Option(help="dashboards folder (with --publish; default: the warehouse's own)", show_default=False),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="deployment name (default: the experiment's name)", show_default=False)
    ] = None,
) -> int:
    from mafiabench.play.runner import BackendPool
    from mafiabench.redact import install_log_scrubber
    from mafiabench.study.spec import load_experiment

    exp = load_experiment(experiment)  # a bad file is named now, not at 03:00
    BackendPool(endpoints=exp.endpoint_configs()).check(exp.agent_specs())
    if interval is not None and interval <= 0:
        raise UserError(f"--interval must be > 0 seconds, got {interval:g}")
    schedule, when = _schedule(cron, interval, timezone)
    # Scheduled runs execute in the runner's subprocesses, from their working folder: make the paths absolute.
    params: dict[str, Any] = {
        "experiment_path": str(experiment.resolve()),
        "warehouse": str(exp.warehouse_path(warehouse).resolve()),
        "progress": False,
        "publish": publish,
        "dashboards": str((dashboards or _dashboards_for(exp.warehouse_path(warehouse))).resolve()),
    }
    install_log_scrubber()
    from mafiabench.commands.run import PREFECT_DEFAULTS

    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    deployment = name or exp.name
    with _prefect_server() as api_url:
        from prefect.runner import Runner
        from prefect.settings import PREFECT_API_URL, temporary_settings

        from mafiabench.flows.study import study_flow

        with temporary_settings(updates={PREFECT_API_URL: api_url}):  # prefect read its settings at import
            # One run at a time: each holds the warehouse lock, so an overlapping run could only fail.
            runner = Runner(name=deployment, pause_on_shutdown=True, limit=1)
            runner.add_flow(study_flow, name=deployment, parameters=params, schedule=schedule)
            print(f"serving {exp.name!r} as deployment 'mafiabench-study/{deployment}' on {api_url}")
            print(f"  schedule: {when}")
            print(f"  each run: play missing games into {params['warehouse']}"
                  + (f", then build and render {params['dashboards']}" if publish else ""))
            print("  Ctrl-C or SIGTERM stops serving", flush=True)
            with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
                asyncio.run(_serve_until_signalled(runner))
    print("stopped serving", file=sys.stderr)
    return 0


async def _serve_until_signalled(runner: Any) -> None:
    """Run the runner until Ctrl-C or SIGTERM, either of which cancels it: it then pauses its schedule and cancels
    what it started. (Signals, not KeyboardInterrupt: a background job's SIGINT may be ignored.)"""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(*_: Any) -> None:
        loop.call_soon_threadsafe(task.cancel)

    runner.handle_sigterm = stop  # Prefect's own calls a coroutine it never awaits and exits inside the loop
    signal.signal(signal.SIGINT, stop)
    await runner.start()


def _schedule(cron: str, interval: float | None, timezone: str) -> tuple[Any, str]:
    """The Prefect schedule and a sentence saying when it fires (time zone and next run), or a UserError."""
    from prefect.schedules import Cron, Interval
    from prefect.server.schemas.schedules import CronSchedule, IntervalSchedule
    from pydantic import ValidationError

    try:
        if interval is not None:
            check: Any = IntervalSchedule(interval=datetime.timedelta(seconds=interval), timezone=timezone)
            schedule, what = Interval(interval, timezone=timezone), f"every {interval:g} s"
        else:
            check = CronSchedule(cron=cron, timezone=timezone)
            schedule, what = Cron(cron, timezone=timezone), f"cron {cron!r}"
    except ValidationError as exc:
        field = "--interval" if interval is not None else "--cron"
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        if "timezone" in message:
            field = "--timezone"
        raise UserError(f"{field}: {message}") from None
    (first,) = asyncio.run(check.get_dates(n=1))
    return schedule, f"{what} in time zone {timezone} (next run {first:%Y-%m-%d %H:%M:%S %Z})"


# Stops the server `serve` started when `serve` dies, even by kill -9 (argv: serve's pid, the server's pid).
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


def _dashboards_for(warehouse: Path) -> Path:
    from mafiabench.publish import dashboards_for

    return dashboards_for(warehouse)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _prefect_server() -> Iterator[str]:
    """The Prefect API to serve on: PREFECT_API_URL's, or a `prefect server start` of our own (stopped on exit, and
    by a watchdog if this process dies without exiting)."""
    configured = os.environ.get("PREFECT_API_URL")
    if configured:
        yield configured
        return
    port = _free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect")).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / f"mafiabench-serve-server-{port}.log"
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal reaches us, and we stop it in order
        )
    subprocess.Popen(
        [sys.executable, "-c", WATCHDOG, str(os.getpid()), str(server.pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        _wait_healthy(server, api_url, log_path)
        os.environ["PREFECT_API_URL"] = api_url
        print(f"started a Prefect server on {api_url.removesuffix('/api')} (log: {log_path})", flush=True)
        yield api_url
    finally:
        os.environ.pop("PREFECT_API_URL", None)
        _stop(server)


def _wait_healthy(server: subprocess.Popen[bytes], api_url: str, log_path: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise UserError(f"the Prefect server exited at start (code {server.returncode}); see {log_path}")
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                _stop(server)
                raise UserError(f"the Prefect server did not answer in {timeout_s:g} s; see {log_path}") from None
            time.sleep(0.5)


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, SIGKILL whatever is left after 15 s."""
    if server.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGKILL)
    server.wait(timeout=10)
