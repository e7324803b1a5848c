"""Run the dbt project (dbt-core + dbt-duckdb) in-process against a warehouse file.

dbt is driven through its Python API (`dbtRunner`), never a shell: a profile pointing at the warehouse file is
written at run time into a private temporary folder (no `~/.dbt`), and dbt's `target/` and `logs/` go there too, so
nothing is written into the project folder (which may be the installed package). The project is parsed once per
process and warehouse name, and the parsed manifest is reused by later runs (parsing is most of dbt's start-up).

dbt opens the same DuckDB file as the caller; within one process DuckDB shares one database instance between
connections, so the caller's open connection sees what dbt built, and dbt's connection is closed after each run.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.errors import UserError

PACKAGED_PROJECT = Path(__file__).resolve().parent / "sql"
STAGED_PREFIX = "__staged_"  # models are built under this prefix and renamed on publish (macros/naming.sql)

# Models dbt builds at once. Small warehouses are bound by dbt's own per-model overhead, which 4 threads hide (a
# 38-model build of a few games: 3.6 s instead of 5 s); large ones by DuckDB, which already uses every core per query,
# and 4 big models at once only add memory (1M games: peak RSS 4.9 GB instead of 3.3 GB, and slower). BENCHMARKS.md.
SMALL_THREADS, LARGE_THREADS, LARGE_GAMES = 4, 1, 50_000
_LOCK = threading.Lock()
_WORK: Path | None = None
_MANIFESTS: dict[tuple[str, str, str], Any] = {}


class DbtError(UserError):
    """dbt could not parse or run the project; the message names the model or file."""


@dataclass
class NodeResult:
    """One model or data test of a dbt invocation."""

    name: str
    kind: str  # "model" | "test"
    status: str  # dbt's: success, error, pass, fail, warn, skipped
    seconds: float
    message: str | None
    materialized: str | None = None
    relation: str | None = None  # the built relation (models): `__staged_<name>`
    path: str | None = None  # the file, relative to the project
    failures: int | None = None  # tests: violating rows
    compiled_sql: str | None = None
    description: str = ""


def resolve_project(explicit: Path | None = None) -> Path:
    """The dbt project to build: `explicit`, else `$MAFIABENCH_SQL_DIR`, else `./sql` of the working folder when it
    holds a `dbt_project.yml`, else the copy shipped inside the package."""
    for candidate, what in (
        (explicit, "--sql-dir"),
        (Path(os.environ["MAFIABENCH_SQL_DIR"]) if os.environ.get("MAFIABENCH_SQL_DIR") else None,
         "MAFIABENCH_SQL_DIR"),
    ):
        if candidate is not None:
            if not (Path(candidate) / "dbt_project.yml").is_file():
                raise DbtError(f"{what}: {candidate} is not a dbt project (no dbt_project.yml)")
            return Path(candidate).resolve()
    local = Path.cwd() / "sql"
    if (local / "dbt_project.yml").is_file():
        return local.resolve()
    return PACKAGED_PROJECT


def warehouse_file(con: duckdb.DuckDBPyConnection) -> Path:
    """The DuckDB file behind `con` (dbt connects to it by path)."""
    rows = con.execute("select path from duckdb_databases() where database_name = current_database()").fetchall()
    if not rows or not rows[0][0]:
        raise DbtError("the build needs a warehouse file: an in-memory DuckDB connection cannot be shared with dbt")
    return Path(rows[0][0]).resolve()


def _work_dir() -> Path:
    global _WORK
    if _WORK is None:
        _WORK = Path(tempfile.mkdtemp(prefix="mafiabench-dbt-"))
        atexit.register(shutil.rmtree, _WORK, True)
    return _WORK


def _project_digest(project: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(project.rglob("*")):
        if p.is_file() and p.suffix in (".sql", ".yml", ".yaml", ".md") and "target" not in p.parts:
            h.update(p.relative_to(project).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def threads_for(con: duckdb.DuckDBPyConnection) -> int:
    """dbt threads for this warehouse: `$MAFIABENCH_DBT_THREADS`, else by its number of games."""
    if os.environ.get("MAFIABENCH_DBT_THREADS"):
        return max(1, int(os.environ["MAFIABENCH_DBT_THREADS"]))
    try:
        n = con.execute("select count(*) from main.raw_games").fetchall()[0][0]
    except duckdb.Error:
        n = 0
    return LARGE_THREADS if n >= LARGE_GAMES else SMALL_THREADS


def _profiles_dir(path: Path, threads: int = SMALL_THREADS) -> Path:
    key = hashlib.sha256(f"{path}|{threads}".encode()).hexdigest()[:16]
    folder = _work_dir() / "profiles" / key
    folder.mkdir(parents=True, exist_ok=True)
    profile = {
        "mafiabench": {
            "target": "warehouse",
            "outputs": {"warehouse": {"type": "duckdb", "path": str(path), "schema": "main", "threads": threads}},
        }
    }
    (folder / "profiles.yml").write_text(json.dumps(profile))  # JSON is YAML
    return folder


def _common_args(project: Path, path: Path, threads: int = SMALL_THREADS) -> list[str]:
    work = _work_dir()
    return [
        "--project-dir", str(project),
        "--profiles-dir", str(_profiles_dir(path, threads)),
        "--target-path", str(work / "target" / _project_digest(project)),
        "--log-path", str(work / "logs"),
    ]


_GLOBAL_FLAGS = [
    "--quiet", "--no-use-colors", "--no-send-anonymous-usage-stats", "--log-level-file", "none",
    "--no-version-check",
]


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    """dbt's tracker calls `logging.basicConfig()` on import: without this, every library's INFO lines (Great
    Expectations' for one) would print for the rest of the process."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


def _runner(manifest: Any = None) -> Any:
    with _root_logging_kept():
        from dbt.cli.main import dbtRunner

        return dbtRunner(manifest=manifest)


def _invoke(runner: Any, command: str, args: Sequence[str]) -> Any:
    os.environ.setdefault("DO_NOT_TRACK", "1")
    with _root_logging_kept():
        return runner.invoke([*_GLOBAL_FLAGS, command, *args])


def _close_dbt_connections() -> None:
    """dbt-duckdb keeps its environment (and so the DuckDB file) in a class attribute: release it."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    env = DuckDBConnectionManager._ENV
    if env is not None:
        try:
            env.close()
        finally:
            DuckDBConnectionManager._ENV = None


def manifest(project: Path, path: Path) -> Any:
    """The parsed project for this warehouse name (cached per process: dbt keeps the catalog name in each node)."""
    key = (str(project), _project_digest(project), path.stem)
    with _LOCK:
        if key not in _MANIFESTS:
            res = _invoke(_runner(), "parse", [*_common_args(project, path), "--no-partial-parse"])
            _close_dbt_connections()
            if not res.success:
                raise DbtError(f"dbt could not parse {project}: {res.exception or _messages(res)}")
            _MANIFESTS[key] = res.result
        return _MANIFESTS[key]


def _messages(res: Any) -> str:
    results = getattr(res.result, "results", None) or []
    return "; ".join(f"{r.node.name}: {r.message}" for r in results if r.status in ("error", "fail"))


def run(
    con: duckdb.DuckDBPyConnection,
    command: str,
    *,
    project: Path,
    select: Sequence[str] | None = None,
    variables: dict[str, Any] | None = None,
) -> list[NodeResult]:
    """`dbt run` (models) or `dbt test` (data tests) against the warehouse file behind `con`."""
    path = warehouse_file(con)
    parsed = manifest(project, path)
    args = [*_common_args(project, path, threads_for(con)), "--no-write-json", "--no-partial-parse"]
    if variables:
        args += ["--vars", json.dumps(variables)]
    if select:
        args += ["--select", *select]
    with _LOCK:
        try:
            res = _invoke(_runner(parsed), command, args)
        finally:
            _close_dbt_connections()
    if res.exception is not None:
        raise DbtError(f"dbt {command} failed in {project}: {res.exception}")
    out: list[NodeResult] = []
    for r in res.result.results:
        node = r.node
        out.append(
            NodeResult(
                name=node.name,
                kind="test" if node.resource_type == "test" else "model",
                status=str(r.status),
                seconds=float(r.execution_time or 0.0),
                message=r.message,
                materialized=getattr(node.config, "materialized", None),
                relation=getattr(node, "alias", None),
                path=node.original_file_path,
                failures=r.failures,
                compiled_sql=getattr(node, "compiled_code", None),
                description=getattr(node, "description", "") or "",
            )
        )
    return out
