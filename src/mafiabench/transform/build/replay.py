"""Replay what dbt did: a scheduled study's builds run dbt again and again with the same project, the same vars and
the same kept models, and dbt renders the same statements each time; the replay executes them on DuckDB directly,
without dbt's import, its manifest or its Python per model (at a million games about 1.5 s of `dbt run` and most of
the 2.2 s of `dbt test`).

dbt stays the one definition of a build: every `dbt run` and `dbt test` of a build is *recorded* (`run`): the
statements dbt executed on DuckDB, per node in the order the nodes started (a node starts once its upstream nodes
finished, so that order respects the lineage), with what callers read of each node's result (`NodeResult`; a test's
severity and thresholds, from which its status and message are computed as dbt computes them). `marts.publish`
keeps the published build's records in the warehouse (`TABLE`, in the publish transaction: the records travel with
the warehouse, the build they describe is the one published, and nothing is kept for a build the gate refused). The
next build replays a record when its key is equal (`key`: the build's state key, which covers the project's files,
the dbt, dbt-duckdb and DuckDB versions, the vars and the raw schema; the command and every var dbt gets, the kept
set among them; select, exclude, threads, the warehouse file's stem, which dbt writes into statements as the catalog,
and dbt's `DBT_*` environment); `mafiabench build --full-refresh` never replays.

What dbt decides from the database is checked, not assumed: a statement whose result dbt read (the relation
listing its cache is built from, which decides the materializations' conditional drops and renames; the adapter's
catalog and constraint look-ups) is executed again at its place and must give the same rows, else the replay stops.
A `dbt run` writes staged relations only (the project's names: checked for every statement when recorded), and the
replay runs each node in a transaction of its own, as dbt does; a replay that stops (a statement fails, a result
differs, Ctrl-C) rolls its node back and drops what the nodes before it staged, and the build falls back to dbt: a
failed replay costs time, never correctness. The
data tests only read; their listing is not checked (it runs while the Python models stage their tables, and no test
that does not store its failures reads dbt's relation cache). A record is refused when a statement could differ
between two runs with the same key: a model or test whose SQL or macros read a clock, a random generator or the
environment (`increment.volatile`), a materialization other than those whose statements were reviewed
(`REVIEWED`), dbt's invocation id in a statement, a statement ending or starting a transaction of its own, or of a
kind other than queries, DDL and DML (`_STATEMENT_KINDS`), or writing a relation that is not staged, a test storing
its failures, a node that did not succeed.

The parsed project's graph (models, their materializations, files and `depends_on`, the sources, which models are
volatile) is recorded too, keyed by the state key, so that an incremental build plans its increment and its kept
models without loading dbt's manifest (`Graph`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb

from mafiabench.transform.build import dbt_runner, increment
from mafiabench.transform.build.dbt_runner import NodeResult

log = logging.getLogger(__name__)

TABLE = "build_replay"  # the published build's records: (kind, key, record), written by `store`
FORMAT = 2  # of the records: raise it when the recording or the replay changes (2: nodes name their upstream)
# Materializations whose statements depend on no clock: `summed` (macros/increment.sql) renders the same statements
# for the same key and reads one result, its columns (DESCRIBE), which a replay checks like any other.
REVIEWED = frozenset({"view", "table", "per_game", "summed", "test"})
_TRANSACTION = frozenset({"BEGIN", "COMMIT"})  # dbt's own transaction statements: the replay makes its own
_OWN_TRANSACTION = re.compile(r"(?:^|;)\s*(?:begin|commit|rollback|abort|end|checkpoint|force|attach|detach|use)\b",
                              re.IGNORECASE)
_COMMENT = re.compile(r"^\s*/\*.*?\*/", re.DOTALL)
_NAME = r'(?:"[^"]+"|[A-Za-z_][A-Za-z0-9_$]*)'
# The relations a statement writes: created, replaced, dropped, renamed (both names), inserted into, deleted from.
_WRITES = re.compile(
    r"\b(?:create\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?(?:table|view)(?:\s+if\s+not\s+exists)?"
    r"|drop\s+(?:table|view)(?:\s+if\s+exists)?|alter\s+(?:table|view)(?:\s+if\s+exists)?|rename\s+to"
    r"|insert\s+(?:or\s+\w+\s+)?into|delete\s+from|update|truncate(?:\s+table)?)"
    rf"\s+({_NAME}(?:\s*\.\s*{_NAME})*)",
    re.IGNORECASE,
)
_LEXEMES = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.DOTALL)
_STATEMENT_KINDS = frozenset({"select", "with", "create", "drop", "alter", "insert", "delete", "set", "reset"})
_TEST_RESULT = ["failures", "should_warn", "should_error"]


class ReplayMismatch(Exception):
    """The database answered a recorded look-up otherwise than when dbt ran: dbt might now emit other statements."""


@dataclass
class Record:
    """One dbt invocation's statements and results (module docstring)."""

    command: str
    master: list[dict[str, Any]]  # statements outside any node (dbt's schema and relation listing)
    nodes: list[dict[str, Any]]  # in the order they started: their result fields and statements
    order: list[str]  # the nodes' unique ids in the order dbt gave their results

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "master": self.master, "nodes": self.nodes, "order": self.order}


