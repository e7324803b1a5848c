"""`mafiabench build`: build the marts of a warehouse (dbt), run the quality gate, publish what passed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mafiabench.commands import command
from mafiabench.errors import UserError
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE

if TYPE_CHECKING:
    from mafiabench.transform.build.marts import BuildResult


def register(app: typer.Typer) -> None:
    command(
        app,
        "build",
        short_help="build the marts (dbt), run the quality gate, publish what passed",
        help="Build every model of the dbt project (./sql if it holds a dbt_project.yml, else the one shipped "
        "with mafiabench) and the Python marts under staged names, run the dbt data tests and the expectation "
        "suites (Great Expectations' checks, as queries in DuckDB) on them, store the results in "
        "validation_results, and publish the build (rename it over the marts readers query) only if every "
        "expectation passed; otherwise the published marts stay as they were. The models keyed by game are "
        "built for the games landed, replaced or removed since the published build only (and the rest from "
        "them), unless --full-refresh or the project, dbt or the raw schema changed since. Exits 2 with the "
        "failing expectations and sample rows when the gate fails.",
    )(run)


# Publishing is one transaction (`transform.build.marts.publish`): a build stopped before it leaves the published
# marts as they were.
BUILD_HINT = (
    "interrupted: the published marts are as the last finished build left them; run the same command again to build"
)


def run(
    warehouse: Annotated[Path, typer.Option(help="DuckDB file")] = DEFAULT_WAREHOUSE,
    no_validate: Annotated[
        bool, typer.Option("--no-validate", help="build without the gate (the build stays staged as __staged_*, "
                           "unpublished, until the next build)")
    ] = False,
    upset_threshold: Annotated[
        float, typer.Option(help="probability at or under which a game counts as an upset")
    ] = 0.05,
    max_unusable: Annotated[
        float | None,
        typer.Option(help="largest share of games that may be invalid or unscored before the gate refuses the build "
                     "(default: 0.5)", show_default=False),
    ] = None,
    sql_dir: Annotated[
        Path | None, typer.Option(help="dbt project folder (default: ./sql if it has a dbt_project.yml, else the "
                                  "packaged project)", show_default=False)
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="also print each model's layer, rows and seconds")
    ] = False,
    full_refresh: Annotated[
        bool, typer.Option("--full-refresh", help="build every model whole, not only the games landed since the "
                           "published build")
    ] = False,
) -> int:
    from mafiabench.commands import Interrupt
    from mafiabench.publish import build
    from mafiabench.study.progress import CountProgress

    require_games(warehouse)  # before the lock: a mistyped path gets neither a warehouse nor a lock file
    quiet_resource_tracker()
    interrupt = Interrupt(BUILD_HINT)
    try:
        then = "" if no_validate else "then the quality gate"
        with interrupt, CountProgress("build", "models", then=then) as bar:
            try:
                result = build(warehouse, sql_dir=sql_dir, validate=not no_validate, upset_threshold=upset_threshold,
                               max_unusable=max_unusable, progress=bar, full_refresh=full_refresh)
            except Exception:
                if interrupt.interrupted:  # dbt catches the KeyboardInterrupt and reports a failed run
                    raise KeyboardInterrupt from None
                raise
    except KeyboardInterrupt:
        # Out at once (children reaped, scratch folders removed, the hint, exit 130): worker processes and
        # dbt's threads otherwise leave multiprocessing finalizers printing tracebacks during the interpreter's exit.
        interrupt.exit_now()
        return 130
    if verbose:
        for m in result.models:
            rows = "" if m.rows is None else f"{m.rows:>10} rows"
            print(f"  {m.layer:<12} {m.name:<32} {m.materialized:<5} {rows} {m.seconds:7.3f}s", file=sys.stderr)
        print(result.summary())
    else:
        print(one_line(result))
    return 0


def one_line(result: BuildResult) -> str:
    """The build's summary in one line: its models and time, the slowest three models, the gate's verdict."""
    slowest = sorted(result.models, key=lambda m: m.seconds, reverse=True)[:3]
    build, gate = result.summary().splitlines()
    if slowest:
        build += " (slowest: " + ", ".join(f"{m.name} {m.seconds:.1f}s" for m in slowest) + ")"
    return f"{build}; {gate}"


def quiet_resource_tracker() -> None:
    """multiprocessing's resource tracker (a process the gate's workers start) warns on the terminal that it is
    cleaning up "leaked semaphore objects" when a Ctrl-C ends the build before its workers close them; it cleans them
    all the same. It reads its warning filters from the environment it starts with."""
    import os

    quiet = "ignore:resource_tracker:UserWarning"
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), quiet]))


def require_games(warehouse: Path) -> None:
    """Refuse, in one line naming the file, a warehouse there is nothing to build from: a missing file (a mistyped
    path once got a new empty warehouse and lock file) or one without games (it built for half a minute, then the
    gate refused it). Reads only; creates nothing."""
    import duckdb

    from mafiabench.warehouse.landing import connect_reader

    hint = "land games with `mafiabench run` or `mafiabench import` first, or name another file with --warehouse"
    if not Path(warehouse).is_file():
        raise UserError(f"nothing to build: warehouse {warehouse} does not exist ({hint})")
    try:
        con = connect_reader(Path(warehouse))
    except duckdb.Error as exc:
        raise UserError(f"nothing to build: {warehouse} is not a DuckDB warehouse ({exc})") from exc
    try:
        try:
            games = con.execute("select count(*) from raw_games").fetchall()[0][0]
        except duckdb.CatalogException:
            games = 0  # a DuckDB file no run or import has landed in
    finally:
        con.close()
    if not games:
        raise UserError(f"nothing to build: warehouse {warehouse} holds no games ({hint})")
