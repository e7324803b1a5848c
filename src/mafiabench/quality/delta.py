"""The gate's suites over the raw tables in an incremental build: proven on the increment's rows, with the verdict,
counts and rows the whole suite gives.

A scheduled study adds 1% of games to a warehouse of a million, and the suites over the raw tables scanned every
landed row again (raw_players alone 1.3 s of the replayed increment's 6.5 s). A suite is instead proven from the
increment when the build is incremental, the published build passed its gate, and that build vouched for the raw
tables (`published_gate`: its results in `validation_results`, the rows of each table a game record lands in as it
read them, recorded at publish by this gate's code, `gate_digest`):

- **the tables.** Each raw table the suite reads must hold the published build's rows P, less R, the rows of the
  increment's games among them, and the rows D of the increment's games, no others: its rows now (DuckDB keeps a
  table's count) equal its rows at the published build, less the rows the lander deleted since
  (`warehouse.raw.deleted_rows`: a replaced game's earlier rows, so R, when the increment replaces games; none is
  taken when it only adds games), plus D's (a count over the increment's game ids). So nothing was added or removed
  outside the increment's games; that nothing was edited in place is the incremental build's own assumption
  (transform.build.increment: the landing step replaces a game's rows whole, under a new `landed_at`, which puts the
  game in the increment). A game removed outside the lander breaks the sum, and the suites over its tables run whole;
  the lander counts only the deletes of rows P held (a record the published fct_games holds), so a game replaced
  twice since, or landed and replaced since, is taken away once, or not at all. P - R being rows of P, every argument
  below holds of P - R + D as of P + D, but a count that adds D's to P's (`Form.adds`), which R's rows are in: such a
  suite runs whole in an increment that replaces games.
- **a table's rows** (a `select:` suite without `where:`, `Suite.table`, over a table keyed by game): a row-level
  check's unexpected rows in P + D are its unexpected rows in D, P's being none; a uniqueness check whose key holds
  `game_id` never compares a row of D with one of P (a game is in the increment or not), so P + D is unique when D
  is. The suite runs on D; its rows are P's count plus D's. Any other check (another key, a row count) is not proven.
- **a `sql:` suite** with a proof of its own (`FORMS`), pinned to the SQL it was proved for (its digest: an edited
  query runs whole until proved again; tests/quality/test_gate_increment_forms.py says so).

The published results must hold the suite with the same checks (expectation, arguments, rule), every one passed.
Only a pass is proven: any unexpected row in the increment, an error, a count that does not add up, and the suite
runs whole, so a failing verdict, its counts and its failing rows are the whole suite's. At a million games with
10,000 added (load 3-6): the suites' summed time 2.8-7.6 s -> 1.2-3.1 s, the raw ones' proofs mostly counting the
increment's rows of raw_events (0.15 s alone). The increment's rows of a raw table are read from its tail where the
build found them all there (`warehouse.builds.increment_tails`, which says why and checks the sum above on the tail):
raw_events' count 0.15 s -> 1 ms.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from mafiabench.quality.expectations import ExpectationResult, SqlSuite, expectation_type
from mafiabench.quality.suites import Check, Suite
from mafiabench.warehouse.builds import GRAIN_ROWS_TABLE
from mafiabench.warehouse.raw import GRAIN_TABLES


@functools.cache
def gate_digest() -> str:
    """The gate code's digest (the compiler of the checks, the suites' reader, these proofs): results recorded by
    other code are not reused."""
    here = Path(__file__).parent
    text = b"".join((here / name).read_bytes() for name in ("expectations.py", "suites.py", "delta.py"))
    return hashlib.sha256(text).hexdigest()[:32]


def query_digest(query: str) -> str:
    """A suite's SQL as proved (white space aside)."""
    return hashlib.sha256(" ".join(query.split()).encode()).hexdigest()


# The checks a table's rows are proven on by their increment's rows (module docstring).
ROW_LEVEL = frozenset({"ExpectColumnValuesToNotBeNull", "ExpectColumnValuesToBeInSet", "ExpectColumnValuesToBeBetween",
                       "ExpectColumnValuesToNotMatchRegex"})