@dataclass
class Stored:
    """The records the published build left (`load`), by kind ("graph", "run", "test"): (key, record)."""

    records: dict[str, tuple[str, Any]] = field(default_factory=dict)

    def get(self, kind: str, key: str) -> Any:
        found = self.records.get(kind)
        return found[1] if found is not None and found[0] == key else None


def key(state_key: str, command: str, variables: dict[str, Any] | None, select: Sequence[str] | None,
        exclude: Sequence[str], threads: int, stem: str) -> str:
    """Everything a dbt invocation's statements depend on besides the database (module docstring)."""
    parts = {
        "format": FORMAT, "state": state_key, "command": command, "vars": variables or {},
        "select": list(select) if select else None, "exclude": list(exclude), "threads": threads, "stem": stem,
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("DBT_")},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


# ---------------------------------------------------------------------------------------------------------- storage


def load(con: duckdb.DuckDBPyConnection) -> Stored:
    """The published build's records (none when the warehouse has none, or a damaged table). The table is made
    when missing, before dbt lists the relations: the build that records and the next one, which replays, then see
    the same relations."""
    con.execute(f"create table if not exists main.{TABLE} (kind VARCHAR, key VARCHAR, record BLOB)")
    out = Stored()
    try:
        for kind, k, blob in con.execute(f"select kind, key, record from main.{TABLE}").fetchall():
            out.records[str(kind)] = (str(k), json.loads(zlib.decompress(blob)))
    except (duckdb.Error, zlib.error, ValueError) as exc:
        log.debug("replay records unreadable: %s", exc)
        return Stored()
    return out


def store(con: duckdb.DuckDBPyConnection, records: dict[str, tuple[str, Any]], stored: Stored | None = None) -> None:
    """Keep the publishing build's records in place of the last ones (call inside the publish transaction); nothing
    to write when they are the ones `load` read (`stored`), as a build that replayed all it ran has: packing them
    again cost 0.01-0.02 s, and their table's rows at the checkpoint."""
    if stored is not None and records.keys() == stored.records.keys() and all(
            stored.records[kind][0] == k and stored.records[kind][1] is made for kind, (k, made) in records.items()):
        return
    con.execute(f"create table if not exists main.{TABLE} (kind VARCHAR, key VARCHAR, record BLOB)")
    con.execute(f"delete from main.{TABLE}")
    for kind, (k, record) in sorted(records.items()):
        con.execute(f"insert into main.{TABLE} values (?, ?, ?)", [kind, k, _packed(record)])


def _packed(record: Any) -> bytes:
    return zlib.compress(json.dumps(record, separators=(",", ":")).encode(), 6)


# The machine's records (`keep`, `kept`): a published build's dbt run and test records are also kept in the user's
# cache folder, beside dbt's parsed manifests (`dbt_runner.cache_dir`), by their key. The key holds everything a
# record's statements depend on besides the database (`key`: the project's digest and versions, the vars with the
# kept set, the warehouse file's stem ...), and what dbt read of the database is checked at replay as for a record
# the warehouse holds; so the first incremental build of a warehouse replays what dbt did in an earlier build of the
# same shape on this machine (another warehouse's, or this one's before a --full-refresh), rather than paying dbt.
# A whole build's records are kept (and looked up) only on a warehouse that never published (`Session.machine`): a
# whole build over published relations (`--full-refresh`, a changed project) has a fresh warehouse's first build's key
# but dbt lists other relations, so its record, kept, would replace the one every fresh first build replays with one
# whose replay stops at dbt's first look-up. `MAFIABENCH_REPLAY_CACHE=0` turns it off (the test suite does but in
# tests/transform and tests/quality, so that elsewhere each test's builds run dbt or replay the warehouse's own
# record whatever ran before it).
CACHE = "dbt-replays"
CACHE_KEPT = 64  # the most recently used records kept (a run's ~60 KB, a test's ~25 KB packed)
_CACHED_KINDS = ("run", "test")


