"""The pipeline's last steps after landing: build (staged), the quality gate, publish; then render the dashboards.

Shared by the study flow and `mafiabench build` / `mafiabench run --publish`, so all end the same way. The build
never imports the gate: this module calls both. Models are staged (`transform.build.marts.stage`), the dbt data tests
and the expectation suites (queries in DuckDB) validate the staged build, and only a build that passed is published
(renamed over the marts readers query, in one transaction); a refused build is discarded and the previously published
marts stay as they were. A failed gate raises `QualityGateError` naming the expectation and failing rows; the
dashboards are then left as they were (render refuses unless the latest build passed).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from mafiabench.errors import UserError
from mafiabench.quality import delta
from mafiabench.quality import gate as quality
from mafiabench.transform.build import increment
from mafiabench.transform.build.catalogue import model_docs
from mafiabench.transform.build.dbt_runner import resolve_project
from mafiabench.transform.build.marts import (
    BuildProgress,
    BuildResult,
    Staged,
    add_staged_views,
    data_tests,
    deferred_checkpoints,
    discard,
    python_outputs,
    stage,
    stage_python,
)
from mafiabench.transform.build.marts import publish as publish_staged
from mafiabench.warehouse.builds import DBT_SUITE, checked_nothing, ensure_build_tables
from mafiabench.warehouse.landing import warehouse_lock
from mafiabench.warehouse.raw import connect, deleted_rows

if TYPE_CHECKING:
    from mafiabench.dashboards.render import RenderResult

DEFAULT_DASHBOARDS = Path("dashboards")


def dashboards_for(warehouse: Path | str) -> Path:
    """A warehouse's own pages folder, in the current folder: `dashboards/` for the default warehouse file name
    (`mafiabench.duckdb`), `dashboards-<name>/` for a warehouse `<name>.duckdb`; so experiments with their own
    warehouses never share pages by default (and a render refuses a folder holding another warehouse's pages)."""
    name = Path(warehouse).stem
    return DEFAULT_DASHBOARDS if Path(warehouse).name == "mafiabench.duckdb" else Path(f"dashboards-{name}")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _new_build_id() -> str:
    return _now().strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


def _rule(sql: str | None, description: str, name: str) -> str:
    """A singular test states its rule in a `-- rule:` comment; a generic one in its YAML description, or its name."""
    for line in (sql or "").splitlines():
        if line.startswith("-- rule:"):
            return line.split(":", 1)[1].strip()
    return description or name


def dbt_test_results(con: duckdb.DuckDBPyConnection, staged: Staged) -> list[quality.ExpectationResult]:
    """The dbt data tests of the staged build as gate results (suite `dbt_tests`), with failing rows."""
    out = []
    for r, rows in data_tests(con, staged):
        n = int(r.failures or 0) if r.status in ("pass", "fail", "warn") else 1
        out.append(
            quality.ExpectationResult(
                suite=DBT_SUITE,
                expectation=r.name,
                rule=_rule(r.compiled_sql, r.description, r.name) if r.status != "error" else f"{r.name}: {r.message}",
                kwargs={"file": f"{staged.project.name}/{r.path}"},
                success=r.status == "pass",
                element_count=n,
                unexpected_count=n,
                failing_rows=quality.json_safe_rows(rows),
            )
        )
    return out


# Suites run side by side, each thread on its own cursor: DuckDB runs their queries on the cores while the other
# waits on it (a suite's small queries, a hash table's single-threaded finish); more threads than cores gain nothing.
SUITE_THREADS = 2


class _StagedCursors:
    """A cursor per thread that reads the staged build (`marts.staged_views`), given the tables of the Python models
    staged since its last suite before each suite; closed together at the end."""

    def __init__(self, con: duckdb.DuckDBPyConnection, staged: Staged) -> None:
        self.con, self.staged = con, staged
        self.local = threading.local()
        self.lock = threading.Lock()
        self.opened: list[duckdb.DuckDBPyConnection] = []

    def get(self) -> duckdb.DuckDBPyConnection:
        if not hasattr(self.local, "cursor"):
            self.local.cursor, self.local.seen = self.con.cursor(), set()
            with self.lock:
                self.opened.append(self.local.cursor)
        add_staged_views(self.local.cursor, self.staged, self.local.seen)
        return self.local.cursor  # type: ignore[no-any-return]

    def close(self) -> None:
        for cursor in self.opened:
            cursor.close()


def _first(suites: Sequence[quality.Suite], reads: dict[str, set[str]], staged: Staged) -> list[str]:
    """The Python models' tables the suites read, in the order the gate wants them: first those of suites that also
    read the build's SQL models (mart_ratings_complete joins every player: it has work left once its mart is
    staged), then the others."""
    def joins(suite: quality.Suite) -> bool:
        return any(re.search(rf"\b{re.escape(name)}\b", suite.query) for name in staged.relations)

    ordered = sorted((s for s in suites if reads[s.name]), key=lambda s: not joins(s))
    return list(dict.fromkeys(t for s in ordered for t in sorted(reads[s.name])))


def _increment_gate(con: duckdb.DuckDBPyConnection, staged: Staged) -> delta.IncrementGate | None:
    """What proves the suites over the raw tables from the increment's rows (`quality.delta`), when the build is
    incremental and the published build's gate vouched for the raw tables; else None."""
    inc = staged.increment
    if inc is None or staged.sources is None:
        return None
    published = delta.published_gate(con)
    if published is None:
        return None
    tails = {str(t): (int(first), int(n)) for t, first, n in con.execute(
        f"select source, first_row, n_rows from main.{increment.INCREMENT_TAILS}").fetchall()}
    return delta.IncrementGate(published, increment.INCREMENT_GAMES, increment.unchanged_sources(con, staged.sources),
                               tails, replaces=inc.replaces, deleted=deleted_rows(con) if inc.replaces else {})


class _RawSuites:
    """The gate's suites that read the raw tables alone, started as soon as the stage knows its build is whole, on a
    cursor of their own: they then run while dbt is imported beside (a core left idle: about 1.5 s of a whole build),
    not in the gate, where the Python models and dbt's tests want both cores. An incremental build proves them from
    the increment's rows in its gate instead (`_increment_gate`), so it starts none."""

    def __init__(self, con: duckdb.DuckDBPyConnection, pool: ThreadPoolExecutor, project: Path | None,
                 max_unusable: float | None) -> None:
        self.con, self.pool, self.project, self.max_unusable = con, pool, project, max_unusable
        self.started: dict[str, Future[list[quality.ExpectationResult]]] = {}

    def __call__(self, whole: bool) -> None:
        if not whole:
            return
        docs = model_docs(resolve_project(self.project))
        built = {name for name, doc in docs.items() if doc["layer"] != "sources"}  # what the build stages
        for suite in quality.gate_suites(docs, _max_unusable(self.max_unusable)):
            if not any(re.search(rf"\b{re.escape(name)}\b", suite.query) for name in built):
                self.started[suite.name] = self.pool.submit(self._run, suite)

    def _run(self, suite: quality.Suite) -> list[quality.ExpectationResult]:
        cursor = self.con.cursor()
        try:
            return quality.run_suites(cursor, suites=[suite])
        finally:
            cursor.close()


@contextmanager
def _cancelled_on_error(pool: ThreadPoolExecutor) -> Iterator[ThreadPoolExecutor]:
    """`pool`, shut down on leaving; on an error or Ctrl-C without running what it has not started (a pool's own
    `with` runs every queued task first: the raw suites, seconds at a million games, before the build can stop)."""
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _max_unusable(max_unusable: float | None) -> float:
    return quality.DEFAULT_MAX_UNUSABLE if max_unusable is None else max_unusable


def _gate(
    con: duckdb.DuckDBPyConnection,
    staged: Staged,
    max_unusable: float | None,
    early: dict[str, Future[list[quality.ExpectationResult]]] | None = None,
) -> tuple[list[quality.ExpectationResult], list[str]]:
    """Run the staged build's Python models and its gate side by side: the Python models (mostly single-threaded
    numpy) and the dbt data tests (dbt's Python) each on a thread, the suites on `SUITE_THREADS` more, each suite as
    soon as what it reads is staged: at once for most, after the Python model whose table it reads for the others
    (those models run first, so their suites run while the other models fit). The results come in the
    order of a sequential gate (1M games: BENCHMARKS.md), with the suites proven from an increment's rows rather
    than run whole (`_increment_gate`). The suites are those the staged project's YAML declares (`meta.gx` beside
    each model); those `early` holds were started before (`_RawSuites`)."""
    suites = quality.gate_suites(model_docs(staged.project), _max_unusable(max_unusable))
    proving = _increment_gate(con, staged)
    later = python_outputs(staged)
    reads = {s.name: {t for t in later if re.search(rf"\b{re.escape(t)}\b", s.query)} for s in suites}
    written: set[str] = set()
    started: dict[str, Future[list[quality.ExpectationResult]]] = dict(early or {})
    lock = threading.Lock()
    cursors = _StagedCursors(con, staged)
    try:
        with ThreadPoolExecutor(SUITE_THREADS, thread_name_prefix="gate-suites") as pool, \
                ThreadPoolExecutor(2, thread_name_prefix="build-gate") as beside:

            def run(suite: quality.Suite) -> list[quality.ExpectationResult]:
                cursor = cursors.get()
                if proving is not None and (proven := proving.run(cursor, suite)) is not None:
                    return proven
                return quality.run_suites(cursor, suites=[suite])

            def start_ready(tables: tuple[str, ...] = ()) -> None:
                with lock:
                    written.update(tables)
                    for s in suites:
                        if s.name not in started and reads[s.name] <= written:
                            started[s.name] = pool.submit(run, s)

            start_ready()
            python = beside.submit(stage_python, con, staged, start_ready, _first(suites, reads, staged))
            dbt_tests = beside.submit(dbt_test_results, con, staged)
            python.result()
            results = [r for s in suites for r in started[s.name].result()]
            proven = set(proving.proven) if proving is not None else set()
            return dbt_tests.result() + results, [s.name for s in suites if s.name in proven]
    finally:
        cursors.close()


def build_warehouse(
    con: duckdb.DuckDBPyConnection,
    *,
    sql_dir: Path | None = None,
    validate: bool = True,
    raise_on_failure: bool = True,
    upset_threshold: float = 0.05,
    max_unusable: float | None = None,
    progress: BuildProgress | None = None,
    full_refresh: bool = False,
) -> BuildResult:
    """Stage every model, run the quality gate on the staged build, store its results, and publish the build only
    if it passed (a refused build is discarded; without `validate` it stays staged, unpublished). `progress` hears of
    each model as it is built. The models keyed by game are built for the games landed since the published build
    when they can be (`transform.build.increment`), whole with `full_refresh`.

    Raises `quality.QualityGateError` (after storing the results) when an expectation fails and
    `raise_on_failure` is set; the error names each failing expectation and shows failing rows.
    """
    t0 = time.perf_counter()
    result = BuildResult(build_id=_new_build_id(), started_at=_now())
    ensure_build_tables(con)
    # What an earlier build left staged: one stopped part-way (an error, Ctrl-C: `exit_now` exits at once, kill -9)
    # or an unvalidated one, kept for inspection until this build. Its deltas must not mix with this build's.
    discard(con)
    try:
        with _cancelled_on_error(ThreadPoolExecutor(1, thread_name_prefix="raw-suites")) as early:
            raw_suites = _RawSuites(con, early, sql_dir, max_unusable) if validate else None
            staged = stage(con, sql_dir=sql_dir, upset_threshold=upset_threshold, python=not validate,
                           progress=progress, full_refresh=full_refresh, planned=raw_suites)
            result.models = staged.models
            result.replayed = staged.replaying.replayed
            if validate:
                assert raw_suites is not None
                t1 = time.perf_counter()
                with deferred_checkpoints(con) if staged.increment is not None else nullcontext():
                    result.validation, result.proven_suites = _gate(con, staged, max_unusable, raw_suites.started)
                    result.validation_seconds = time.perf_counter() - t1
                    result.validated = True
                    result.passed = all(r.success for r in result.validation)
                    result.checked_nothing = sum(checked_nothing(r.suite, r.expectation, r.success, r.element_count)
                                                 for r in result.validation)
                    quality.store_results(con, result.build_id, result.validation)
    except BaseException:
        with suppress(Exception):  # a build that stops part-way leaves nothing staged; its own error is the one raised
            discard(con)
        raise
    result.published = result.validated and result.passed
    if result.published:
        publish_staged(con, staged, gated=(result.build_id, delta.gate_digest()))
    elif result.validated:
        discard(con, staged)
    result.finished_at = _now()
    result.seconds = time.perf_counter() - t0
    message = quality.failure_message(result.build_id, result.validation) if result.failures else None
    stats = con.execute("select count(*), max(landed_at) from raw_games").fetchall()[0]
    con.execute(
        "insert into build_runs values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            result.build_id,
            result.started_at,
            result.finished_at,
            "passed" if result.published else ("failed" if result.validated else "unvalidated"),
            result.published,
            len(result.models),
            len(result.validation),
            len(result.failures),
            stats[0],
            stats[1],
            message,
        ],
    )
    if message and raise_on_failure:
        raise quality.QualityGateError(message, result=result)
    return result


