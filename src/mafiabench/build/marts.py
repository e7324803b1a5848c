"""Build the warehouse: staging views, intermediate and mart tables, Python-computed marts, then the quality gate.

Models are the files under `sql/` (one model per file, named after the file) plus the Python steps registered in
`mafiabench.build.python_models`. Their order comes from the models themselves: each file's table references are
parsed and sorted topologically, so adding a model never means editing a list. Staging models are views over the raw
tables; everything else is materialised with `create or replace table`, so a rebuild is idempotent. All models are
built in one transaction: a failing model leaves the previous build intact.

After the models, `mafiabench.quality.gate` validates raw tables and marts (Great Expectations on DataFrames, plus the
`sql/tests/assert_*.sql` rules), stores every result in `validation_results`, and records the build in
`build_runs`. Only a build whose gate passed is *published*; `gate_passed(con)` is what the dashboard step checks.
"""

from __future__ import annotations

import graphlib
import os
import re
import time
import tomllib
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl

from mafiabench.errors import UserError
from mafiabench.warehouse.builds import BUILD_RUNS_SCHEMA, gate_passed, latest_build
from mafiabench.warehouse.raw import RAW_SCHEMA, REPLACED_CALLS, ensure_schema

LAYERS = ("staging", "intermediate", "marts")
PREFIXES = {"staging": ("stg_",), "intermediate": ("int_",), "marts": ("fct_", "dim_", "mart_")}
PRICES_PATH = Path(__file__).resolve().parents[1] / "prices.toml"
# Tables the build reads but does not define: the landed raw tables, replaced attempts' calls, the runner's run
# ledger, the seeded prices.
SOURCES = (*RAW_SCHEMA, REPLACED_CALLS, "raw_runs", "ref_prices")

Materialized = Literal["view", "table"]


def default_sql_dir() -> Path:
    """`sql/` of the checkout (the package is installed editable); `MAFIABENCH_SQL_DIR` overrides it."""
    env = os.environ.get("MAFIABENCH_SQL_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "sql"


class BuildError(UserError):
    """A model failed to build; the message names the model and its file."""


@dataclass(frozen=True)
class Model:
    """A node of the build graph: a SQL file or a Python step (which may write several tables)."""

    name: str
    layer: str
    kind: Literal["sql", "python"]
    grain: str
    purpose: str
    materialized: Materialized
    depends_on: tuple[str, ...] = ()
    path: Path | None = None
    sql: str | None = None
    outputs: tuple[str, ...] = ()
    run: Callable[[duckdb.DuckDBPyConnection], Mapping[str, pl.DataFrame]] | None = None

    @property
    def tables(self) -> tuple[str, ...]:
        return self.outputs or (self.name,)


@dataclass
class ModelRun:
    name: str
    layer: str
    kind: str
    materialized: str
    seconds: float
    rows: int | None


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

    @property
    def failures(self) -> list[Any]:
        return [r for r in self.validation if not r.success]

    def summary(self) -> str:
        n_tables = sum(1 for m in self.models if m.materialized == "table")
        lines = [
            f"build {self.build_id}: {len(self.models)} models ({n_tables} tables) in {self.seconds:.2f}s",
        ]
        if self.validated:
            lines.append(
                f"quality gate: {len(self.validation) - len(self.failures)}/{len(self.validation)} expectations "
                f"passed in {self.validation_seconds:.2f}s -> {'PUBLISHED' if self.published else 'NOT PUBLISHED'}"
            )
        else:
            lines.append("quality gate: skipped -> NOT PUBLISHED")
        return "\n".join(lines)


# -- model discovery ----------------------------------------------------------------------------------------------

_HEADER = re.compile(r"^--\s*(grain|purpose|materialized)\s*:\s*(.*)$", re.IGNORECASE)


def parse_header(text: str) -> dict[str, str]:
    """The leading comment block: `-- grain: ...`, `-- purpose: ...` (may continue on following `--` lines),
    optional `-- materialized: view|table`."""
    out: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("--"):
            break
        m = _HEADER.match(stripped)
        if m:
            current = m.group(1).lower()
            out[current] = m.group(2).strip()
        elif current is not None:
            out[current] += " " + stripped.lstrip("-").strip()
    return out


def strip_sql(text: str) -> str:
    """SQL without comments and string literals, so names inside them are not taken for references."""
    text = re.sub(r"--[^\n]*", " ", text)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"'(?:[^']|'')*'", "''", text)


_IDENT = re.compile(r"\b[a-z_][a-z0-9_]*\b", re.IGNORECASE)
_MODEL_LIKE = re.compile(r"^(stg|int|fct|dim|mart)_[a-z0-9_]+$")


