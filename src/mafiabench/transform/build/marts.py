"""Build the marts: the dbt project's models (staging views, intermediate and mart tables), then the Python models.

The SQL models are a dbt project (`transform/sql/`, shipped as package data; `./sql/dbt_project.yml` in the working
folder wins) run in-process with dbt-duckdb (`transform.build.dbt_runner`): lineage comes from `ref()`/`source()`, each
layer's YAML describes every model and column, and its data tests return the rows that break a rule.

A build is *staged*: every model is written under `__staged_<name>` in the warehouse, the Python models read those
and write theirs beside them, and nothing a reader queries changes. `publish` then renames the staged relations over
the published ones in one transaction; `discard` drops them. The pipeline (`mafiabench.publish`) runs the quality
gate between the two, so readers only ever see marts that passed. `build_models` stages and publishes without a gate
(tests, benchmarks).

A build is *incremental* when it can be (`transform.build.increment`): the models keyed by game are computed for the
games landed, replaced or removed since the published build, their staged relations are views over the published
table and that delta, and `publish` applies each delta to its published table in the same transaction as the renames;
everything else is rebuilt from them, but the SQL models whose inputs did not change: those are *kept* (their
published relations stay and are read in their place; `increment.kept_models`). `full_refresh` builds every model
whole.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Container, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb
import polars as pl

from mafiabench.errors import UserError
from mafiabench.prices import PriceTable
from mafiabench.prices import load_prices as load_price_table
from mafiabench.transform import LAYERS as LAYERS  # the layers, re-exported (their home is the package)
from mafiabench.transform.build import dbt_runner, increment, replay
from mafiabench.transform.build.dbt_runner import STAGED_PREFIX, DbtError, NodeResult, resolve_project
from mafiabench.warehouse import builds
from mafiabench.warehouse.builds import BUILD_RUNS_SCHEMA, gate_passed, latest_build
from mafiabench.warehouse.raw import ensure_schema

if TYPE_CHECKING:  # imported in `stage` only: numpy and scipy cost every command that imports this module
    from mafiabench.transform.models import PythonModel



def default_sql_dir() -> Path:
    """The dbt project a build uses (see `dbt_runner.resolve_project`)."""
    return resolve_project()


class BuildError(UserError):
    """A model failed to build; the message names the model and its file."""


@dataclass
class ModelRun:
    name: str
    layer: str
    kind: str
    materialized: str
    seconds: float
    rows: int | None


class BuildProgress(Protocol):
    """Who hears of a build's models as they are built (the build command's bar): `expect` says how many models a
    part of the build ("sql", "python") has, more than once alike; `done` names each model once it is built."""

    def expect(self, part: str, models: int) -> None: ...

    def done(self, name: str) -> None: ...


@dataclass
class Staged:
    """A staged build: what was built, and for each published name its staged relation and kind."""

    project: Path
    models: list[ModelRun] = field(default_factory=list)
    relations: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (staged name, "view" | "table")
    python_steps: list[PythonModel] = field(default_factory=list)  # not yet run: `stage(..., python=False)`
    progress: BuildProgress | None = None
    increment: increment.Increment | None = None  # an incremental build's increment; None: built whole
    state_key: str | None = None  # what publishing records as the published build's (None: a partial build)
    sources: dict[str, str] | None = None  # the fingerprints of the sources not keyed by game (`increment`)
    rows: dict[str, int] | None = None  # the rows of the tables keyed by game, as the build read them (`increment`)
    kept: set[str] = field(default_factory=set)  # the SQL models kept: their published relations are read
    replaying: replay.Session = field(default_factory=lambda: replay.Session(replay.Stored(), None, False))  # `replay`


@dataclass
class BuildResult:
    build_id: str
    started_at: datetime
    finished_at: datetime | None = None
    models: list[ModelRun] = field(default_factory=list)
    validation: list[Any] = field(default_factory=list)  # quality.ExpectationResult
    validated: bool = False
    passed: bool = False
    published: bool = False
    seconds: float = 0.0
    validation_seconds: float = 0.0
    replayed: list[str] = field(default_factory=list)  # the dbt commands replayed, not run (`replay`)
    proven_suites: list[str] = field(default_factory=list)  # the gate's suites proven from an increment's rows
    checked_nothing: int = 0  # expectations that passed over no rows (`warehouse.builds.checked_nothing`)

    @property
    def failures(self) -> list[Any]:
        return [r for r in self.validation if not r.success]

    def summary(self) -> str:
        n_tables = sum(1 for m in self.models if m.materialized in ("table", "incremental", "summed"))
        n_kept = sum(1 for m in self.models if m.materialized == "kept")
        kept = f", {n_kept} kept" if n_kept else ""
        # Said on the build's own line: statements replayed from the published build's record, not rendered by dbt.
        replayed = f"; dbt {' and '.join(self.replayed)} replayed" if self.replayed else ""
        lines = [
            f"build {self.build_id}: {len(self.models)} models ({n_tables} tables{kept}{replayed}) in "
            f"{self.seconds:.2f}s",
        ]
        if self.validated:
            nothing = f" ({self.checked_nothing} with no rows to check)" if self.checked_nothing else ""
            lines.append(
                f"quality gate: {len(self.validation) - len(self.failures)}/{len(self.validation)} expectations "
                f"passed{nothing} in {self.validation_seconds:.2f}s -> "
                f"{'PUBLISHED' if self.published else 'NOT PUBLISHED'}"
            )
        else:
            lines.append("quality gate: skipped -> NOT PUBLISHED (the build stays staged as __staged_*)")
        return "\n".join(lines)


def ref_prices(table: PriceTable | None = None) -> pl.DataFrame:
    """The price table (`mafiabench.prices`, its one reader: default the shipped `prices.toml`) as the rows of
    `ref_prices` the cost marts join: provider, model, USD per million input, cached and output tokens, version."""
    table = table or load_price_table()
    rows = [
        {
            "price_version": table.version,
            "provider": p.provider,
            "model": p.model,
            "input_per_mtok": p.input,
            "cached_per_mtok": p.input if p.cached_input is None else p.cached_input,
            "output_per_mtok": p.output,
        }
        for p in table.models.values()
    ]
    schema = {
        "price_version": pl.Utf8,
        "provider": pl.Utf8,
        "model": pl.Utf8,
        "input_per_mtok": pl.Float64,
        "cached_per_mtok": pl.Float64,
        "output_per_mtok": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def write_table(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame,
                views: Container[str] | None = None) -> None:
    """Write a frame as a table, in place of any relation of that name. `views`: the main schema's views, when the
    caller read them once (a look-up per table costs a catalog listing, 2-7 ms); a table is replaced either way.
    A float that is NaN (a statistic with nothing to compute it from: a correlation of one point, a fit not made) is
    written as null, the warehouse's one "unknown": a researcher's `avg()` or `sum()` skips a null where a NaN makes
    it NaN, and `is null` finds it. (The gate already reads NaN as missing, as pandas does: `quality.expectations`.)"""
    frame = frame.with_columns(pl.col(pl.Float32, pl.Float64).fill_nan(None))
    if views is None:
        _drop_relation(con, name)
    elif name in views:
        con.execute(f'drop view main."{name}"')
    con.register("_mb_frame", frame.to_arrow())
    try:
        con.execute(f"create or replace table main.{name} as select * from _mb_frame")
    finally:
        con.unregister("_mb_frame")


def _kind(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    found = con.execute(
        "select 'view' from duckdb_views() where schema_name = 'main' and view_name = ? and not internal "
        "and not temporary union all "
        "select 'table' from duckdb_tables() where schema_name = 'main' and table_name = ? and not temporary",
        [name, name],
    ).fetchall()
    return found[0][0] if found else None


def _drop_relation(con: duckdb.DuckDBPyConnection, name: str) -> None:
    kind = _kind(con, name)
    if kind:
        con.execute(f'drop {kind} main."{name}"')


def _layer(path: str | None) -> str:
    parts = Path(path or "").parts
    return parts[1] if len(parts) > 2 and parts[0] == "models" else "marts"


@contextmanager
def staged_views(con: duckdb.DuckDBPyConnection, staged: Staged) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor on which every model's own name reads its staged relation (temporary views, private to the
    cursor): the Python models and the gate read the build being staged, readers still see the published one."""
    cur = con.cursor()
    try:
        add_staged_views(cur, staged, set())
        yield cur
    finally:
        cur.close()


