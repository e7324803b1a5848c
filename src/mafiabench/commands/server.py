"""`mafiabench server status|stop`: the local Prefect server the runs share (`mafiabench.prefect_server`), shown
and stopped by hand. It stops itself once idle; this is for a user who wants it gone now, or wonders what it is."""

from __future__ import annotations

from typing import Annotated

import typer

from mafiabench.commands import command
from mafiabench.errors import UserError

WHAT = (
    "`mafiabench run` and `detect` share one local Prefect server per Prefect home and Python environment: Prefect's "
    "API under uvicorn on 127.0.0.1, kept by a small detached process; it stops itself once no run has used it for "
    "MAFIABENCH_PREFECT_IDLE_S seconds (default 600), and with its keeper whatever ends it."
)


def register(app: typer.Typer) -> None:
    group = typer.Typer(no_args_is_help=True, rich_markup_mode=None)
    app.add_typer(
        group,
        name="server",
        short_help="show or stop the local Prefect server the runs share",
        help=WHAT + " `status` shows it, `stop` stops it now.",
    )
    command(group, "status", short_help="show the running server(s) of this Prefect home",
            help="Show the Prefect home, each running server (its address, processes and Python environment) and "
            "whether a run is using it.")(status)
    command(group, "stop", short_help="stop this Prefect home's server now",
            help="Stop the server of this Prefect home and Python environment now (--all: every environment's). "
            "A server a run is using is refused unless --force (that run would fail).")(stop)


def status() -> int:
    from mafiabench.prefect_server import idle_seconds, in_use, prefect_home, running_servers, server_dir

    home, mine = prefect_home(), server_dir()
    print(f"Prefect home: {home} (PREFECT_HOME); servers' folders: {mine.parent}")
    found = running_servers(home)
    if not found:
        print("no server running (the next `mafiabench run` starts one)")
    for folder, state in found:
        whose = "this Python environment" if folder == mine else f"another Python environment ({state.python})"
        use = "in use by a run" if in_use(folder) else f"idle: stops {idle_seconds():g} s after the last run"
        print(f"{state.api_url}  keeper pid {state.keeper_pid}, uvicorn pid {state.server_pid}; {whose}; {use}")
    return 0


def stop(
    all_: Annotated[bool, typer.Option("--all", help="every Python environment's server of this home")] = False,
    force: Annotated[bool, typer.Option("--force", help="stop it even while a run uses it")] = False,
) -> int:
    from mafiabench.prefect_server import in_use, prefect_home, running_servers, server_dir, stop_server

    home, mine = prefect_home(), server_dir()
    chosen = [(folder, state) for folder, state in running_servers(home) if all_ or folder == mine]
    if not chosen:
        print(f"no server running for {home}" + ("" if all_ else " and this Python environment"))
        return 0
    busy = [state.api_url for folder, state in chosen if in_use(folder)]
    if busy and not force:
        raise UserError(f"the Prefect server at {', '.join(busy)} is in use by a run (stopping it fails the run): "
                        "wait for the run to end, or give --force")
    n = stop_server(home, every_environment=all_)
    print(f"stopped {n} Prefect server{'s' if n != 1 else ''} of {home}")
    return 0
