"""A study across a real Dask cluster on 127.0.0.1 (a scheduler and two worker processes): one worker is killed
with SIGKILL mid-run, and every planned game still lands exactly once, each a finished game."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.errors import UserError
from mafiabench.study.design import expand
from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import connect
from mafiabench.warehouse.sidecar import check_sidecar

pytest.importorskip("distributed")

# Caps on waits for events (workers joined, games on w0, the run finished), never a verdict on speed: far beyond what
# a loaded machine takes (at load 40 a process gets about a twentieth of a core: 3 s of start-up CPU is a minute).
CAP_S = 900
CONNECT_S = 120  # the test's own Dask clients: a starved scheduler answers late, not never

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_worker(address: str, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "8",
                             "--no-nanny", "--no-dashboard", "--name", name],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for_workers(address: str, n: int) -> None:
    from distributed import Client

    deadline = time.monotonic() + CAP_S
    while True:
        try:
            with Client(address, timeout=CONNECT_S) as client:
                if len(client.scheduler_info()["workers"]) == n:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"the Dask cluster did not reach {n} workers"
        time.sleep(0.5)


@contextmanager
def dask_cluster(tmp_path: Path, n_workers: int) -> Iterator[tuple[str, list[subprocess.Popen[bytes]], Path]]:
    """A scheduler and `n_workers` workers (w0, w1 ...) on 127.0.0.1, all joined; the list takes workers started
    later too, and every process in it is killed at the end."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    log = tmp_path / "scheduler.log"
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--no-dashboard"], stdout=subprocess.DEVNULL,
                                 stderr=log.open("wb"))
    workers = [start_worker(address, f"w{i}") for i in range(n_workers)]
    try:
        wait_for_workers(address, n_workers)
        yield address, workers, log
    finally:
        for p in [*workers, scheduler]:
            p.kill()
            p.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]], Path]]:
    with dask_cluster(tmp_path, 2) as running:
        yield running


def experiment(tmp_path: Path, address: str) -> Any:
    return parse_experiment({
        "name": "cluster", "games_per_cell": 20, "shard_size": 10, "warehouse": str(tmp_path / "w.duckdb"),
        "cells": [{"name": "slow", "agents": {"default": "slow/m"}},
                  {"name": "mixed", "agents": {"mafioso": "slow/m", "default": "policy/random"}}],
        # An in-process fake with latency: it runs on the workers, so every game keeps a worker busy ~3 s.
        "endpoints": {"slow": {"kind": "fake", "options": {"latency_ms": 400}}},
        "concurrency": {"games": 16},  # more than one worker's 8 threads: both workers carry games
        "cluster": {"dask": address},
    })


def assert_every_game_landed_once(exp: Any, summary: Any) -> None:
    """The run lost no game and duplicated none: every planned game landed once, finished."""
    assert summary.shard_errors == [] and summary.games_played == 40 and summary.games_failed == 0
    con = duckdb.connect(exp.warehouse, read_only=True)
    try:
        rows = con.execute("select game_id, status from raw_games order by game_id").fetchall()
    finally:
        con.close()
    assert [r[0] for r in rows] == sorted(g.game_id for g in expand(exp))  # every planned game, once
    assert {r[1] for r in rows} == {"finished"}


@pytest.mark.slow
def test_a_killed_worker_loses_no_game_and_duplicates_none(tmp_path: Path, cluster: Any) -> None:
    address, workers, log = cluster
    exp = experiment(tmp_path, address)
    planned = sorted(g.game_id for g in expand(exp))
    assert len(planned) == 40
    out: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: out.setdefault("summary", asyncio.run(run_study(exp, progress=False))))
    runner.start()
    from distributed import Client

    with Client(address, timeout=CONNECT_S) as client:
        w0 = next(a for a, w in client.scheduler_info()["workers"].items() if w["name"] == "w0")
        deadline = time.monotonic() + CAP_S
        while not client.processing().get(w0):  # wait until w0 carries games
            assert time.monotonic() < deadline and runner.is_alive()
            time.sleep(0.1)
        carried = len(client.processing()[w0])
        workers[0].kill()  # SIGKILL, with games in flight: no goodbye to the scheduler
    assert carried >= 1
    runner.join(CAP_S)
    assert not runner.is_alive(), "the run did not finish after a worker was killed"
    assert_every_game_landed_once(exp, out["summary"])
    assert "Remove worker" in log.read_text() and "name: w0" in log.read_text()
    with Client(address, timeout=CONNECT_S) as client:  # the survivor closes its SDK clients when it closes
        from mafiabench.study.cluster import CLOSE_PLUGIN

        assert list(client.run(lambda dask_worker: CLOSE_PLUGIN in dask_worker.plugins).values()) == [True]
    # the shards shipped back were written with their sidecars: a backlog of them lands from the sidecars alone
    raw = landing.raw_dir(Path(exp.warehouse), exp.name)
    files = landing.shard_files(raw)
    assert files and [check_sidecar(f)[1] for f in files] == [""] * len(files)
    con = connect(tmp_path / "again" / "w.duckdb")
    try:
        again = landing.land_pending(con, raw, exp.name)
        landed = con.execute("select game_id from raw_games order by game_id").fetchall()
    finally:
        con.close()
    assert (again.files_from_sidecar, again.files_from_lines, again.inserted) == (len(files), 0, 40)
    assert [r[0] for r in landed] == planned