def add_staged_views(cur: duckdb.DuckDBPyConnection, staged: Staged, seen: set[str]) -> None:
    """Give a `staged_views` cursor the relations staged since: those not in `seen` (the names it has; updated).
    Safe while a Python model stages its tables on another thread (the relations are copied first)."""
    for name, (relation, _) in list(staged.relations.items()):
        if name not in seen:
            cur.execute(f'create or replace temp view "{name}" as select * from main."{relation}"')
            seen.add(name)


# While dbt builds the models: no checkpoint at each model's commit (DuckDB's default starts one whenever the
# write-ahead log passes 16 MiB, which every large table does); the log is folded into the file once, at the next
# checkpoint after the build. A million games' build: 1-2.5 s of about 50 s less, the same peak memory (BENCHMARKS.md).
# Committed models stay durable either way: the log is replayed if the process dies.
BUILD_CHECKPOINT_THRESHOLD = "8GB"


@contextmanager
def deferred_checkpoints(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """`BUILD_CHECKPOINT_THRESHOLD` while an incremental build's Python models and gate run, restored after: the
    checkpoint then comes once, at the publish transaction's commit, and writes what is published, not the deltas
    that transaction drops (DuckDB's default starts one at the Python models' first write, writing the dbt run's
    log, deltas and all: a million games' replayed increment paid 0.5-1.7 s for it in mart_ratings, then the
    publish's own)."""
    (threshold,) = con.execute("select current_setting('checkpoint_threshold')").fetchall()[0]
    con.execute(f"set global checkpoint_threshold = '{BUILD_CHECKPOINT_THRESHOLD}'")
    try:
        yield
    finally:
        con.execute(f"set global checkpoint_threshold = '{threshold}'")


@contextmanager
def checkpointed(con: duckdb.DuckDBPyConnection, *, vacuum: bool) -> Iterator[None]:
    """The commit inside, then a checkpoint, with DuckDB's vacuum on (its default) or off (`max_vacuum_tasks`, a
    global setting, restored after): the publish's checkpoint comes at its commit when the write-ahead log passed its
    threshold and at once after it otherwise, either way with the vacuum the publish chose."""
    (tasks,) = con.execute("select current_setting('max_vacuum_tasks')").fetchall()[0]
    con.execute("reset global max_vacuum_tasks" if vacuum else "set global max_vacuum_tasks = 0")
    try:
        yield
        with suppress(duckdb.Error):  # the commit stands; DuckDB checkpoints later (the next commit, the close)
            con.execute("checkpoint")
    finally:
        con.execute(f"set global max_vacuum_tasks = {int(tasks)}")


@contextmanager
def _build_settings(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB settings for the models' build, restored after: rows in no particular order (a mart's row order carries
    no meaning, and DuckDB then writes tables in parallel, which halves some builds), and `BUILD_CHECKPOINT_THRESHOLD`
    (a global setting, so that dbt's own connection to the same database has it)."""
    preserve, threshold, disabled = con.execute(
        "select current_setting('preserve_insertion_order'), current_setting('checkpoint_threshold'), "
        "current_setting('disabled_optimizers')"
    ).fetchall()[0]
    con.execute("set preserve_insertion_order = false")
    con.execute(f"set global checkpoint_threshold = '{BUILD_CHECKPOINT_THRESHOLD}'")
    try:
        yield
    finally:
        con.execute(f"set preserve_insertion_order = {bool(preserve)}")
        con.execute(f"set global checkpoint_threshold = '{threshold}'")
        # A model may switch an optimizer off for its own query (int_decisions' hooks; a global setting): should it
        # fail between its hooks, the rest of the process plans with the optimizer all the same.
        con.execute("set global disabled_optimizers = ?", [disabled])


def stage(
    con: duckdb.DuckDBPyConnection,
    *,
    sql_dir: Path | None = None,
    upset_threshold: float = 0.05,
    only: Iterable[str] | None = None,
    python: bool = True,
    progress: BuildProgress | None = None,
    full_refresh: bool = False,
    planned: Callable[[bool], None] | None = None,
    sql_only: bool = False,
) -> Staged:
    """Run the dbt models, then the Python models, all under staged names; nothing published changes. With
    `python=False` the Python models are left to `stage_python` (the gate can start on the rest meanwhile);
    `sql_only`: none of them, not even imported (a rehearsal: `rehearsal`).
    `progress` hears of each model as it is built. Incremental when it can be (module docstring) unless
    `full_refresh`. `planned(whole)` hears whether the build is whole once that is known, before dbt starts (while
    dbt's import may still run beside)."""
    from mafiabench.transform.models import PYTHON_MODELS, import_beside
    from mafiabench.warehouse.landing import ensure_runs_table

    try:
        project = resolve_project(sql_dir)
    except DbtError as exc:
        raise BuildError(str(exc)) from exc
    ensure_schema(con)
    ensure_runs_table(con)
    wanted = set(only) if only is not None else None
    steps = [s for s in PYTHON_MODELS if not sql_only and (wanted is None or wanted & {s.name, *s.outputs})]
    if steps:
        import_beside()  # the Python models' imports, while dbt or its replay works
    select = None
    if wanted is not None:
        python_names = {n for s in PYTHON_MODELS for n in (s.name, *s.outputs)}
        select = [f"+{n}" for n in sorted(wanted - python_names)] + [f"+{d}" for s in steps for d in s.depends_on]
    variables = {"upset_threshold": float(upset_threshold)}
    staged = Staged(project=project, progress=progress)
    state_key = increment.state_key(project, variables) if select is None else None
    if state_key is not None:
        staged.state_key = state_key
        staged.replaying = replay.Session(replay.load(con) if not full_refresh else replay.Stored(), state_key,
                                          allowed=not full_refresh)
    graph = staged.replaying.graph()  # the published build's record of the project's graph: no manifest to load
    with ThreadPoolExecutor(1, thread_name_prefix="dbt-parse") as beside:
        # dbt's import and the project's manifest (cached: about a second) on a thread, while DuckDB works on this one
        parsing = beside.submit(dbt_runner.manifest, project, dbt_runner.warehouse_file(con)) if graph is None \
            else beside.submit(lambda: graph)
        write_table(con, "ref_prices", ref_prices())
        parsed: Any = None
        try:
            landed: set[str] = set()
            scanning = None
            if state_key is not None:
                staged.sources = increment.fingerprints(con)
                staged.rows = increment.grain_rows(con)
                scanning = beside.submit(lambda: _volatile(parsing.result()))
                if not full_refresh:

                    def parsed_once_checked() -> Any:  # plan asks once its increment is written
                        landed.update(increment.increment_rows(con))  # while the parse may still run
                        return parsing.result()

                    staged.increment = increment.plan(con, state_key, parsed_once_checked)
            if planned is not None:
                planned(staged.increment is None)
            parsed = parsing.result()
        except DbtError as exc:
            raise BuildError(str(exc)) from exc
    if state_key is not None:  # the machine's records: increments', and whole builds' of a fresh shape (`replay`)
        staged.replaying.machine = staged.increment is not None or increment.published_key(con) is None
    if scanning is not None:
        staged.replaying.keep_graph(parsed, scanning.result())
    inc = staged.increment
    if inc is not None and staged.sources is not None and scanning is not None:
        changed = increment.changed_sources(con, inc, staged.sources, landed, staged.rows)
        staged.kept = increment.kept_models(parsed, changed, _published(con), scanning.result())
        _kept_deltas(con, increment.narrowed_reads(parsed, staged.kept))
        if inc.replaces:
            _published_rows(con, increment.summed_reads(parsed, staged.kept))
    if progress is not None:
        progress.expect("python", len(steps))
    if select == []:
        results: list[NodeResult] = []
    else:
        with _build_settings(con):
            try:
                mode = {"increment": inc is not None, "increment_replaces": bool(inc and inc.replaces)}
                results = staged.replaying.run(
                    con, "run", project=project, select=select, variables={**variables, **mode, **_kept_var(staged)},
                    on_model=None if progress is None else _sql_built(progress), exclude=sorted(staged.kept),
                )
            except DbtError as exc:
                discard(con, staged)
                raise BuildError(str(exc)) from exc
    scratch = set(_scratch(con)) if inc is not None else set()
    for r in results:
        if r.status != "success":
            discard(con, staged)
            raise BuildError(f"model {r.name} ({project / (r.path or '')}) failed: {r.message}")
        kind = "view" if r.materialized == "view" else "table"
        if r.materialized == "per_game" and inc is not None:
            kind = "incremental"
        staged.relations[r.name] = (r.relation or STAGED_PREFIX + r.name, kind)
        rows = None if kind == "view" else _staged_rows(con, r.name, inc if kind == "incremental" else None, scratch)
        # A summed model's staged table is whole (published by a rename): "summed" says it added the increment's
        # counts to the published ones (and took its replaced games' away) rather than counting every game.
        listed = "summed" if r.materialized == "summed" and inc is not None else kind
        staged.models.append(ModelRun(r.name, _layer(r.path), "sql", listed, r.seconds, rows))
    staged.models += [ModelRun(n.name, _layer(n.original_file_path), "sql", "kept", 0.0, None)
                      for n in sorted(parsed.nodes.values(), key=lambda n: n.name) if n.resource_type == "model"
                      and n.name in staged.kept] if staged.kept else []
    staged.python_steps = steps
    if python:
        stage_python(con, staged)
    return staged


def _staged_rows(con: duckdb.DuckDBPyConnection, name: str, inc: increment.Increment | None,
                 scratch: set[str]) -> int:
    """A staged model's rows (`inc`: an incremental model's increment). An incremental model's staged view, when it
    only adds games (none replaced, none rewritten), is its published table and its delta: their counts, which
    DuckDB keeps, rather than the view's, which scans the published game ids (a million games' int_decisions:
    0.02-0.03 s, about 0.2 s over the per-game models)."""
    relation = f"{STAGED_PREFIX}{name}"
    if inc is not None and not inc.replaces and f"{relation}__rewritten" not in scratch:
        sql = f'select (select count(*) from main."{name}") + (select count(*) from main."{relation}__delta")'
    else:
        sql = f'select count(*) from main."{relation}"'
    return int(con.execute(sql).fetchall()[0][0])


def _volatile(parsed: Any) -> set[str]:
    return parsed.volatile if isinstance(parsed, replay.Graph) else increment.volatile_models(parsed)


def _published(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary union all "
        "select view_name from duckdb_views() where schema_name = 'main' and not internal and not temporary"
    ).fetchall()}


def _increment_vars(staged: Staged) -> dict[str, bool]:
    """dbt's vars saying whether the build is incremental and replaces published games (macros/increment.sql), for
    the tests as for the run (a per-game model's `unique` test reads its delta); none in a whole build, so its tests
    run dbt as before."""
    inc = staged.increment
    return {"increment": True, "increment_replaces": inc.replaces} if inc is not None else {}


def _kept_var(staged: Staged) -> dict[str, list[str]]:
    """dbt's var naming the kept models (macros/naming.sql's `ref` reads their published relations); none when none
    is kept, so a build that keeps nothing runs dbt as before."""
    return {"kept": sorted(staged.kept)} if staged.kept else {}


def _kept_deltas(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """The delta of each kept model a rebuilt per-game model reads (macros/increment.sql: the increment's rows of
    it), from its published relation: the rows dbt would give it, since its inputs did not change. A semi-join, not
    the post-hook's constant list: binding a list of 10,000 ids costs each query 0.03-0.3 s (1M games, load 8), and
    a kept model seldom holds rows of the increment's games, and is mostly small or empty."""
    for name in sorted(names):
        con.execute(f'create or replace table main."{STAGED_PREFIX}{name}__delta" as select * from main."{name}" '
                    f"where game_id in (select game_id from main.{increment.INCREMENT_GAMES})")


def _published_rows(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """The increment's games' published rows of each per-game model a rebuilt summed model reads, in an increment
    that replaces or removes published games (macros/increment.sql: the summed model takes their counts away): one
    scan of each published table for all its readers, which read it up to three times each."""
    for name in sorted(names):
        con.execute(f'create or replace table main."{STAGED_PREFIX}{name}__published" as select * from main."{name}" '
                    f"where game_id in (select game_id from main.{increment.INCREMENT_GAMES})")


def _sql_built(progress: BuildProgress) -> Callable[[str, int], None]:
    def on_model(name: str, total: int) -> None:
        progress.expect("sql", total)
        progress.done(name)

    return on_model


def python_outputs(staged: Staged) -> set[str]:
    """The tables the Python models still to run will write."""
    return {table for step in staged.python_steps for table in step.outputs}


def stage_python(con: duckdb.DuckDBPyConnection, staged: Staged,
                 written: Callable[[tuple[str, ...]], None] | None = None, first: Iterable[str] = ()) -> None:
    """Run the staged build's Python models (each reads the dbt models, none another Python model's tables);
    `written` hears of each model's tables once they are staged (the gate starts the suites that read them). The
    models that write a table named in `first` run first, in the order of `first` (the gate's suites over them can
    then run beside the others); `staged.models` lists them in the registry's order all the same."""
    steps, staged.python_steps = staged.python_steps, []
    rank = {table: i for i, table in enumerate(dict.fromkeys(first))}
    runs: dict[str, ModelRun] = {}
    # One cursor for every model: its views of the staged build are made once (about 60 of them: 0.03-0.09 s a
    # cursor at a million games), not once per model; none reads another's tables.
    with staged_views(con, staged) as cur:
        views = {name for name, (kind, _) in _relations(cur).items() if kind == "view"}
        for step in sorted(steps, key=lambda s: min([rank.get(t, len(rank)) for t in s.outputs])):  # stable
            t0 = time.perf_counter()
            frames = step.run(cur)
            for table in step.outputs:
                write_table(cur, STAGED_PREFIX + table, frames[table], views)
            for table in step.outputs:
                staged.relations[table] = (STAGED_PREFIX + table, "table")
            runs[step.name] = ModelRun(step.name, step.layer, "python", "table", time.perf_counter() - t0,
                                       sum(frames[t].height for t in step.outputs))
            if staged.progress is not None:
                staged.progress.done(step.name)
            if written is not None:
                written(step.outputs)
    staged.models.extend(runs[step.name] for step in steps)


_STAGED_NAME = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(STAGED_PREFIX)}(?=[A-Za-z0-9_])")


def _relations(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str]]:
    """The main schema's relations (not temporary): each one's kind ("table", "view") and a view's SQL."""
    return {str(name): (str(kind), str(sql or "")) for name, kind, sql in con.execute(
        "select view_name, 'view', sql from duckdb_views() where schema_name = 'main' and not internal "
        "and not temporary union all "
        "select table_name, 'table', null from duckdb_tables() where schema_name = 'main' and not temporary"
    ).fetchall()}


def _scratch(con: duckdb.DuckDBPyConnection) -> list[str]:
    """An incremental build's working tables: the increment's game ids and tails, the deltas and rewritten games'
    ids, the replaced games' published rows; and what a summed model's build left if it failed midway (its removed
    games' counts, the views it reads through: macros/increment.sql)."""
    return [r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary "
        "and (table_name in (?, ?) or (starts_with(table_name, ?) and (ends_with(table_name, '__delta') "
        "or ends_with(table_name, '__rewritten') or ends_with(table_name, '__removed') "
        "or ends_with(table_name, '__published')))) "
        "union all select view_name from duckdb_views() where schema_name = 'main' and not temporary "
        "and starts_with(view_name, ?) and contains(view_name, '__reads_')",
        [increment.INCREMENT_GAMES, increment.INCREMENT_TAILS, STAGED_PREFIX, STAGED_PREFIX],
    ).fetchall()]