def provable(check: Check) -> bool:
    if check.expectation in ROW_LEVEL:
        return True
    if check.expectation == "ExpectColumnValuesToBeUnique":
        return bool(check.kwargs.get("column") == "game_id")
    if check.expectation == "ExpectCompoundColumnsToBeUnique":
        return "game_id" in check.kwargs.get("column_list", ())
    return False


@dataclass(frozen=True)
class Form:
    """How a `sql:` suite is proven from an increment: the digest of its SQL (`query_digest`), the raw tables it reads
    (each must hold P + D), the other sources it reads (each unchanged: its fingerprint is the published build's),
    and `narrow(query, games, tails)`, its query narrowed to what the increment's games (`games`, a table of their
    ids; `tails`: the first row of each raw table whose increment rows are all from there on, `IncrementGate.tails`)
    can change, whose rows are the whole query's when the published build's were none (or, with `adds`, the rows the
    increment adds to the published build's, every check a row-level one); or None: the whole query's rows are the
    published build's."""

    sha: str
    reads: tuple[str, ...]
    unchanged: tuple[str, ...] = ()
    narrow: Callable[[str, str, Mapping[str, int] | None], str | None] | None = None
    adds: bool = False


# copied_games: a game copied under another id, found in groups of games of one (variant, seed). A group of games
# none of which is in the increment is a group of the published build's games, whose rows (seeds, seats, event logs)
# are the published ones: it was found there, and the published build passed. So every copy is in a group holding an
# increment game, and narrowing the first step to the (variant, seed) of the increment's games (the later steps only
# group within it) finds every copy the whole query finds.
_REPEATED = "select variant, seed from raw_games where seed is not null group by all having count(*) > 1"


def _increment_rows(table: str, games: str, tails: Mapping[str, int] | None) -> str:
    """The condition a raw table's rows of the increment's games meet: in the table's tail, where they all are (the
    row groups before it skipped)."""
    tail = f"rowid >= {int(tails[table])} and " if tails and table in tails else ""
    return f"{tail}game_id in (select game_id from main.{games})"


def _narrow_copies(query: str, games: str, tails: Mapping[str, int] | None = None) -> str | None:
    if query.count(_REPEATED) != 1:
        return None
    return query.replace(_REPEATED, (
        "select g.variant, g.seed from raw_games g semi join (select variant, seed from raw_games "
        f"where seed is not null and {_increment_rows('raw_games', games, tails)}) d "
        "on d.variant is not distinct from g.variant and d.seed = g.seed "
        "where g.seed is not null group by all having count(*) > 1"))


# belief_sums: a distribution's sum, grouped by game (and seq, player): a group's rows are one game's, so the groups
# of the increment's games are summed from D alone, and the others are the published build's, which passed.
_BELIEF_GROUPS = "from raw_beliefs group by game_id, seq, player"


def _narrow_beliefs(query: str, games: str, tails: Mapping[str, int] | None = None) -> str | None:
    if query.count(_BELIEF_GROUPS) != 1:
        return None
    return query.replace(_BELIEF_GROUPS, f"from raw_beliefs where {_increment_rows('raw_beliefs', games, tails)} "
                                         "group by game_id, seq, player")