def references(sql: str) -> set[str]:
    """Every identifier in the SQL that looks like a model or a source."""
    idents = {m.group(0).lower() for m in _IDENT.finditer(strip_sql(sql))}
    return {i for i in idents if _MODEL_LIKE.match(i) or i in SOURCES}


def discover_sql_models(sql_dir: Path) -> dict[str, Model]:
    models: dict[str, Model] = {}
    for layer in LAYERS:
        folder = sql_dir / layer
        for path in sorted(folder.glob("*.sql")):
            name = path.stem
            text = path.read_text()
            if not name.startswith(PREFIXES[layer]):
                raise BuildError(f"{path}: a {layer} model's name must start with {' or '.join(PREFIXES[layer])}")
            header = parse_header(text)
            if not header.get("grain") or not header.get("purpose"):
                raise BuildError(f"{path}: the header must state the grain and purpose (-- grain: / -- purpose:)")
            materialized = header.get("materialized") or ("view" if layer == "staging" else "table")
            if materialized not in ("view", "table"):
                raise BuildError(f"{path}: materialized must be view or table, not {materialized!r}")
            deps = references(text) - {name}
            models[name] = Model(
                name=name,
                layer=layer,
                kind="sql",
                grain=header["grain"],
                purpose=header["purpose"],
                materialized=materialized,  # type: ignore[arg-type]
                depends_on=tuple(sorted(deps)),
                path=path,
                sql=text,
            )
    return models


def discover_models(sql_dir: Path | None = None) -> dict[str, Model]:
    """SQL models from `sql_dir` plus the Python steps of `mafiabench.build.python_models`, dependencies checked."""
    from mafiabench.build import python_models as analytics

    sql_dir = sql_dir or default_sql_dir()
    if not sql_dir.is_dir():
        raise BuildError(f"SQL folder {sql_dir} not found (set MAFIABENCH_SQL_DIR to the checkout's sql/)")
    models = discover_sql_models(sql_dir)
    for step in analytics.PYTHON_MODELS:
        models[step.name] = step
    produced = {t: m.name for m in models.values() for t in m.tables}
    for m in models.values():
        for dep in m.depends_on:
            if dep not in produced and dep not in SOURCES:
                raise BuildError(f"{m.path or m.name}: references {dep!r}, which no model defines")
    return models


def build_order(models: Mapping[str, Model]) -> list[Model]:
    """Topological order of the models (a node's producers first); ties broken by layer, then name."""
    produced = {t: m.name for m in models.values() for t in m.tables}
    graph = {
        name: {produced[d] for d in m.depends_on if d in produced and produced[d] != name}
        for name, m in models.items()
    }
    sorter = graphlib.TopologicalSorter(graph)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise BuildError(f"models reference each other in a cycle: {' -> '.join(exc.args[1])}") from exc
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    order: list[Model] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=lambda n: (rank.get(models[n].layer, 9), n))
        for name in ready:
            order.append(models[name])
            sorter.done(name)
    return order


# -- building -------------------------------------------------------------------------------------------------------