def _apply_delta(con: duckdb.DuckDBPyConnection, name: str, relation: str, inc: increment.Increment,
                 scratch: set[str]) -> None:
    """Apply an incremental model's delta to its published table: drop the increment's games (and the games the
    delta rewrites), insert the delta; then drop the staged view."""
    gone = [f"select game_id from main.{increment.INCREMENT_GAMES}"] if inc.replaces else []
    if f"{relation}__rewritten" in scratch:
        gone.append(f'select game_id from main."{relation}__rewritten"')
    if gone:
        con.execute(f'delete from main."{name}" where game_id in ({" union all ".join(gone)})')
    con.execute(f'insert into main."{name}" by name select * from main."{relation}__delta"')
    con.execute(f'drop view main."{relation}"')


def _games_added(staged: Staged, scratch: set[str]) -> tuple[tuple[int, int, int] | None, str | None]:
    """What the published fct_games is, for `increment.record_games`: the plan's record of it and the table of the
    games this build adds to it (its delta; None when it is kept); no record when the plan found none, or fct_games
    is built whole or its delta rewrites published games."""
    inc = staged.increment
    if inc is None or inc.published_games is None:
        return None, None
    relation, kind = staged.relations.get("fct_games", ("", "kept"))
    if kind == "kept":
        return inc.published_games, None
    if kind == "incremental" and f"{relation}__rewritten" not in scratch:
        return inc.published_games, f"{relation}__delta"
    return None, None