FORMS: dict[str, Form] = {
    "belief_sums": Form(
        "08c7b51e18c44d7595fd1af523417bd1c4cd45a00783efdb0740f643650a8e43", ("raw_beliefs",),
        narrow=_narrow_beliefs, adds=True),
    # Rows of the four tables whose game is not landed. A row of D belongs to an increment game, which the increment
    # has landed (added, or replaced by the lander: a game removed from raw_games breaks its sum); a row of P - R
    # belonged to a game P's raw_games held (the published build passed) outside the increment, which raw_games
    # still holds. So there are none, as at the published build.
    "orphan_rows": Form(
        "6f74a35a9e9d6716a2d0d746a5b93658acbf57c5c18708fdaca776b2f73d4f54",
        ("raw_games", "raw_players", "raw_events", "raw_model_calls", "raw_beliefs")),
    "copied_games": Form(
        "e5c22e2d687482761ada43cfaa6b0b6e03a488241da694ec4b9f9c05c4e810d7",
        ("raw_games", "raw_players", "raw_events"), narrow=_narrow_copies),
    # The detections are the published build's (their fingerprint); each row's values are its own but `orphan`, which
    # asks whether raw_games holds its game: raw_games (P - R + D) holds every game it held (a replaced one landed
    # again, a removed one breaking the sum), so no detection that belonged to a landed game stops belonging. Every
    # check holds of the same rows as before, their count the same.
    "raw_detections": Form(
        "bc580edc9f9e15f7bc4b7866e9ea132eeb6ef348f8e9ad9b4a21e793911c640c", ("raw_games",),
        unchanged=("raw_detections",)),
}


@dataclass(frozen=True)
class PublishedGate:
    """What the published build's gate vouched for: its id, the rows of each table a game record lands in as it
    read them, and its results by suite: (expectation, rule, arguments as JSON, success, rows, unexpected)."""

    build_id: str
    rows: dict[str, int]
    results: dict[str, list[tuple[str, str, str, bool, int, int]]]


def published_gate(con: duckdb.DuckDBPyConnection) -> PublishedGate | None:
    """The published build's gate, when it vouched for the raw tables: the latest published build of `build_runs`,
    whose raw tables' rows this gate's code recorded at publish (`warehouse.builds.GRAIN_ROWS_TABLE`); else None."""
    present = {r[0] for r in con.execute(
        "select table_name from duckdb_tables() where schema_name = 'main' and not temporary").fetchall()}
    if not {GRAIN_ROWS_TABLE, "build_runs", "validation_results"} <= present:
        return None
    latest = con.execute("select build_id, status from build_runs where published "
                         "order by started_at desc, finished_at desc limit 1").fetchall()
    recorded = con.execute(f"select build_id, gate, source, n_rows from main.{GRAIN_ROWS_TABLE}").fetchall()
    if not latest or latest[0][1] != "passed" or not recorded \
            or {(b, g) for b, g, _, _ in recorded} != {(latest[0][0], gate_digest())}:
        return None
    build_id = str(latest[0][0])
    results: dict[str, list[tuple[str, str, str, bool, int, int]]] = {}
    for suite, *row in con.execute(
            "select suite, expectation, rule, kwargs_json, success, element_count, unexpected_count "
            "from validation_results where build_id = ?", [build_id]).fetchall():
        results.setdefault(suite, []).append(tuple(row))  # type: ignore[arg-type]
    return PublishedGate(build_id, {str(s): int(n) for _, _, s, n in recorded}, results)


