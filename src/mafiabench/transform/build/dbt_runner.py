"""Run the dbt project (dbt-core + dbt-duckdb) in-process against a warehouse file.

dbt is driven through its Python API (`dbtRunner`), never a shell: a profile pointing at the warehouse file is
written at run time into a private temporary folder (no `~/.dbt`), and dbt's `target/` and `logs/` go there too, so
nothing is written into the project folder (which may be the installed package). The project is parsed once per
process and warehouse name, and the parsed manifest is reused by later runs (parsing is most of dbt's start-up); it is
also kept in the user's cache folder (`$XDG_CACHE_HOME/mafiabench/dbt-manifests`, never the project folder; a pickle,
`MANIFEST_SUFFIX`), keyed by a digest of every project file and the dbt versions, so later processes skip the parse
(4-14 s) while any edit to the project parses it again.

dbt opens the same DuckDB file as the caller; within one process DuckDB shares one database instance between
connections, so the caller's open connection sees what dbt built, and dbt's connection is closed after each run.
"""

from __future__ import annotations

import copyreg
import gc
import hashlib
import io
import json
import logging
import os
import pickle
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mafiabench import scratch
from mafiabench.errors import UserError

if TYPE_CHECKING:  # imported where used: the catalogue's cached path needs no DuckDB
    import duckdb

PACKAGED_PROJECT = Path(__file__).resolve().parents[1] / "sql"  # transform/sql/
STAGED_PREFIX = "__staged_"  # models are built under this prefix and renamed on publish (macros/naming.sql)

# Models dbt builds at once. Small warehouses are bound by dbt's own per-model overhead, which 4 threads hide (a
# 38-model build of a few games: 3.6 s instead of 5 s); large ones by DuckDB, which already uses every core per query,
# and 4 big models at once only add memory (1M games: peak RSS 4.9 GB instead of 3.3 GB, and slower). An increment's
# models are deltas: two at once, dbt's Python and the single-threaded phases of one model's query fill the cores
# another's leaves (a million games + 10,000, interleaved on copies at load 3.3-4.6: an increment dbt runs 14.4/13.4
# -> 12.8/11.4 s, one replayed on dbt's threads 6.96/7.67/7.22 -> 6.75/7.09/6.30 s). A whole build's are not: two at
# once made it 1.1-3.5 s slower in three pairs at load 2 (CPU +3-8 s, peak RSS 1.9-2.1 -> 2.4-2.6 GB). BENCHMARKS.md.
SMALL_THREADS, LARGE_THREADS, INCREMENT_THREADS, LARGE_GAMES = 4, 1, 2, 50_000
_LOCK = threading.Lock()
_WORK: Path | None = None
_MANIFESTS: dict[tuple[str, str, str], Any] = {}


class Recorder(Protocol):
    """Watches a dbt invocation's statements (`replay._Recorder`), then hears its results."""

    def watch(self) -> AbstractContextManager[None]: ...

    def finish(self, command: str, results: Sequence[Any], parsed: Any) -> None: ...


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
        _WORK = scratch.make("dbt")  # removed at exit, even an interrupted one (mafiabench.scratch)
    return _WORK


_NOT_PROJECT = {"target", "logs", "dbt_packages", "__pycache__", ".git"}


def _project_digest(project: Path) -> str:
    """A digest of every file of the project (names and bytes) but dbt's own output folders."""
    h = hashlib.sha256()
    for p in sorted(project.rglob("*")):
        rel = p.relative_to(project)
        if p.is_file() and not _NOT_PROJECT & set(rel.parts[:-1]):
            h.update(rel.as_posix().encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:32]


def threads_for(con: duckdb.DuckDBPyConnection, variables: dict[str, Any] | None = None) -> int:
    """dbt threads for this warehouse and invocation: `$MAFIABENCH_DBT_THREADS`, else by its number of games and
    whether the build is incremental (dbt's var `increment`, macros/increment.sql)."""
    import duckdb

    if os.environ.get("MAFIABENCH_DBT_THREADS"):
        return max(1, int(os.environ["MAFIABENCH_DBT_THREADS"]))
    try:
        n = con.execute("select count(*) from main.raw_games").fetchall()[0][0]
    except duckdb.Error:
        n = 0
    if n < LARGE_GAMES:
        return SMALL_THREADS
    return INCREMENT_THREADS if (variables or {}).get("increment") else LARGE_THREADS


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


def _runner(manifest: Any = None, on_model: Callable[[str, int], None] | None = None) -> Any:
    with _root_logging_kept():
        from dbt.cli.main import dbtRunner

        return dbtRunner(manifest=manifest, callbacks=None if on_model is None else [_model_built(on_model)])


def _model_built(on_model: Callable[[str, int], None]) -> Callable[[Any], None]:
    """dbt's event callback: `on_model(name, models in this run)` as each model is built (dbt's "OK created" line,
    which it fires from its worker threads)."""

    def callback(event: Any) -> None:
        if event.info.name == "LogModelResult":
            on_model(event.data.node_info.node_name, int(event.data.total))

    return callback


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


MANIFESTS_KEPT = 32  # the most recently used cached manifests kept (each ~1.9 MB): one per project and warehouse name


def cache_dir(name: str) -> Path:
    """A folder of the cache kept between processes: `$MAFIABENCH_CACHE_DIR/<name>`, else the user's cache folder's
    `mafiabench/<name>`; never the project's or the package's."""
    if os.environ.get("MAFIABENCH_CACHE_DIR"):
        return Path(os.environ["MAFIABENCH_CACHE_DIR"]) / name
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mafiabench" / name