def _cache_on() -> bool:
    return os.environ.get("MAFIABENCH_REPLAY_CACHE", "1") != "0"


def _cache_file(kind: str, k: str) -> Path:
    return dbt_runner.cache_dir(CACHE) / f"{kind}-{k}.json.z"


def kept(kind: str, k: str) -> Any:
    """The machine's record of this kind and key (`keep`), or None (none kept, unreadable, or the cache is off)."""
    if not _cache_on():
        return None
    file = _cache_file(kind, k)
    try:
        found = json.loads(zlib.decompress(file.read_bytes()))
    except (OSError, zlib.error, ValueError):
        return None
    if not isinstance(found, dict) or found.get("kind") != kind or found.get("key") != k:
        return None
    with suppress(OSError):
        os.utime(file)  # kept by last use
    return found.get("record")


def keep(records: dict[str, tuple[str, Any]]) -> None:
    """Keep a published build's dbt run and test records on this machine (after the publish committed): a cache,
    so a read-only or full cache folder only costs a later build dbt's run."""
    if not _cache_on():
        return
    try:
        folder = dbt_runner.cache_dir(CACHE)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for kind, (k, record) in sorted(records.items()):
            if kind not in _CACHED_KINDS:
                continue
            file = _cache_file(kind, k)
            tmp = file.with_name(f"{file.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(_packed({"kind": kind, "key": k, "record": record}))
            os.replace(tmp, file)  # atomic: a concurrent reader sees the old record or the whole new one
        files = sorted(folder.glob("*.json.z"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[CACHE_KEPT:]:
            old.unlink(missing_ok=True)
    except OSError as exc:
        log.debug("replay records not kept on this machine: %s", exc)


# ------------------------------------------------------------------------------------------------------------ graph


class Graph:
    """What a build reads of dbt's parsed project (`dbt_runner.manifest`) to plan an increment and keep models: the
    models (name, materialization, file, `depends_on`), the sources' identifiers, and the volatile models; the
    `increment` functions read it as they read the manifest."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.nodes = {
            uid: SimpleNamespace(name=m["name"], resource_type="model", original_file_path=m["path"],
                                 config=SimpleNamespace(materialized=m["materialized"]),
                                 depends_on=SimpleNamespace(nodes=list(m["deps"]), macros=[]))
            for uid, m in data["models"].items()
        }
        self.sources = {uid: SimpleNamespace(identifier=ident) for uid, ident in data["sources"].items()}
        self.volatile = set(data["volatile"])


def graph_of(parsed: Any, volatile: set[str]) -> dict[str, Any]:
    """The `Graph` of a parsed project, as JSON, given its volatile models (`increment.volatile_models`)."""
    return {
        "models": {uid: {"name": n.name, "materialized": n.config.materialized, "path": n.original_file_path,
                         "deps": list(n.depends_on.nodes)}
                   for uid, n in parsed.nodes.items() if n.resource_type == "model"},
        "sources": {uid: s.identifier for uid, s in parsed.sources.items()},
        "volatile": sorted(volatile),
    }


# -------------------------------------------------------------------------------------------------------- recording


def _digest(description: Any, rows: Any) -> str:
    cols = [d[0] for d in description or []]
    body = repr(rows) if not isinstance(rows, list) else repr(sorted(map(repr, rows)))  # dbt keeps sets of rows
    return hashlib.sha256(repr((cols, body)).encode()).hexdigest()


class _Recorder:
    """Hears every statement dbt-duckdb sends through its cursors while dbt runs (its cursor class, patched for the
    invocation only; dbt runs hold `dbt_runner`'s lock), each with its node (dbt's node context of the thread) and,
    when dbt reads its result, a digest of the rows."""

    def __init__(self) -> None:
        self.master: list[dict[str, Any]] = []
        self.nodes: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.made: Record | None = None

    @contextmanager
    def watch(self) -> Iterator[None]:
        from dbt.adapters.duckdb.environments.local import DuckDBCursorWrapper as Wrapper
        from dbt_common.events.contextvars import get_node_info

        names = ("execute", "fetchall", "fetchmany", "fetchone")
        saved = {n: Wrapper.__dict__.get(n) for n in names}
        base = Wrapper.execute
        rec = self

        def execute(wrapper: Any, sql: str, bindings: Any = None) -> Any:
            entry: dict[str, Any] = {"sql": sql, "bindings": bindings}
            uid = get_node_info().get("unique_id")
            with rec.lock:
                (rec.nodes.setdefault(uid, []) if uid else rec.master).append(entry)
            wrapper.__dict__["_mb_entry"] = entry
            return base(wrapper, sql, bindings)

        def fetching(method: str) -> Callable[..., Any]:
            def fetch(wrapper: Any, *args: Any) -> Any:
                rows = getattr(wrapper._cursor, method)(*args)
                entry = wrapper.__dict__.get("_mb_entry")
                if entry is not None:
                    description = wrapper._cursor.description
                    entry["fetch"] = [method, list(args), _digest(description, rows)]
                    entry["columns"] = [d[0] for d in description or []]
                    if entry["columns"] == _TEST_RESULT:
                        entry["rows"] = len(rows)
                return rows

            return fetch

        Wrapper.execute = execute  # type: ignore[method-assign]
        for method in names[1:]:
            setattr(Wrapper, method, fetching(method))
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    delattr(Wrapper, name)
                else:
                    setattr(Wrapper, name, value)

    def finish(self, command: str, results: Sequence[Any], parsed: Any) -> None:
        """Make the invocation's `Record` (`made`), or none (logged) when it may not be replayed (module docstring)."""
        try:
            self.made = self._record(command, results, parsed)
        except _Refused as exc:
            log.debug("dbt %s not recorded for replay: %s", command, exc)

    def _record(self, command: str, results: Sequence[Any], parsed: Any) -> Record:
        from dbt_common.invocation import get_invocation_id

        invocation = get_invocation_id()
        first = {uid: i for i, uid in enumerate(self.nodes)}  # dicts keep the order each node first executed
        by_uid = {r.node.unique_id: r for r in results}
        if set(self.nodes) - set(by_uid):
            raise _Refused(f"statements of nodes without a result: {sorted(set(self.nodes) - set(by_uid))}")
        known: dict[str, bool] = {}
        nodes = []
        for uid in sorted(by_uid, key=lambda u: first.get(u, len(first))):
            r = by_uid[uid]
            node = r.node
            kind = "test" if node.resource_type == "test" else "model"
            materialized = getattr(node.config, "materialized", None)
            if materialized not in REVIEWED:
                raise _Refused(f"{node.name}: materialization {materialized}")
            if increment.volatile(parsed, node, known):
                raise _Refused(f"{node.name} is volatile")
            statements = self.nodes.get(uid, [])
            if not statements:
                raise _Refused(f"{node.name} executed nothing")
            entry: dict[str, Any] = {
                "uid": uid, "name": node.name, "kind": kind, "materialized": materialized,
                # the nodes of this invocation it waits for (dbt's `depends_on`): the replay runs the others beside
                "after": sorted(d for d in node.depends_on.nodes if d in by_uid and d != uid),
                "relation": getattr(node, "alias", None), "path": node.original_file_path,
                "compiled_sql": getattr(node, "compiled_code", None), "description": node.description or "",
                "statements": statements,
            }
            if kind == "model":
                if str(r.status) != "success":
                    raise _Refused(f"{node.name}: {r.status}")
                entry["message"] = r.message
            else:
                if str(r.status) not in ("pass", "fail", "warn") or getattr(node.config, "store_failures", False):
                    raise _Refused(f"{node.name}: {r.status}, store_failures {node.config.store_failures}")
                if [s.get("columns") == _TEST_RESULT and s.get("rows") == 1 for s in statements].count(True) != 1:
                    raise _Refused(f"{node.name}: not one result statement")
                entry["test"] = {"severity": str(node.config.severity), "warn_if": str(node.config.warn_if),
                                 "error_if": str(node.config.error_if)}
            nodes.append(entry)
        for s in [*self.master, *(s for n in nodes for s in n["statements"])]:
            self._check(s, invocation)
            s.pop("rows", None)
            if s.get("columns") != _TEST_RESULT:
                s.pop("columns", None)
        if command == "test" and any(s["sql"] not in _TRANSACTION and "fetch" not in s for s in self.master):
            raise _Refused("dbt test wrote outside its nodes")
        return Record(command, self.master, nodes, [r.node.unique_id for r in results])

    @staticmethod
    def _check(statement: dict[str, Any], invocation: str) -> None:
        sql = statement["sql"]
        if sql in _TRANSACTION:
            return
        try:
            json.dumps(statement["bindings"])
        except (TypeError, ValueError) as exc:
            raise _Refused(f"bindings {statement['bindings']!r}") from exc
        if invocation and invocation in sql:
            raise _Refused("a statement carries dbt's invocation id")
        body = _LEXEMES.sub(_blank, sql)  # no comments, no string literals: what is left is statements
        if _OWN_TRANSACTION.search(body):
            raise _Refused(f"a statement of its own transaction: {sql[:200]}")
        for part in filter(None, (p.strip() for p in body.split(";"))):
            kind = part.split(None, 1)[0].lower()
            if kind not in _STATEMENT_KINDS or (kind == "create" and re.match(r"create\s+schema\b", part, re.I)
                                                and not re.match(r"create\s+schema\s+if\s+not\s+exists\b",
                                                                 part, re.I)):
                raise _Refused(f"a statement of another kind: {part[:200]}")
        writes = sorted({_last_name(m) for m in _WRITES.findall(body)})
        if any(not name.startswith(dbt_runner.STAGED_PREFIX) for name in writes):
            raise _Refused(f"a statement writes a relation that is not staged: {writes}")
        if writes:
            statement["writes"] = writes


class _Refused(Exception):
    pass


def _blank(found: re.Match[str]) -> str:
    """Comments as a space and string literals as '' (quoted names stay)."""
    text = found.group(0)
    return text if text.startswith('"') else "''" if text.startswith("'") else " "


def _last_name(dotted: str) -> str:
    """A relation's own name from its (possibly qualified, possibly quoted) name."""
    return re.findall(_NAME, dotted)[-1].strip('"')


# ---------------------------------------------------------------------------------------------------------- replay


def _test_status(test: dict[str, Any], failures: int, should_warn: bool, should_error: bool) -> tuple[str, str | None]:
    """A data test's status and message from its query's row, as dbt's `TestRunner.build_test_run_result` makes them
    (dbt is run without --warn-error)."""
    count = f"{failures} result{'' if failures == 1 else 's'}"
    if test["severity"].upper() == "ERROR" and should_error:
        return "fail", f"Got {count}, configured to fail if {test['error_if']}"
    if should_warn:
        return "warn", f"Got {count}, configured to warn if {test['warn_if']}"
    return "pass", None


def replay(con: duckdb.DuckDBPyConnection, record: dict[str, Any],
           on_model: Callable[[str, int], None] | None = None, threads: int = 1) -> list[NodeResult]:
    """Execute a record's statements on DuckDB and give the `NodeResult`s dbt would (with this run's seconds and,
    for tests, statuses). A `dbt run` writes only staged relations (checked when recorded), none that was there when
    the replay began (checked first), each node in a transaction of its own as dbt does (one for them all would hold
    every node's garbage until the end: 2.1 GB at a million games, against dbt's 1.3). As dbt, the nodes run on
    `threads` cursors, each once the nodes it depends on finished (in the record's order among those ready: the
    order dbt started them). On any error (`ReplayMismatch` among them) or interrupt, no node starts, those running
    finish or fail, a failed node's transaction is rolled back, what the others staged is dropped, and the first
    error is raised."""
    writes = record["command"] == "run"
    models = sum(1 for n in record["nodes"] if n["kind"] == "model")
    out: dict[str, NodeResult] = {}
    lead = con.cursor()
    cursors = threading.local()
    opened: list[duckdb.DuckDBPyConnection] = []
    lock = threading.Lock()

    def cursor() -> duckdb.DuckDBPyConnection:
        if not hasattr(cursors, "cur"):
            cursors.cur = con.cursor()
            with lock:
                opened.append(cursors.cur)
        return cursors.cur  # type: ignore[no-any-return]

    def run_node(node: dict[str, Any]) -> NodeResult:
        cur = cursor()
        t0 = time.perf_counter()
        row = None
        with _transaction(cur) if writes else nullcontext():
            for statement in node["statements"]:
                got = _execute(cur, statement)
                if got is not None:
                    row = got
        seconds = time.perf_counter() - t0
        if node["kind"] == "model":
            return _result(node, "success", seconds, node.get("message"), None)
        if row is None:
            raise ReplayMismatch(f"{node['name']}: no result row")
        failures, should_warn, should_error = int(row[0]), bool(row[1]), bool(row[2])
        status, message = _test_status(node["test"], failures, should_warn, should_error)
        return _result(node, status, seconds, message, 0 if status == "pass" else failures)

    before = _staged(lead) if writes else set()
    try:
        clash = sorted(before & {w for n in record["nodes"] for s in n["statements"] for w in s.get("writes", ())})
        if clash:
            raise ReplayMismatch(f"relations the replay would write are there already: {clash}")
        if writes:
            with _transaction(lead):
                for statement in record["master"]:
                    _execute(lead, statement)
        for node, result in _in_dependency_order(record["nodes"], run_node, max(1, threads)):
            out[node["uid"]] = result
            if node["kind"] == "model" and on_model is not None:
                on_model(node["name"], models)
    except BaseException:
        if writes:
            _undo(lead, before)
        raise
    finally:
        for cur in [lead, *opened]:
            cur.close()
    return [out[uid] for uid in record["order"]]


def _in_dependency_order(nodes: list[dict[str, Any]], run: Callable[[dict[str, Any]], NodeResult],
                         threads: int) -> Iterator[tuple[dict[str, Any], NodeResult]]:
    """Run each node on one of `threads` threads once the nodes it waits for (`after`) finished, the ready ones in
    the given order; yield each node and its result as it finishes. A record without `after` runs in its order,
    one node after the other. On an error or interrupt, nothing more starts and what runs is waited for before the
    first error is raised."""
    if threads == 1 or any("after" not in n for n in nodes):
        for node in nodes:
            yield node, run(node)
        return
    known = {n["uid"] for n in nodes}
    waits = {n["uid"]: {d for d in n["after"] if d in known} for n in nodes}
    done: set[str] = set()
    pending = list(nodes)
    running: dict[Future[NodeResult], dict[str, Any]] = {}
    with ThreadPoolExecutor(threads, thread_name_prefix="replay") as pool:
        try:
            while pending or running:
                for node in [n for n in pending if waits[n["uid"]] <= done][:threads - len(running)]:
                    pending.remove(node)
                    running[pool.submit(run, node)] = node
                if not running:
                    raise ReplayMismatch(f"nodes wait for nodes that never run: {[n['name'] for n in pending]}")
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in [f for f in running if f in finished]:  # in the order they were started
                    node = running.pop(future)
                    result = future.result()
                    done.add(node["uid"])
                    yield node, result
        except BaseException:
            pending.clear()
            wait(running)
            raise


def _staged(cur: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in cur.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and starts_with(table_name, ?) "
        "union all select view_name from duckdb_views() where schema_name = 'main' and starts_with(view_name, ?)",
        [dbt_runner.STAGED_PREFIX, dbt_runner.STAGED_PREFIX]).fetchall()}


@contextmanager
def _transaction(cur: duckdb.DuckDBPyConnection) -> Iterator[None]:
    cur.execute("begin transaction")
    try:
        yield
    except BaseException:
        try:
            cur.execute("rollback")
        except duckdb.Error as exc:  # DuckDB may have ended it already
            log.debug("replay rollback: %s", exc)
        raise
    cur.execute("commit")


def _undo(cur: duckdb.DuckDBPyConnection, before: set[str]) -> None:
    """Drop what a stopped replay staged (every staged relation that was not there when it began)."""
    for name in sorted(_staged(cur) - before):
        kind = cur.execute("select 'view' from duckdb_views() where schema_name = 'main' and view_name = ?",
                           [name]).fetchall()
        cur.execute(f'drop {"view" if kind else "table"} if exists main."{name}"')


def _execute(cur: duckdb.DuckDBPyConnection, statement: dict[str, Any]) -> tuple[Any, ...] | None:
    """Run one recorded statement; check what dbt read of its result. A test's result row is returned."""
    sql = statement["sql"]
    if sql in _TRANSACTION:
        return None
    if statement.get("bindings") is None:
        cur.execute(sql)
    else:
        cur.execute(sql, statement["bindings"])
    fetched = statement.get("fetch")
    if fetched is None:
        return None
    method, args, digest = fetched
    rows = getattr(cur, method)(*args)
    if statement.get("columns") == _TEST_RESULT:
        if not isinstance(rows, list) or len(rows) != 1:
            raise ReplayMismatch(f"a test's result of {0 if not rows else len(rows)} rows")
        return tuple(rows[0])
    if _digest(cur.description, rows) != digest:
        raise ReplayMismatch(f"another answer than dbt had to: {_COMMENT.sub('', sql).strip()[:200]}")
    return None


def _result(node: dict[str, Any], status: str, seconds: float, message: str | None,
            failures: int | None) -> NodeResult:
    return NodeResult(name=node["name"], kind=node["kind"], status=status, seconds=seconds, message=message,
                      materialized=node["materialized"], relation=node["relation"], path=node["path"],
                      failures=failures, compiled_sql=node["compiled_sql"], description=node["description"])


# ------------------------------------------------------------------------------------------------------ entry point


@dataclass
class Session:
    """A build's replay state: the records the published build left (`load`), whether this build may replay, and
    what it records for the next (`records`, stored by `marts.publish`), and which commands it replayed."""

    stored: Stored
    state_key: str | None  # None: a partial build, which neither records nor replays
    allowed: bool  # False with --full-refresh
    machine: bool = True  # whether its records are of a shape the machine keeps (set by `marts.stage`)
    records: dict[str, tuple[str, Any]] = field(default_factory=dict)
    replayed: list[str] = field(default_factory=list)

    def graph(self) -> Graph | None:
        """The recorded graph of this build's project, when the published build recorded it and may be trusted."""
        if not self.allowed or self.state_key is None:
            return None
        data = self.stored.get("graph", self.state_key)
        return Graph(data) if data is not None else None

    def keep_graph(self, parsed: Any, volatile: set[str]) -> None:
        if self.state_key is not None:
            data = parsed.data if isinstance(parsed, Graph) else graph_of(parsed, volatile)
            self.records["graph"] = (self.state_key, data)

    def run(self, con: duckdb.DuckDBPyConnection, command: str, *, project: Path,
            select: Sequence[str] | None = None, variables: dict[str, Any] | None = None,
            on_model: Callable[[str, int], None] | None = None, exclude: Sequence[str] = ()) -> list[NodeResult]:
        """`dbt_runner.run`, replayed when a record of the same key exists (and falling back to dbt when the replay
        stops), recorded otherwise."""
        if self.state_key is None:
            return dbt_runner.run(con, command, project=project, select=select, variables=variables,
                                  on_model=on_model, exclude=exclude)
        threads = dbt_runner.threads_for(con, variables)
        k = key(self.state_key, command, variables, select, exclude, threads, dbt_runner.warehouse_file(con).stem)
        found = (self.stored.get(command, k) or (kept(command, k) if self.machine else None)) if self.allowed \
            else None
        if found is not None:
            try:
                results = replay(con, found, on_model, threads)
            except (duckdb.Error, ReplayMismatch) as exc:
                log.info("replay of dbt %s stopped, running dbt: %s", command, exc)
            else:  # a record from before its vars were kept gains them (`rehearsal.due`), once
                self.records[command] = (k, found if "vars" in found else {**found, "vars": variables or {}})
                self.replayed.append(command)
                return results
        recorder = _Recorder()
        results = dbt_runner.run(con, command, project=project, select=select, variables=variables,
                                 on_model=on_model, exclude=exclude, recorder=recorder)
        made = recorder.made
        if made is not None:  # with its vars, which the key hashes (`rehearsal.due` reads whether it was an increment)
            self.records[command] = (k, {**made.to_json(), "vars": variables or {}})
        return results
