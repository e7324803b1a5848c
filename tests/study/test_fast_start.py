"""What a run does not pay for before its first game (issue 31 item 2, BENCHMARKS.md "Fast starts"): each test fails
if a removed cost comes back.

- the provider SDKs (openai, anthropic: 0.5-1 s of CPU) are imported by the worker processes that make the calls,
  never by the run's own process, which only checks the specs;
- pyarrow and numpy (about 0.15 s) are not imported by a run that has nothing to play;
- a plan with nothing to play starts no worker process;
- the worker processes stop together, each without the interpreter's teardown;
- what writing the first shard imports (pyarrow, and pandas through it) is imported while the workers play, on a
  thread of its own, not when the first games finish (issue 37 item 5).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from mafiabench.study import executors
from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.testing import FakeModelServer

SRC = Path(__file__).resolve().parents[2] / "src"

# Runs an HTTP study in worker processes, twice (the second has nothing to play), then reports which of the heavy
# modules this (the parent) process imported.
SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from mafiabench.study.run import run_study
    from mafiabench.study.spec import parse_experiment

    if __name__ == "__main__":
        exp = parse_experiment(json.loads(sys.argv[1]), "<test>")
        first = asyncio.run(run_study(exp, progress=False))
        again = asyncio.run(run_study(exp, progress=False))
        heavy = ("openai", "anthropic", "aiohttp", "pyarrow", "numpy", "scipy", "polars")
        print(json.dumps({"played": first.games_played, "again": again.games_played,
                          "parent_imported": [m for m in heavy if m in sys.modules]}))
    """
)


def _http_experiment(tmp_path: Path, base_url: str, processes: int) -> dict[str, Any]:
    return {
        "name": "fast-start",
        "games_per_cell": 6,
        "shard_size": 3,
        "cells": [{"name": "http", "agents": {"mafioso": "local/m", "default": "policy/informed"}}],
        "endpoints": {"local": {"kind": "openai", "base_url": base_url, "key_required": False}},
        "concurrency": {"games": 6, "processes": processes},
        "warehouse": str(tmp_path / "w.duckdb"),
    }