def load_prices(path: Path = PRICES_PATH) -> pl.DataFrame:
    """The versioned price table as rows (provider, model, $/Mtoken in/cached/out, version)."""
    data = tomllib.loads(path.read_text())
    version = str(data.get("version") or "")
    if not version:
        raise BuildError(f"{path}: the price table needs a `version`")
    rows = [
        {
            "price_version": version,
            "provider": str(p["provider"]),
            "model": str(p["model"]),
            "input_per_mtok": float(p["input"]),
            "cached_per_mtok": float(p.get("cached_input", p["input"])),
            "output_per_mtok": float(p["output"]),
        }
        for p in data.get("price", [])
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


def write_table(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    _drop_if_kind(con, name, "view")
    con.register("_mb_frame", frame.to_arrow())
    try:
        con.execute(f"create or replace table {name} as select * from _mb_frame")
    finally:
        con.unregister("_mb_frame")


def _drop_if_kind(con: duckdb.DuckDBPyConnection, name: str, kind: str) -> None:
    """`create or replace view` cannot replace a table (and vice versa): drop an object of the other kind."""
    if kind == "view":
        exists = con.execute("select 1 from duckdb_views() where view_name = ? and not internal", [name]).fetchall()
    else:
        exists = con.execute("select 1 from duckdb_tables() where table_name = ?", [name]).fetchall()
    if exists:
        con.execute(f"drop {kind} {name}")


def run_macros(con: duckdb.DuckDBPyConnection, sql_dir: Path) -> None:
    for path in sorted((sql_dir / "macros").glob("*.sql")):
        con.execute(path.read_text())


def _sql_body(sql: str) -> str:
    return sql.strip().rstrip(";")


def materialise(con: duckdb.DuckDBPyConnection, model: Model) -> int | None:
    """Create one model; returns its row count for tables."""
    if model.kind == "python":
        assert model.run is not None
        frames = model.run(con)
        for table in model.tables:
            write_table(con, table, frames[table])
        return sum(frames[t].height for t in model.tables)
    assert model.sql is not None
    body = _sql_body(model.sql)
    if model.materialized == "view":
        _drop_if_kind(con, model.name, "table")
        con.execute(f"create or replace view {model.name} as {body}")
        return None
    _drop_if_kind(con, model.name, "view")
    con.execute(f"create or replace table {model.name} as {body}")
    return int(con.execute(f"select count(*) from {model.name}").fetchall()[0][0])


def build_models(
    con: duckdb.DuckDBPyConnection,
    *,
    sql_dir: Path | None = None,
    upset_threshold: float = 0.05,
    only: Iterable[str] | None = None,
) -> list[ModelRun]:
    """Build every model (or those in `only` and what they need) in one transaction; roll back on error."""
    sql_dir = sql_dir or default_sql_dir()
    models = discover_models(sql_dir)
    order = build_order(models)
    if only is not None:
        wanted = _with_upstream(models, set(only))
        order = [m for m in order if m.name in wanted]
    ensure_schema(con)
    _ensure_runs_table(con)
    runs: list[ModelRun] = []
    # Row order inside a mart carries no meaning; letting DuckDB write tables in parallel halves some builds.
    preserve = con.execute("select current_setting('preserve_insertion_order')").fetchall()[0][0]
    con.execute("set preserve_insertion_order = false")
    con.execute("begin transaction")
    try:
        con.execute(f"set variable upset_threshold = {float(upset_threshold)!r}")
        run_macros(con, sql_dir)
        write_table(con, "ref_prices", load_prices())
        for model in order:
            t0 = time.perf_counter()
            try:
                rows = materialise(con, model)
            except duckdb.Error as exc:
                raise BuildError(f"model {model.name} ({model.path or 'python'}) failed: {exc}") from exc
            runs.append(
                ModelRun(model.name, model.layer, model.kind, model.materialized, time.perf_counter() - t0, rows)
            )
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    finally:
        con.execute(f"set preserve_insertion_order = {bool(preserve)}")
    return runs


def _ensure_runs_table(con: duckdb.DuckDBPyConnection) -> None:
    """The run ledger is written by the runner (`landing.record_run`); an unrun warehouse gets it empty."""
    from mafiabench.warehouse.landing import ensure_runs_table

    ensure_runs_table(con)


def _with_upstream(models: Mapping[str, Model], names: set[str]) -> set[str]:
    produced = {t: m.name for m in models.values() for t in m.tables}
    todo = [produced.get(n, n) for n in names]
    seen: set[str] = set()
    while todo:
        n = todo.pop()
        if n in seen or n not in models:
            continue
        seen.add(n)
        todo.extend(produced[d] for d in models[n].depends_on if d in produced)
    return seen


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def build_warehouse(
    con: duckdb.DuckDBPyConnection,
    *,
    sql_dir: Path | None = None,
    validate: bool = True,
    raise_on_failure: bool = True,
    upset_threshold: float = 0.05,
    max_unusable: float | None = None,
) -> BuildResult:
    """Rebuild every model, run the quality gate, store its results, and publish the build only if it passed.

    Raises `quality.QualityGateError` (after storing the results) when an expectation fails and
    `raise_on_failure` is set; the error names each failing expectation and shows failing rows.
    """
    from mafiabench.quality import gate as quality

    t0 = time.perf_counter()
    result = BuildResult(build_id=_new_build_id(), started_at=_now())
    con.execute(f"create table if not exists build_runs ({BUILD_RUNS_SCHEMA})")
    result.models = build_models(con, sql_dir=sql_dir, upset_threshold=upset_threshold)
    if validate:
        t1 = time.perf_counter()
        result.validation = quality.run_suites(
            con, sql_dir=sql_dir or default_sql_dir(),
            max_unusable=quality.DEFAULT_MAX_UNUSABLE if max_unusable is None else max_unusable,
        )
        result.validation_seconds = time.perf_counter() - t1
        result.validated = True
        result.passed = all(r.success for r in result.validation)
        quality.store_results(con, result.build_id, result.validation)
    result.published = result.validated and result.passed
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


def _new_build_id() -> str:
    return _now().strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


__all__ = ["BUILD_RUNS_SCHEMA", "gate_passed", "latest_build"]  # re-exported: they moved to warehouse.builds