def publish(con: duckdb.DuckDBPyConnection, staged: Staged, *, gated: tuple[str, str] | None = None) -> None:
    """Put every staged relation under its published name, in one transaction, without copying data: tables and
    views over published relations are renamed; a view over other staged relations (a mart kept as a view) would
    go on reading the `__staged_` names after the renames, so it is created again from its definition with the
    published names, after the renames, in build order (a view's upstream views come first). An incremental model's
    delta is applied to its published table (`_apply_delta`); the state key is recorded with the rest, and with
    `gated` (the id of the build whose gate passed, and the gate's code digest) the raw tables' rows it vouched for
    (`increment.record`). The commit's checkpoint vacuums or not (`warehouse.builds.vacuums_next`)."""
    scratch = set(_scratch(con))
    since = builds.unvacuumed(con)
    vacuum = staged.increment is None or builds.vacuums_next(since)
    con.execute("begin transaction")
    try:
        # The main schema's relations and views' SQL, read once: a look-up per relation cost about 2 ms each (DuckDB
        # lists its catalog), 0.15-0.2 s over a build's 80 relations. Each published name is dropped once, before its
        # staged relation takes it.
        present = _relations(con)
        recreate: list[tuple[str, str]] = []
        for name, (relation, kind) in staged.relations.items():
            if kind == "incremental":
                assert staged.increment is not None
                _apply_delta(con, name, relation, staged.increment, scratch)
                continue
            sql = present[relation][1] if kind == "view" else ""
            if name in present:
                con.execute(f'drop {present[name][0]} main."{name}"')
            if _STAGED_NAME.search(sql.split(" AS ", 1)[-1]):
                recreate.append((relation, _STAGED_NAME.sub("", sql)))
            else:
                con.execute(f'alter {kind} main."{relation}" rename to "{name}"')
        for relation, sql in recreate:
            con.execute(f'drop view main."{relation}"')
            con.execute(sql)
        increment.record_games(con, staged.state_key, *_games_added(staged, scratch))
        for table in scratch:
            _drop_relation(con, table)
        increment.record(con, staged.state_key, staged.sources, staged.rows, gated)
        replay.store(con, staged.replaying.records, staged.replaying.stored)
        builds.record_unvacuumed(con, 0 if vacuum else since + 1)
        with checkpointed(con, vacuum=vacuum):
            con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    if staged.replaying.machine:
        replay.keep(staged.replaying.records)