@dataclass
class IncrementGate:
    """Proves suites from an increment (module docstring) for the gate's threads, each with its own cursor; counts
    each raw table's increment rows once. `games`: the table of the increment's game ids (an increment that only
    adds games); `unchanged`: the sources not keyed by game whose content is the published build's."""

    published: PublishedGate
    games: str
    unchanged: set[str]
    # The raw tables whose increment rows are all in their tail (`warehouse.builds.increment_tails`): the first row
    # of the tail and the increment's rows in it, which `_rows` takes as the increment's rows of the table and a
    # table's suite reads (the row groups before the tail skipped).
    tails: dict[str, tuple[int, int]] = field(default_factory=dict)
    # An increment that replaces published games: the rows the lander deleted from each raw table since the
    # published build (`warehouse.raw.deleted_rows`), which `_rows` takes away; the forms that add the increment's
    # rows to the published count (`Form.adds`) are not proven, the replaced games' rows being in that count.
    replaces: bool = False
    deleted: dict[str, int] = field(default_factory=dict)
    proven: list[str] = field(default_factory=list)  # the suites proven from the increment, as they finished
    _added: dict[str, int] = field(default_factory=dict)
    _first: dict[str, int] = field(default_factory=dict)  # each tail's first row
    _locks: dict[str, threading.Lock] = field(default_factory=lambda: {t: threading.Lock() for t in GRAIN_TABLES})

    def __post_init__(self) -> None:
        self._added.update({table: added for table, (_, added) in self.tails.items()})
        self._first.update({table: first for table, (first, _) in self.tails.items()})

    def run(self, cur: duckdb.DuckDBPyConnection, suite: Suite) -> list[ExpectationResult] | None:
        """The suite's results, proven from the increment; None: run it whole."""
        before = self.published.results.get(suite.name)
        if not before or not self._same_checks(suite, before):
            return None
        try:
            if suite.table in GRAIN_TABLES:
                out = self._table(cur, suite, suite.table, before)
            elif suite.name in FORMS:
                out = self._form(cur, suite, FORMS[suite.name], before)
            else:
                return None
        except duckdb.Error:
            return None
        if out is not None:
            self.proven.append(suite.name)
        return out

    @staticmethod
    def _same_checks(suite: Suite, before: list[tuple[str, str, str, bool, int, int]]) -> bool:
        now = sorted((expectation_type(c.expectation), c.rule, json.dumps(c.kwargs, sort_keys=True))
                     for c in suite.checks)
        return now == sorted(r[:3] for r in before) and all(r[3] and r[5] == 0 for r in before)

    def _rows(self, cur: duckdb.DuckDBPyConnection, table: str, added: int | None = None) -> int | None:
        """The table's rows now if they are the published build's, less those the lander deleted since, plus the
        increment's (`added`, when the caller counted them), else None."""
        if table not in self.published.rows:
            return None
        with self._locks[table]:
            if table not in self._added:
                self._added[table] = added if added is not None else int(cur.execute(
                    f'select count(*) from main."{table}" where game_id in (select game_id from main.{self.games})'
                ).fetchall()[0][0])
        now = int(cur.execute(f'select count(*) from main."{table}"').fetchall()[0][0])
        return now if now == self.published.rows[table] - self.deleted.get(table, 0) + self._added[table] else None

    def _table(self, cur: duckdb.DuckDBPyConnection, suite: Suite, table: str,
               before: list[tuple[str, str, str, bool, int, int]]) -> list[ExpectationResult] | None:
        if not all(provable(c) for c in suite.checks) or {r[4] for r in before} != {self.published.rows.get(table)}:
            return None
        delta = Suite(suite.name, f"{suite.query} where {_increment_rows(table, self.games, self._first)}",
                      suite.checks)
        results = SqlSuite(cur, delta).run()
        if not results or not all(r.success and r.unexpected_count == 0 for r in results):
            return None
        now = self._rows(cur, table, results[0].element_count)
        return None if now is None else [dataclasses.replace(r, element_count=now) for r in results]

    def _form(self, cur: duckdb.DuckDBPyConnection, suite: Suite, form: Form,
              before: list[tuple[str, str, str, bool, int, int]]) -> list[ExpectationResult] | None:
        if query_digest(suite.query) != form.sha or not set(form.unchanged) <= self.unchanged \
                or (form.adds and self.replaces):
            return None
        if any(self._rows(cur, table) is None for table in form.reads):
            return None
        if form.narrow is None:
            counts = {r[4] for r in before}
            if len(counts) != 1:
                return None
            (count,) = counts
            return [ExpectationResult(suite.name, expectation_type(c.expectation), c.rule, dict(c.kwargs), True,
                                      count, 0, []) for c in suite.checks]
        query = form.narrow(suite.query, self.games, self._first)
        if query is None or (form.adds and not all(c.expectation in ROW_LEVEL for c in suite.checks)):
            return None
        results = SqlSuite(cur, Suite(suite.name, query, suite.checks)).run()
        if not results or not all(r.success and r.unexpected_count == 0 for r in results):
            return None
        if not form.adds:
            return results
        counts = {r[4] for r in before}
        if len(counts) != 1:
            return None
        (count,) = counts
        return [dataclasses.replace(r, element_count=count + r.element_count) for r in results]
