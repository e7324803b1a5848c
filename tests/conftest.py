"""Shared test setup and the fixtures the tests share. Prefect reads its settings at import, so its home and quiet
settings are set here, before any test module imports it; each test session gets a fresh temporary PREFECT_HOME.
Helpers that are not fixtures are in tests/support/ (no test module imports another)."""

from __future__ import annotations

import atexit
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mafiabench import scratch
from support.processes import hear_ctrl_c

if TYPE_CHECKING:
    import duckdb

    from mafiabench.testing import FakeModelServer
    from support.processes import Spawn

# Temporary folders named after this process (mafiabench.scratch): removed when the session ends, interrupted
# included, and swept by the next session if it was killed.
if "PREFECT_HOME" not in os.environ:
    os.environ["PREFECT_HOME"] = str(scratch.make("prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_TASKS_DEFAULT_NO_CACHE", "true")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.pop("PREFECT_API_URL", None)
# dbt's parsed manifests are cached between processes (transform.build.dbt_runner): tests keep theirs in the
# session's folder.
if "MAFIABENCH_CACHE_DIR" not in os.environ:
    os.environ["MAFIABENCH_CACHE_DIR"] = str(scratch.make("cache"))
# Nor does a build replay what dbt did in another test's warehouse (transform.build.replay keeps published builds'
# records on the machine), but in the folders `_machine_records` names below: elsewhere (the commands the tests start
# included) each build runs dbt or replays its own warehouse's record, whatever ran before.
os.environ.setdefault("MAFIABENCH_REPLAY_CACHE", "0")
# A run's rehearsal (transform.build.rehearsal) at normal priority: on idle CPU only, it would wait out the other tests.
os.environ.setdefault("MAFIABENCH_REHEARSAL_PRIORITY", "normal")
# Nor does a published whole build leave a rehearsal of its first increment running after it (`rehearsal.after_build`):
# a process per build, beside the next tests; test_rehearsal_after_build.py turns it on.
os.environ.setdefault("MAFIABENCH_REHEARSE_AFTER_BUILD", "0")
# The local Prefect server the session's runs share stops soon after the last one (and before its home is removed).
os.environ.setdefault("MAFIABENCH_PREFECT_IDLE_S", "20")
# The commands the tests start take a Ctrl-C as from a terminal, however the suite was started (support.processes;
# test_human_play_pty once waited out its 600 s cap when `make test` ran as a background job).
hear_ctrl_c()

# The fake provider draws its injected faults afresh in every run unless told a seed: tests pin it, so a test's
# faults are the same on every machine (tests about re-runs set their own).
os.environ.setdefault("MAFIABENCH_FAULT_SEED", "tests")
# The latent mart samples the Mini-Mafia study's model by NUTS by default (JAX's start and compilation cost each
# process ~6 s of CPU, every build ~1 s): builds in tests hold the labelled point-estimate fallback instead, and the
# tests of the NUTS fit (test_marts_latent.py, test_mini_mafia_published.py) select it themselves.
os.environ.setdefault("MAFIABENCH_LATENT_METHOD", "map")


@atexit.register  # registered after the folders: runs before they are removed
def _stop_prefect_server() -> None:
    from mafiabench.prefect_server import stop_server

    stop_server()


# -- fixtures --------------------------------------------------------------------------------------------------------
# (mafiabench is imported inside them: nothing is imported before the settings above are in place)


@pytest.fixture
def fresh_warehouse() -> Iterator[duckdb.DuckDBPyConnection]:
    """A new, empty warehouse file with the raw tables (support.records.fresh_con), closed after the test."""
    from support.records import fresh_con

    con = fresh_con()
    yield con
    con.close()


# The folders of in-process builds (tests/transform, tests/quality: 64% of the suite's time, nearly all of it builds of
# small warehouses) keep the machine's records as a user's machine does: a build whose key another test's published
# build recorded replays dbt's statements (a whole build 15 s with dbt, 7 s replayed on the 2-core CI machine), with
# the session's records only (MAFIABENCH_CACHE_DIR above). What a test there checks of a build must not depend on which
# test ran first: a replay publishes what dbt does (test_replay_equals_dbt.py; its fallbacks test_replay_falls_back.py).
# The increments' reference (support.increments.full_rebuild) is a first build of a copy holding the landed tables
# only, which replays a first build's record as any first build does; `--full-refresh` never replays. A file whose
# tests count dbt's runs or break them (`dbt_runner.run`) is marked `dbt_runs_each_build` and keeps the records off.
# A session-scoped fixture's builds (`landed_increment`) run before this function-scoped one, so with the records off,
# whichever test asks first.
_MACHINE_RECORDS_FOLDERS = {"transform", "quality"}


@pytest.fixture(autouse=True)
def _machine_records(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.path.parent.name in _MACHINE_RECORDS_FOLDERS and not request.node.get_closest_marker(
            "dbt_runs_each_build"):
        monkeypatch.setenv("MAFIABENCH_REPLAY_CACHE", "1")


@pytest.fixture(scope="session")
def landed_increment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse file whose games were built, gated and published, then more games landed (new ids: an increment
    that only adds games), not built; copy it before use (support.gate_increments.copy)."""
    import duckdb

    from mafiabench.publish import build_warehouse
    from mafiabench.warehouse.raw import ensure_schema, load_records
    from support.increments import games

    path = tmp_path_factory.mktemp("landed-increment") / "w.duckdb"
    con = duckdb.connect(str(path))
    try:
        ensure_schema(con)
        load_records(con, games("a", 16, 0))
        assert build_warehouse(con).published
        load_records(con, games("b", 6, 1))
    finally:
        con.close()
    return path


@pytest.fixture(scope="session")
def datasets() -> Path:
    """The fixture datasets in the real shapes of the imported sources (tests/fixtures/datasets/, each README names
    the real files they follow), read by the importers and the detector."""
    return Path(__file__).parent / "fixtures" / "datasets"


@pytest.fixture(scope="session")
def import_fixtures(datasets: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., None]:
    """`import_fixtures(con, fmt, ...)`: the fixture dataset of each import format landed in `con` as a user imports
    it (`run_import`; the Mini-Mafia SQLite database is made from its SQL dump first)."""
    import sqlite3

    from mafiabench.importers import run_import

    folders = {"mini-mafia": "mini_mafia", "llmafia": "llmafia", "dallinger": "dallinger"}

    def load(con: duckdb.DuckDBPyConnection, *formats: str) -> None:
        for fmt in formats:
            if fmt == "mini-mafia-sqlite":
                path = tmp_path_factory.mktemp("sqlite") / "mini_mafia.db"
                sqlite3.connect(path).executescript((datasets / "mini_mafia_sqlite" / "mini_mafia.sql").read_text())
            else:
                path = datasets / folders[fmt]
            run_import(fmt, path, con)

    return load


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeModelServer]:
    """The local fake OpenAI/Anthropic server on 127.0.0.1 (no latency, a 2 s hang when a hang is injected), one per
    test module; a test that sets faults or reads requests clears it first."""
    from mafiabench.testing import FakeModelServer

    with FakeModelServer(latency_s=0.0, hang_s=2.0) as srv:
        yield srv


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """`spawn(argv, cwd=..., env=...)` starts a command as a terminal would: in its own process group (so
    `support.processes.ctrl_c` is a Ctrl-C), with text pipes and `cli_env()` unless an env is given; `argv` is a list
    (`[*CLI, "run", ...]` for mafiabench). Whatever is still running when the test ends, passed or failed, is killed
    with its group and reaped."""
    from support.processes import cli_env, end

    started: list[subprocess.Popen[str]] = []

    def start(argv: list[str], *, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
        options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True,
                                   "start_new_session": True, **popen}
        proc = subprocess.Popen(argv, env=cli_env() if env is None else env, **options)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        end(proc)


@pytest.fixture(scope="session")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """`prefect_home(folder)`: a new Prefect home at `folder` (for a test that needs a server of its own) whose
    database Prefect has already migrated, so its first server starts in about half the time
    (support.prefect_homes: one set-up home per session, copied)."""
    from support.prefect_homes import copy_home, template

    made: list[Path] = []

    def new(folder: Path) -> Path:
        if not made:
            made.append(template(tmp_path_factory))
        return copy_home(made[0], folder)

    return new


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """Prefect's test harness (a temporary server with its own database: about ten seconds to start), once per
    session for the flows run in-process; support.scheduling runs the files that use it on one worker, so it starts
    once under `make test` too."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


# -- the order the tests run in, and on which worker -----------------------------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding a test marked `slow` run first (each file's own order kept): under `make test`'s two workers
    the long tests start early and the run ends on the many short ones, so no worker idles at the end while the
    other finishes a minute-long test."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`: a file is one unit of work (a module-scoped fixture is made once), and the files reading the
    session's shared studies one unit together, those on Prefect's test harness another (support.scheduling); any
    other --dist: xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from support.scheduling import scheduler

    return scheduler(config, log)


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless chromium page (support.browser), one per test module: the browser tests' shared way in."""
    from support.browser import chromium

    with chromium(tmp_path_factory.mktemp("chromium")) as page:
        yield page