def test_the_parent_never_imports_the_sdk_and_a_landed_plan_no_pyarrow(tmp_path: Path) -> None:
    script = tmp_path / "study.py"
    script.write_text(SCRIPT)
    with FakeModelServer(latency_s=0.0, seed=1) as srv:
        spec = _http_experiment(tmp_path, srv.base_url_openai, processes=2)
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        done = subprocess.run([sys.executable, str(script), json.dumps(spec)], env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        calls = len(srv.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["played"] == 6 and out["again"] == 0 and calls > 0  # the games were played over HTTP, by workers
    # pyarrow is imported by the first run's landing; the SDK by no one here: the workers made every call.
    assert "openai" not in out["parent_imported"] and "aiohttp" not in out["parent_imported"], out


def test_a_run_with_nothing_to_play_imports_no_pyarrow_numpy_or_sdk(tmp_path: Path) -> None:
    """The command's own process, on a warehouse where every planned game is landed (`--no-prefect`: Prefect's
    own imports are its business)."""
    exp = tmp_path / "e.toml"
    exp.write_text(textwrap.dedent(f"""
        name = "nothing-left"
        games_per_cell = 4
        shard_size = 2
        warehouse = "{tmp_path / 'w.duckdb'}"

        [[cells]]
        name = "c"
        agents = {{ mafioso = "scripted/naive", default = "policy/random" }}
    """))
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    first = subprocess.run([sys.executable, "-m", "mafiabench.cli", "run", str(exp), "--no-prefect", "--no-progress"],
                           env=env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr[-3000:]
    probe = textwrap.dedent(f"""
        import sys
        from mafiabench.cli import main
        code = main(["run", {str(exp)!r}, "--no-prefect", "--no-progress"])
        heavy = ("openai", "anthropic", "aiohttp", "pyarrow", "numpy", "scipy", "polars", "dbt")
        print("IMPORTED", [m for m in heavy if m in sys.modules], code)
    """)
    again = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300,
                           check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "played                    0 " in again.stdout, again.stdout
    assert "IMPORTED [] 0" in again.stdout, again.stdout


def test_a_plan_with_nothing_to_play_starts_no_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = parse_experiment({
        "name": "no-workers",
        "games_per_cell": 4,
        "shard_size": 2,
        "cells": [{"name": "c", "agents": {"mafioso": "flaky/a", "default": "policy/random"}}],
        "endpoints": {"flaky": {"kind": "fake"}},
        "concurrency": {"games": 4, "processes": 2},
        "warehouse": str(tmp_path / "w.duckdb"),
    })
    assert asyncio.run(run_study(exp, progress=False)).games_played == 4

    class NoWorkers:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("a worker pool was made for a plan with nothing to play")

    monkeypatch.setattr(executors, "WorkerPool", NoWorkers)
    assert asyncio.run(run_study(exp, progress=False)).games_played == 0


def test_workers_stop_together(tmp_path: Path) -> None:
    """Closing the pool tells every worker first, then waits: two workers stop in about the time of one (each
    exits with `os._exit` once its replies are sent)."""
    from mafiabench.backends.endpoints import EndpointConfig
    from mafiabench.record import Provenance
    from mafiabench.study.workers import WorkerConfig, WorkerPool

    config = WorkerConfig(endpoints={"flaky": EndpointConfig("flaky", "fake")}, limits={}, default_limit=4,
                          cache_dir=None, provenance=Provenance(git_commit=None), processes=2)
    pool = WorkerPool(config)
    pool.start()
    workers = [w for w in pool._workers if w is not None]
    processes = [w.process for w in workers]
    assert len(processes) == 2 and all(p.is_alive() for p in processes)
    told_first: list[bool] = []
    for w in workers:  # when the pool waits for the first worker, every worker has been told to stop
        wait = w.close
        w.close = lambda *a, _wait=wait, **k: (told_first.append(not any(x.alive for x in workers)), _wait(*a, **k))
    t0 = time.perf_counter()
    pool.close()
    took = time.perf_counter() - t0
    assert told_first == [True, True]
    assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]
    assert took < 5.0, took


# Which thread first imports each of the modules writing a shard needs, while a study plays in worker processes.
WRITERS = textwrap.dedent(
    """
    import asyncio, json, sys, threading
    from mafiabench.study.run import run_study
    from mafiabench.study.spec import parse_experiment

    WATCHED = ("pyarrow", "pyarrow.parquet", "pandas")
    importers = {}

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name in WATCHED:
                importers.setdefault(name, threading.current_thread().name)
            return None

    if __name__ == "__main__":
        sys.meta_path.insert(0, Watch())
        exp = parse_experiment(json.loads(sys.argv[1]), "<test>")
        summary = asyncio.run(run_study(exp, progress=False))
        print(json.dumps({"played": summary.games_played, "importers": importers}))
    """
)


def test_the_first_shard_s_imports_are_paid_while_the_workers_play(tmp_path: Path) -> None:
    script = tmp_path / "writers.py"
    script.write_text(WRITERS)
    spec = {
        "name": "writers",
        "games_per_cell": 4,
        "shard_size": 4,
        "cells": [{"name": "slow", "agents": {"mafioso": "slow/m", "default": "policy/informed"}}],
        "endpoints": {"slow": {"kind": "fake", "options": {"latency_ms": 400}}},  # a game: over a second
        "concurrency": {"games": 4, "processes": 2},
        "warehouse": str(tmp_path / "w.duckdb"),
    }
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, str(script), json.dumps(spec)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["played"] == 4
    assert out["importers"] == dict.fromkeys(("pyarrow", "pyarrow.parquet", "pandas"), "mafiabench-import-writers")


PLAN_EARLY = textwrap.dedent(
    """
    import json, sys
    from mafiabench.study.run import Study, plan_early
    from mafiabench.study.spec import parse_experiment

    if __name__ == "__main__":
        spec = json.loads(sys.argv[1])
        study = Study(parse_experiment(spec, "<test>"), orchestrator="prefect")
        out = {"planned": plan_early(study)}
        pool = study.executor._workers
        workers = [w for w in pool._workers if w is not None] if pool else []
        out |= {"to_play": study.summary.games_to_play, "spawned": sum(w.process.is_alive() for w in workers),
                "prefect": "prefect" in sys.modules}
        study.__exit__(None, None, None)
        study.__exit__(None, None, None)  # twice: harmless (the command closes what the flow may have closed)
        spec["concurrency"]["processes"] = 1
        one = Study(parse_experiment(spec, "<test>"))
        out["one_process"] = not plan_early(one) and not one.planned
        print(json.dumps(out))
    """
)


def test_workers_are_spawned_before_prefect_is_imported(tmp_path: Path) -> None:
    """`mafiabench run` plans a study played in worker processes before importing Prefect and spawns its workers
    then, so that they start while Prefect is imported; the flow takes the opened study over."""
    script = tmp_path / "plan.py"
    script.write_text(PLAN_EARLY)
    spec = _http_experiment(tmp_path, "http://127.0.0.1:9/v1", processes=2)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, str(script), json.dumps(spec)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"planned": True, "to_play": 6, "spawned": 2, "prefect": False, "one_process": True}, out


def test_prefect_clients_of_our_plain_http_server_load_one_certificate(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each Prefect client builds a verifying SSL context even for our http:// server: from one certificate, not
    certifi's bundle (27 ms each); a user's own PREFECT_API_SSL_CERT_FILE wins."""
    import ssl

    from mafiabench.prefect_server import _plain_http_client

    monkeypatch.delenv("PREFECT_API_SSL_CERT_FILE", raising=False)
    _plain_http_client(tmp_path)
    path = Path(os.environ["PREFECT_API_SSL_CERT_FILE"])
    assert path.parent == tmp_path and path.read_text().count("BEGIN CERTIFICATE") == 1
    ssl.create_default_context(cafile=str(path))  # a valid file for Prefect's client
    monkeypatch.setenv("PREFECT_API_SSL_CERT_FILE", "/my/ca.pem")
    _plain_http_client(tmp_path)
    assert os.environ["PREFECT_API_SSL_CERT_FILE"] == "/my/ca.pem"


def test_the_study_flow_does_not_ask_for_result_storage() -> None:
    """Its result (the summary) is returned and recorded elsewhere: no server request for a default storage."""
    from mafiabench.commands.run import flow_module

    assert flow_module().study_flow.persist_result is False