def manifest_cache_dir() -> Path:
    """Where parsed manifests are kept between processes (see `cache_dir`)."""
    return cache_dir("dbt-manifests")


def _manifest_cache_file(project: Path, digest: str, stem: str) -> Path:
    from importlib.metadata import version

    # The nodes carry the catalog (the warehouse file's stem) and the project's path; the format is dbt's.
    key = "|".join([str(project), digest, stem, version("dbt-core"), version("dbt-duckdb"), sys.version])
    return manifest_cache_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}{MANIFEST_SUFFIX}"


# The cached manifest is a pickle of the fields dbt's own msgpack form keeps (`_manifest_fields`): loading it takes
# 0.03 s where `Manifest.from_msgpack` took 1.0 s quiet and 3 s beside a build's imports (mashumaro's decoders,
# Python per field), which every build that runs dbt paid. The folder is the user's own (mode 0700), written only
# here, like any cache of pickles; a file that does not load is parsed again. Not dbt's `Manifest.__reduce_ex__`,
# whose arguments stop one field short of its `_doc_lookup` (dbt-core 1.11: `fixtures` would get that lookup).
MANIFEST_SUFFIX = ".manifest.pickle"


def _manifest_fields(parsed: Any) -> tuple[Callable[..., Any], tuple[dict[str, Any]]]:
    """The manifest's fields but its lookups, lock and caches (those dbt's serializers leave out, rebuilt when
    first used), to rebuild it by (`_manifest_of`)."""
    import dataclasses

    return _manifest_of, ({f.name: getattr(parsed, f.name) for f in dataclasses.fields(parsed)
                           if f.init and "serialize" not in f.metadata},)


def _manifest_of(fields: dict[str, Any]) -> Any:
    from dbt.contracts.graph.manifest import Manifest

    return Manifest(**fields)


def _load_cached(file: Path) -> Any:
    from dbt.contracts.graph.manifest import Manifest

    try:
        data = file.read_bytes()
    except OSError:
        return None
    try:
        parsed = pickle.loads(data)
    except Exception:  # a damaged or foreign cache file only costs a parse
        return None
    return parsed if isinstance(parsed, Manifest) else None


def _store_cached(file: Path, parsed: Any) -> None:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, type(parsed): _manifest_fields}
    try:
        pickler.dump(parsed)
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = file.with_name(f"{file.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_bytes(buffer.getvalue())
        os.replace(tmp, file)  # atomic: a concurrent reader sees the old file or the whole new one
        cached = sorted(file.parent.glob(f"*{MANIFEST_SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in [*cached[MANIFESTS_KEPT:], *file.parent.glob("*.msgpack")]:  # and the former msgpack form's
            old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # a read-only home, or an object dbt added that does not pickle, only costs the next process a parse


def manifest(project: Path, path: Path) -> Any:
    """The parsed project for this warehouse name (dbt keeps the catalog name in each node): cached per process,
    and on disk per project digest (see the module docstring), so an edited project is never served stale."""
    digest = _project_digest(project)
    key = (str(project), digest, path.stem)
    with _LOCK:
        if key not in _MANIFESTS:
            file = _manifest_cache_file(project, digest, path.stem)
            with _root_logging_kept():
                parsed = _load_cached(file)
            if parsed is not None:
                with suppress(OSError):
                    os.utime(file)  # kept by last use: the files dropped beyond MANIFESTS_KEPT are the least used
            if parsed is None:
                res = _invoke(_runner(), "parse", [*_common_args(project, path), "--no-partial-parse"])
                _close_dbt_connections()
                if not res.success:
                    raise DbtError(f"dbt could not parse {project}: {res.exception or _messages(res)}")
                parsed = res.result
                _store_cached(file, parsed)
            _MANIFESTS[key] = parsed
            # The manifest's objects live as long as the process: out of the cyclic collector's sight, the rest of
            # the build's collections stop walking them again and again (a build at a million games, measured at
            # load 13-15: 3.4-3.8 s of collections -> 1.6-1.8 s). Objects alive now are only kept from the
            # collector (not from reference counting), once per manifest loaded.
            gc.freeze()
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
    on_model: Callable[[str, int], None] | None = None,
    exclude: Sequence[str] = (),
    recorder: Recorder | None = None,
) -> list[NodeResult]:
    """`dbt run` (models) or `dbt test` (data tests) against the warehouse file behind `con`, of the nodes selected
    and not excluded; `on_model(name, total)` hears of each model as it is built (a progress bar); `recorder` watches
    the statements dbt executes (`replay`)."""
    path = warehouse_file(con)
    parsed = manifest(project, path)
    args = [*_common_args(project, path, threads_for(con, variables)), "--no-write-json", "--no-partial-parse"]
    if variables:
        args += ["--vars", json.dumps(variables)]
    if select:
        args += ["--select", *select]
    if exclude:
        args += ["--exclude", *exclude]
    with _LOCK:
        try:
            with recorder.watch() if recorder is not None else nullcontext():
                res = _invoke(_runner(parsed, on_model), command, args)
        finally:
            _close_dbt_connections()
    if res.exception is not None:
        raise DbtError(f"dbt {command} failed in {project}: {res.exception}")
    if recorder is not None:
        recorder.finish(command, res.result.results, parsed)
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