_bar: Callable[[], AbstractContextManager[BuildProgress]] | None = None


@contextmanager
def showing_progress(bar: Callable[[], AbstractContextManager[BuildProgress]]) -> Iterator[None]:
    """Within the block, a build given no `progress` of its own shows `bar()` while it runs: `run --publish` builds
    inside the study flow (a Prefect task takes no bar as a parameter), after the games' bar has closed."""
    global _bar
    previous, _bar = _bar, bar
    try:
        yield
    finally:
        _bar = previous


def build(warehouse: Path, **options: Any) -> BuildResult:
    """Build, gate and publish (options: those of `build_warehouse`), holding the warehouse lock so no run lands
    meanwhile; a published whole build then starts the rehearsal of its first increment (`rehearsal.after_build`)."""
    with warehouse_lock(warehouse, what="build"):
        con = connect(warehouse)
        try:
            if _bar is None or options.get("progress") is not None:
                result = build_warehouse(con, **options)
            else:
                with _bar() as progress:
                    result = build_warehouse(con, **{**options, "progress": progress})
            if result.published:  # a whole build's first increment, rehearsed after it (`rehearsal.after_build`)
                from mafiabench.transform.build import rehearsal

                rehearsal.after_build(con)
            return result
        finally:
            con.close()


def render(warehouse: Path, out_dir: Path | None = None, **options: Any) -> RenderResult:
    """Render the dashboards from the latest passing build into `out_dir` (default: `dashboards_for(warehouse)`;
    read-only; options: those of `render_dashboards`, `force` among them)."""
    # Imported here: Altair and the pages cost a build that renders nothing a third of a second.
    from mafiabench.dashboards import render_dashboards

    if not Path(warehouse).is_file():
        raise UserError(f"warehouse {warehouse} not found: run an experiment and `mafiabench build` first")
    con = connect(warehouse, read_only=True)
    try:
        return render_dashboards(con, dashboards_for(warehouse) if out_dir is None else out_dir, **options)
    finally:
        con.close()
