"""Rehearse the next build's dbt on an empty copy of the warehouse, so that the build replays it (`replay`).

A build replays dbt's statements when a record of the same key is at hand: the published build's, kept in the
warehouse, or one this machine kept (`replay.kept`). The first increment after a whole build has neither on a machine
that never built one of that shape: its key (the kept models, the increment's vars) is not the whole build's, and dbt
runs, about 4 s more than a replay whatever the warehouse's size (dbt's import and its Python per model: a million
games' first increment 6.9-7.1 s against 3.1-3.4 s replayed). A run knows that build is coming while its games play,
and a record does not depend on the data, only on the relations dbt lists and the columns it describes (what dbt read
of the database is checked again at every replay). So a run rehearses it (`study.run`), beside its games:

- `export`, in the run's process under its warehouse lock (a few tenths of a second): every table's and view's DDL,
  the state a build plans from (`COPIED`: the published build's records, state, sources and gate rows), and the rows
  of the games landed since the published build (the increment so far), into a scratch folder;
- `rehearse`, in a process of its own (dbt's Python would share the run's interpreter), on the CPU the run leaves
  idle (`_behind`): a warehouse file of the same name made from them, in which the published tables are empty and
  the landed games are the increment, as in the warehouse (those it replaced published, as they were); the
  build's own `stage` (dbt's run) and `data_tests` (dbt's test) on it, with dbt's threads the warehouse's; then the
  records, kept on this machine (`replay.keep`). Nothing is published, and the scratch folder is removed.

The build after the run plans its increment on the warehouse itself; when its key is the rehearsal's (the same
changed sources: the rehearsal saw the games landed by then, and the sources the run had changed), it replays the
rehearsed record, checked against the warehouse as any record is; otherwise dbt runs, as without the rehearsal. A
rehearsal costs CPU, never correctness: it runs only when this machine keeps records (`MAFIABENCH_REPLAY_CACHE`) and
the warehouse's published build was a whole one an increment can add to (after an increment, the warehouse's own
record serves the next increment of the same shape: `due`); when a record of its key is at hand already it replays
it on the copy and keeps nothing new.

A published whole build rehearses its first increment as well (`after_build`, from `publish.build`), in a process that
outlives the build, with stand-ins for the next games. What a record's key holds of an increment is its shape (which
raw tables its games have rows in, which other sources changed, and so the kept models), not its rows, so one game
can stand for many. The shapes are rehearsed one after the other: the next run of the last run's experiment (its
last game, with a row more in `raw_runs` and `raw_landed_files` and its protocol card landed again: `_as_a_run`), so
a run whose games keep both cores busy, and leave its own rehearsal no CPU, replays dbt all the same; and games landed
without a run (an `import`, games landed by hand) like the last one landed. When that experiment holds games landed
failed, its next run plays them again and the lander replaces them: an increment that replaces published games,
whose key is another (`increment_replaces`), so that shape is rehearsed first (`REPLAYING`: the same stand-in, its
game published with an earlier landing, and a failed attempt's model call moved to `raw_replaced_calls` when the
failed games made calls). A run's own rehearsal copies the published rows of the games it replaced the same way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.transform.build import dbt_runner, increment, replay
from mafiabench.warehouse.builds import GRAIN_ROWS_TABLE
from mafiabench.warehouse.raw import GRAIN_TABLES, REPLACED_CALLS

log = logging.getLogger(__name__)

SPEC = "rehearsal.json"
# The shapes of increment a rehearsal records for: the games landed (a run's own, or a stand-in for games landed
# without a run: an import, games landed by hand), and a stand-in for the next run of the last run's experiment.
AS_LANDED, NEXT_RUN = "as landed", "next run"
# The next run of an experiment that holds games landed failed: it plays them again, and its increment replaces them.
REPLAYING = "next run, replaying failed games"
DATA = "rehearsal_data.duckdb"  # the rows copied, in a file of another name (a catalog of its own)
# In DATA, beside the copied tables: the published fct_games rows of the games the copy's increment replaces (for a
# stand-in, its row with an earlier landing), and a failed attempt's model call the replay moves to raw_replaced_calls.
PUBLISHED_ROWS, REPLACED_CALL = "rehearsal_published_games", "rehearsal_replaced_call"
_ATTACHED = "mafiabench_rehearsal"
# The tables a build plans from, copied whole: the published build's replay records (its graph among them), its
# state, its sources' fingerprints and the sources themselves (so the same ones count as changed), the rows it read
# of each raw table and the gate's verdicts those rows rest on (`warehouse.builds.increment_tails`).
COPIED = (replay.TABLE, increment.STATE_TABLE, increment.SOURCES_TABLE, increment.GAMES_TABLE, GRAIN_ROWS_TABLE,
          "build_runs", "validation_results", *increment.FINGERPRINTED)


@dataclass
class Rehearsed:
    """What a rehearsal did: the dbt commands it recorded and kept on this machine, and those it found a record of."""

    recorded: list[str]
    replayed: list[str]
    seconds: float


def due(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a rehearsal could help the next build: this machine keeps records, the warehouse holds a published
    build an increment can add to (its state and its published games' record), and that build was not itself an
    increment, whose record the next increment of the same shape replays from the warehouse. Reads only."""
    if not replay._cache_on() or increment.published_key(con) is None:
        return False
    if len(con.execute(f"select n_rows from main.{increment.GAMES_TABLE}").fetchall()) != 1:
        return False
    return not _published_increment(con)