@pytest.mark.slow
def test_a_worker_that_joined_later_finishes_the_games_when_the_first_one_dies(tmp_path: Path) -> None:
    """A cluster that grows during a study (an autoscaled one): the games a killed first worker carried, and the
    rest, are played by a worker that joined after the run started. Each game's task carries what a worker needs to
    play it: data scattered to the workers present at the start would have been lost with w0, and every game left
    cancelled ("already forgotten")."""
    with dask_cluster(tmp_path, 1) as (address, workers, _):
        exp = experiment(tmp_path, address)
        out: dict[str, Any] = {}
        runner = threading.Thread(
            target=lambda: out.setdefault("summary", asyncio.run(run_study(exp, progress=False))))
        runner.start()
        from distributed import Client

        with Client(address, timeout=CONNECT_S) as client:
            (w0,) = client.scheduler_info()["workers"]
            deadline = time.monotonic() + CAP_S
            while not client.processing().get(w0):  # the run has started on w0
                assert time.monotonic() < deadline and runner.is_alive()
                time.sleep(0.1)
        workers.append(start_worker(address, "w1"))
        wait_for_workers(address, 2)
        workers[0].kill()
        runner.join(CAP_S)
        assert not runner.is_alive(), "the run did not finish after its first worker was killed"
    assert_every_game_landed_once(exp, out["summary"])


def test_closing_a_worker_closes_the_sdk_clients_of_its_game_loops() -> None:
    """What the worker plugin's teardown runs (`close_worker_loops`): a game played over HTTP (the openai SDK to the
    local fake server) on a worker's game loop leaves an open client there; closing closes it and stops the loop."""
    from mafiabench.backends import openai_backend
    from mafiabench.record import Provenance
    from mafiabench.study import cluster
    from mafiabench.study.workers import WorkerConfig
    from mafiabench.testing import FakeModelServer

    with FakeModelServer(latency_s=0.0, seed=1) as srv:
        exp = parse_experiment({
            "name": "close", "games_per_cell": 1, "cells": [{"name": "c", "agents": {"default": "local/m"}}],
            "endpoints": {"local": {"kind": "openai", "base_url": srv.base_url_openai, "key_required": False}},
        })
        config = WorkerConfig(endpoints=exp.endpoint_configs(), limits={}, default_limit=8, cache_dir=None,
                              provenance=Provenance(git_commit="test"), processes=1)
        (game,) = expand(exp)
        record = cluster.play_on_worker(game.spec(exp, exp.model_settings()), config)
        assert record["outcome"]["status"] == "finished" and srv.requests
        (runner,) = cluster._LOOPS.values()

        clients = [c for ref, group in openai_backend._CLIENTS._entries.values() if ref() is runner.loop
                   for c in group.clients]  # the clients the game made on the worker's loop
        assert clients and not any(c.is_closed() for c in clients)
        assert cluster.close_worker_loops() == 1
        assert all(c.is_closed() for c in clients)
        deadline = time.monotonic() + 10
        while runner.loop.is_running():
            assert time.monotonic() < deadline, "the game loop did not stop"
            time.sleep(0.05)
        assert not cluster._LOOPS and cluster.close_worker_loops() == 0


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match=f"cannot reach the Dask scheduler at {address}"):
        asyncio.run(run_study(experiment(tmp_path, address), progress=False))


def test_a_bad_address_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"cluster.dask.*tcp://127.0.0.1:8786"):
        parse_experiment({"name": "x", "cells": [{"name": "c", "agents": {"default": "policy/random"}}],
                          "cluster": {"dask": "127.0.0.1:8786"}}, "exp.toml")