def discard(con: duckdb.DuckDBPyConnection, staged: Staged | None = None) -> None:
    """Drop staged relations (all of them when `staged` is None) and an incremental build's working tables: a refused
    build leaves nothing behind."""
    names = [*(r for r, _ in staged.relations.values()), *_scratch(con)] if staged else [
        r[0] for r in con.execute(
            "select table_name from duckdb_tables() where schema_name = 'main' and starts_with(table_name, ?) "
            "union all select view_name from duckdb_views() where schema_name = 'main' and starts_with(view_name, ?)",
            [STAGED_PREFIX, STAGED_PREFIX],
        ).fetchall()
    ]
    for relation in names:
        _drop_relation(con, relation)


def data_tests(con: duckdb.DuckDBPyConnection, staged: Staged, sample: int = 5) -> list[tuple[NodeResult, list]]:
    """The project's dbt data tests (generic and singular) on the staged build, each with a sample of the rows
    that break it."""
    try:
        results = staged.replaying.run(con, "test", project=staged.project,
                                       variables={**_increment_vars(staged), **_kept_var(staged)})
    except DbtError as exc:
        raise BuildError(str(exc)) from exc
    out: list[tuple[NodeResult, list]] = []
    for r in results:
        rows: list = []
        if r.status != "pass" and r.compiled_sql:
            cur = con.execute(f"select * from ({r.compiled_sql}) limit {int(sample)}")
            cols = [d[0] for d in cur.description]
            rows = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        out.append((r, rows))
    return out


def build_models(
    con: duckdb.DuckDBPyConnection,
    *,
    sql_dir: Path | None = None,
    upset_threshold: float = 0.05,
    only: Iterable[str] | None = None,
    full_refresh: bool = False,
) -> list[ModelRun]:
    """Stage every model (or those in `only` and what they need) and publish them, without the gate."""
    staged = stage(con, sql_dir=sql_dir, upset_threshold=upset_threshold, only=only, full_refresh=full_refresh)
    publish(con, staged)
    return staged.models


__all__ = ["BUILD_RUNS_SCHEMA", "gate_passed", "latest_build"]  # re-exported: they moved to warehouse.builds