def _published_increment(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the published build's recorded dbt run was an increment's (its vars; a record from before they were
    kept says nothing, and a rehearsal is tried)."""
    if not con.execute("select 1 from duckdb_tables() where schema_name = 'main' and table_name = ?",
                       [replay.TABLE]).fetchall():
        return False
    found = con.execute(f"select record from main.{replay.TABLE} where kind = 'run'").fetchall()
    try:
        record = json.loads(zlib.decompress(found[0][0])) if len(found) == 1 else {}
    except (zlib.error, ValueError):
        return False
    return bool(isinstance(record, dict) and (record.get("vars") or {}).get("increment"))


def export(con: duckdb.DuckDBPyConnection, folder: Path, *, stand_in: bool = False) -> bool:
    """Write what `rehearse` needs into `folder` (made here), from the warehouse behind `con` (the caller holds it:
    no landing in between). False, writing nothing, when there is nothing to rehearse: not `due`, or no game landed
    since the published build. With `stand_in` (`after_build`), when none has, stand-ins are copied instead: the
    last game landed, for an increment landed without a run (`AS_LANDED`), and, when the warehouse holds a run, the
    last game of its experiment, for that experiment's next run (`NEXT_RUN`, rehearsed before it), which replays its
    failed games if it holds any (`REPLAYING`, rehearsed first). A game the increment replaced (or a stand-in
    replayed) has its published fct_games row copied (`PUBLISHED_ROWS`), so the copy's increment replaces it too."""
    if not due(con):
        return False
    published, bound = con.execute(f"select n_rows, bound from main.{increment.GAMES_TABLE}").fetchall()[0]
    # The games after the published ones: those `increment._added_only` finds when raw_games' rows below the bound
    # are the published games, and the games landed again since in a replacing increment (`_compared` finds both).
    increment_games = f"rowid >= {increment.first_rows_bound(con, int(published), int(bound or 0))}"
    shapes: list[list[Any]] = [[AS_LANDED, None]]
    # The published rows of the games the increment replaced (landed again since: in the increment, and published).
    replaced: str | None = f"select * from main.fct_games where game_id in (select game_id from main.raw_games " \
                           f"where {increment_games})"
    replacing = AS_LANDED
    if not con.execute(f"select count(*) from main.raw_games where {increment_games}").fetchall()[0][0]:
        if not stand_in or not published:
            return False
        shapes = _stand_ins(con)
        increment_games = f"game_id in (select unnest({_sql_list([game for _, game in shapes])}))"
        replayed = [game for shape, game in shapes if shape == REPLAYING]
        # The stand-in replayed: its published row, as of an earlier landing (the lander gives a new `landed_at`).
        replaced = f"select * replace (landed_at - interval 1 second as landed_at) from main.fct_games " \
                   f"where game_id in (select unnest({_sql_list(replayed)}))" if replayed else None
        replacing = REPLAYING
    database = con.execute("select current_database()").fetchall()[0][0]
    tables = con.execute("select table_name, sql from duckdb_tables() where database_name = ? and schema_name = 'main' "
                         "and not temporary order by table_name", [database]).fetchall()
    views = con.execute("select view_name, sql from duckdb_views() where database_name = ? and schema_name = 'main' "
                        "and not internal and not temporary order by view_name", [database]).fetchall()
    present = {name for name, _ in tables}
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / DATA
    con.execute(f"attach '{_quoted(data)}' as {_ATTACHED}")
    try:
        to = f"{_ATTACHED}.main"
        con.execute(f"create table {to}.raw_games as select * from main.raw_games where {increment_games}")
        for table in GRAIN_TABLES:
            if table != "raw_games" and table in present:
                con.execute(f'create table {to}."{table}" as select * from main."{table}" '
                            f"where game_id in (select game_id from {to}.raw_games)")
        for table in COPIED:
            if table in present:
                con.execute(f'create table {to}."{table}" as select * from main."{table}"')
        replaces = replaced is not None and "fct_games" in present and bool(
            con.execute(f"create table {to}.{PUBLISHED_ROWS} as {replaced}").fetchall()[0][0])
        run = _last_run(con) if replaces and replacing == REPLAYING else None
        if run is not None:  # a call of a failed attempt, if one made any
            con.execute(f"create table {to}.{REPLACED_CALL} as select * from main.raw_model_calls where game_id in "
                        f"(select game_id from main.raw_games where status = 'failed' and experiment = ?) limit 1",
                        [run[1]])
    finally:
        con.execute(f"detach {_ATTACHED}")
    spec = {
        "stem": dbt_runner.warehouse_file(con).stem,
        # dbt's threads are in a record's key: the warehouse's, not those of the copy's few games
        "threads": dbt_runner.threads_for(con, {"increment": True}),
        "tables": tables, "views": views,
        "shapes": shapes,  # [shape, the game standing for its increment's (None: every game copied)]
        "replacing": [replacing] if replaces else [],  # the shape whose increment replaces games, if one does
    }
    (folder / SPEC).write_text(json.dumps(spec))
    return True


def _sql_str(value: str) -> str:
    return value.replace("'", "''")


def _quoted(path: Path) -> str:
    return _sql_str(str(path))


def _sql_list(values: list[str]) -> str:
    return "[" + ", ".join(f"'{_sql_str(v)}'" for v in values) + "]"


def _last_run(con: duckdb.DuckDBPyConnection) -> tuple[str, str] | None:
    """The last run's (run_id, experiment) when games of its experiment are landed (an import records no run)."""
    found = con.execute(
        "select run_id, experiment from main.raw_runs where experiment in (select experiment from main.raw_games) "
        "order by started_at desc nulls last, run_id desc limit 1").fetchall()
    return (str(found[0][0]), str(found[0][1])) if found else None


def _stand_ins(con: duckdb.DuckDBPyConnection) -> list[list[Any]]:
    """The shapes `after_build` rehearses and the game standing for each one's increment (`export`): the last game
    landed (of the last run's experiment, for a run's shapes) that did not fail, else the last one. A failed game
    stops at its failing call and may have no rows in tables a finished game has: the increments to come (a failed
    game played again among them) are finished games mostly."""
    def last(where: str = "true", args: tuple[str, ...] = ()) -> str:
        game, status = con.execute(f"select game_id, status from main.raw_games where rowid = "
                                   f"(select max(rowid) from main.raw_games where {where})", list(args)).fetchall()[0]
        if status != "failed":  # the last row, found by its number (a million games: 2 ms, a scan 20-30 ms)
            return str(game)
        finished = con.execute(f"select arg_max(game_id, rowid) from main.raw_games where {where} "
                               "and status is distinct from 'failed'", list(args)).fetchall()[0][0]
        return str(finished if finished is not None else game)

    landed = last()
    run = _last_run(con)
    if run is None:
        return [[AS_LANDED, landed]]
    of_run = last("experiment = ?", (run[1],))
    failed = con.execute("select count(*) from main.raw_games where status = 'failed' and experiment = ?",
                         [run[1]]).fetchall()[0][0]
    return [*([[REPLAYING, of_run]] if failed else []), [NEXT_RUN, of_run], [AS_LANDED, landed]]


def _as_a_run(con: duckdb.DuckDBPyConnection) -> None:
    """Change, in the copy, what a run of the last run's experiment changes besides its games (checked on runs of
    the demo and of Strategema's offline study after a whole build): a row of `raw_runs`, one of `raw_landed_files`
    (its shard files) and, when the experiment names a reference, its card in `raw_protocol_cards` (landed again at
    every run's start). Each gets a row that differs, so each counts as changed (`increment.changed_sources`). The
    key moves with `raw_runs` and the card (models read them); `raw_landed_files`, which no model reads today, is
    changed as a run changes it so that a model that reads it later is served as well."""
    run = _last_run(con)
    if run is None:
        return
    run_id, experiment = run
    con.execute("insert into main.raw_runs select * replace (run_id || ' (rehearsed)' as run_id) from main.raw_runs "
                "where run_id = ?", [run_id])
    con.execute("insert into main.raw_landed_files select * replace (file || ' (rehearsed)' as file) "
                "from main.raw_landed_files where experiment = ? order by landed_at desc, file desc limit 1",
                [experiment])
    con.execute("update main.raw_protocol_cards set recorded_at = recorded_at + interval 1 second "
                "where experiment = ?", [experiment])


def make_copy(folder: Path, shape: str = AS_LANDED) -> Path:
    """The empty copy `export` described, for one of its `shapes`: its tables and views, the rows copied (of a
    stand-in, its game's only; for `NEXT_RUN` and `REPLAYING`, a run's other sources changed), and the published
    games' record and raw tables' rows set to none (every landed game is the increment, at the tail of its tables).
    In a shape that replaces games, the published fct_games holds their earlier rows, which the plan finds by
    comparing (the record's bound unset), and for `REPLAYING` the failed attempt's call is moved as the lander moves
    it. Its path (a copy made before in the folder is replaced)."""
    spec = json.loads((folder / SPEC).read_text())
    game = dict(spec.get("shapes") or [[AS_LANDED, None]])[shape]
    replaces = shape in (spec.get("replacing") or [])
    path = folder / f"{spec['stem']}.duckdb"
    for made in (path, path.with_name(path.name + ".wal")):
        made.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    try:
        for _, sql in spec["tables"]:
            con.execute(sql)
        _create_views(con, spec["views"])
        con.execute(f"attach '{_quoted(folder / DATA)}' as {_ATTACHED} (read_only)")
        attached = {str(t) for (t,) in con.execute("select table_name from duckdb_tables() where database_name = ?",
                                                  [_ATTACHED]).fetchall()}
        only = f" where game_id = '{_sql_str(game)}'" if game is not None else ""
        for table in sorted(attached - {PUBLISHED_ROWS, REPLACED_CALL}):
            con.execute(f'insert into main."{table}" select * from {_ATTACHED}.main."{table}"'
                        f'{only if table in GRAIN_TABLES else ""}')
        if replaces and PUBLISHED_ROWS in attached:
            con.execute(f"insert into main.fct_games select * from {_ATTACHED}.main.{PUBLISHED_ROWS}{only}")
        if shape == REPLAYING and REPLACED_CALL in attached:  # by name: older files have the added columns last
            con.execute(f"insert into main.{REPLACED_CALLS} by name select *, now()::timestamp as replaced_at, "
                        f"'rehearsed' as replaced_record_sha256 from {_ATTACHED}.main.{REPLACED_CALL}")
        con.execute(f"detach {_ATTACHED}")
        if shape in (NEXT_RUN, REPLAYING):
            _as_a_run(con)
        con.execute(f"update main.{increment.GAMES_TABLE} set n_rows = 0, marks = 0, "
                    f"bound = {'null' if replaces else 0}")
        con.execute(f"update main.{GRAIN_ROWS_TABLE} set n_rows = 0")
        con.execute("checkpoint")
    finally:
        con.close()
    return path


def _create_views(con: duckdb.DuckDBPyConnection, views: list[list[str]]) -> None:
    """Views in an order that binds (a view reading another is made after it)."""
    left = list(views)
    while left:
        failed = []
        for name, sql in left:
            try:
                con.execute(sql)
            except duckdb.CatalogException:
                failed.append([name, sql])
        if len(failed) == len(left):
            raise RuntimeError(f"views that do not bind: {[n for n, _ in failed]}")
        left = failed


def shapes(folder: Path) -> list[str]:
    """The shapes of increment `export` wrote a rehearsal of into `folder`, in the order to rehearse them."""
    return [shape for shape, _ in json.loads((folder / SPEC).read_text()).get("shapes") or [[AS_LANDED, None]]]


def rehearse(folder: Path, shape: str = AS_LANDED) -> Rehearsed:
    """In a process of its own: the copy (`make_copy`), the build's dbt run and test staged on it, and their records
    kept on this machine. The Python models are not run: their staged tables stand empty (the data tests read them)."""
    from mafiabench.transform.build import marts
    from mafiabench.transform.models import PYTHON_MODELS
    from mafiabench.warehouse.raw import connect

    t0 = time.perf_counter()
    spec = json.loads((folder / SPEC).read_text())
    os.environ["MAFIABENCH_DBT_THREADS"] = str(spec["threads"])
    con = connect(make_copy(folder, shape))
    try:
        staged = marts.stage(con, python=False, sql_only=True)
        if staged.increment is None:
            return Rehearsed([], [], time.perf_counter() - t0)
        present = {r[0] for r in con.execute("select table_name from duckdb_tables() where schema_name = 'main'")
                   .fetchall()}
        for table in sorted({t for step in PYTHON_MODELS for t in step.outputs} & present):
            con.execute(f'create table main."{marts.STAGED_PREFIX}{table}" as select * from main."{table}" where false')
        marts.data_tests(con, staged)
        fresh = {kind: record for kind, record in staged.replaying.records.items()
                 if kind in ("run", "test") and kind not in staged.replaying.replayed}
        replay.keep(fresh)
        return Rehearsed(sorted(fresh), sorted(staged.replaying.replayed), time.perf_counter() - t0)
    finally:
        con.close()


def outcome(out: str) -> Rehearsed | None:
    """The `Rehearsed` a rehearsal's process printed last (`main`), or None."""
    lines = out.strip().splitlines()
    try:
        data: dict[str, Any] = json.loads(lines[-1]) if lines else {}
        return Rehearsed(list(data["recorded"]), list(data["replayed"]), float(data["seconds"]))
    except (ValueError, KeyError, TypeError):
        return None


def _behind() -> None:
    """On the CPU the run leaves idle only: Linux's SCHED_IDLE (its threads, DuckDB's and dbt's, inherit it), else
    the lowest priority. At nice 5, a run of 2,560 games of a model at 256 in flight (fake server, 0.5 s a call) into
    a million games took 68.9-69.1 s against 60.9-63.4 s without a rehearsal (2026-11-29, BENCHMARKS.md).
    `MAFIABENCH_REHEARSAL_PRIORITY=normal` leaves its priority as it is (the test suite's, whose other tests keep
    both cores busy)."""
    if os.environ.get("MAFIABENCH_REHEARSAL_PRIORITY") == "normal":
        return
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


# ------------------------------------------------------------------------------------------- after a whole build

LOCK = "rehearsal.lock"  # in the machine's records folder: held by the one rehearsal after a build at a time
_detached: list[subprocess.Popen[bytes]] = []  # this process's, so their objects outlive the call (`wait_detached`)


def _after_build_on() -> bool:
    return os.environ.get("MAFIABENCH_REHEARSE_AFTER_BUILD", "1") != "0"


def after_build(con: duckdb.DuckDBPyConnection) -> bool:
    """After a whole build published: rehearse the first increment's dbt in a process of its own that outlives the
    build (`main --detached`), with stand-ins for the next games (`export(stand_in=True)`: the next run of the last
    run's experiment, then games landed without a run), so a scheduled study's first increment replays dbt's
    statements whether a run landed it (its own rehearsal starved of CPU by its games, or never started) or an
    `import`. Called by `publish.build` under the warehouse lock; only the export (tenths of a second) is the
    build's, and only when `due`. One at a time on a machine (`LOCK`, taken here and held by the child until it
    ends); `MAFIABENCH_REHEARSE_AFTER_BUILD=0` turns it off. True when one was started."""
    try:
        if not _after_build_on() or not due(con):
            return False
    except duckdb.Error as exc:
        log.debug("no rehearsal after the build: %s", exc)
        return False
    try:
        import fcntl
    except ImportError:  # not a POSIX system: no lock to hold, so none is started
        return False
    import tempfile

    from mafiabench import scratch

    records = dbt_runner.cache_dir(replay.CACHE)
    try:
        records.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(records / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        log.debug("no rehearsal after the build: %s", exc)
        return False
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # one runs already
            return False
        try:
            proc = _spawn(lock)
        except OSError as exc:  # no process to be had: the published build stands, the next one runs dbt
            log.debug("no rehearsal after the build: %s", exc)
            return False
    finally:
        os.close(lock)  # the child's copy holds the lock until it ends
    _detached[:] = [*(p for p in _detached if p.poll() is None), proc]
    folder: Path | None = None
    made = False
    try:
        # Named after the child's process, so a sweep of scratch folders keeps it while the child lives, and removes
        # it once the child is gone without removing it (kill -9), as here.
        scratch.sweep("rehearsal")
        folder = Path(tempfile.mkdtemp(prefix=f"mafiabench-rehearsal-{proc.pid}-"))
        made = export(con, folder / "copy", stand_in=True)
    except Exception as exc:  # the published build stands; the next one runs dbt
        log.debug("no rehearsal after the build: %s", exc)
    finally:
        try:
            assert proc.stdin is not None
            proc.stdin.write(f"{folder if made else ''}\n".encode())
            proc.stdin.close()
        except OSError:  # the child is gone already
            made = False
        if not made and folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return made


def _spawn(lock: int) -> subprocess.Popen[bytes]:
    """The child (`_detached_main`), in a session of its own (a Ctrl-C to the build's terminal is not its), given the
    lock's descriptor and a pipe to hear its folder on."""
    return subprocess.Popen(
        [sys.executable, "-m", "mafiabench.transform.build.rehearsal", "--detached", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(lock,),
        start_new_session=True)


def wait_detached(timeout: float = 600.0) -> None:
    """Wait until no rehearsal started after a build runs on this machine (its `LOCK` is free): for tests and
    benchmarks, which time the increment a schedule would build later."""
    import fcntl

    for proc in _detached:
        proc.wait(timeout)
    _detached.clear()
    path = dbt_runner.cache_dir(replay.CACHE) / LOCK
    if not path.exists():
        return
    deadline = time.monotonic() + timeout
    fd = os.open(path, os.O_RDWR)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"a rehearsal still holds {path} after {timeout:.0f} s") from None
                time.sleep(0.1)
    finally:
        os.close(fd)


def _detached_main(lock: int) -> int:
    """The child `after_build` started: the folder its parent exported into (a blank line: nothing), each of its
    shapes rehearsed in turn on the CPU others leave idle, then removed; the outcome kept beside the records
    (`rehearsal-last.json`: each shape's `Rehearsed`, and an error that stopped it), for a look."""
    line = sys.stdin.readline().strip()
    if not line:
        return 0
    folder = Path(line)
    _behind()
    outcome_: dict[str, Any] = {}
    try:
        for shape in shapes(folder / "copy"):
            try:
                done = rehearse(folder / "copy", shape)
            except Exception as exc:  # the next build of that shape runs dbt instead; the other shapes go on
                outcome_[shape] = {"error": repr(exc)[-2000:]}
                continue
            outcome_[shape] = {"recorded": done.recorded, "replayed": done.replayed, "seconds": done.seconds}
    except Exception as exc:  # no shapes to read: every next build runs dbt
        outcome_["error"] = repr(exc)[-2000:]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        (dbt_runner.cache_dir(replay.CACHE) / "rehearsal-last.json").write_text(json.dumps(outcome_))
    os.close(lock)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--detached"]:
        return _detached_main(int(argv[1]))
    folder = Path(argv[0])
    _behind()
    try:
        done = rehearse(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"recorded": done.recorded, "replayed": done.replayed, "seconds": done.seconds}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
