"""Running a study without Prefect: faults, resume, budget, shard retries, the lock, the ledger."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.errors import UserError
from mafiabench.study.budget import BudgetGuard
from mafiabench.study.design import expand
from mafiabench.study.plan import is_infrastructure_fault
from mafiabench.study.run import Study, run_study
from mafiabench.study.spec import Experiment, parse_experiment
from mafiabench.study.summary import RunSummary
from mafiabench.warehouse import landing

FAULTS = {"p_rate_limit": 0.1, "p_server_error": 0.1, "p_timeout": 0.03, "p_malformed": 0.06, "p_empty": 0.02}


def experiment(tmp_path: Path, **over: Any) -> Experiment:
    data: dict[str, Any] = {
        "name": "faults",
        "games_per_cell": 12,
        "shard_size": 7,
        "design": {"targets": ["flaky/a", "flaky/b"], "backgrounds": ["flaky/a", "flaky/b"]},
        "cells": [{"name": "policies", "agents": {"default": "policy/random"}, "games": 10}],
        "endpoints": {"flaky": {"kind": "fake", "options": FAULTS}},
        "models": {"default": {"max_attempts": 3, "backoff_base_s": 0.0}},
        "concurrency": {"games": 16},
        "warehouse": str(tmp_path / "wh" / "w.duckdb"),
    }
    data.update(over)
    return parse_experiment(data)


def run(exp: Experiment, **kw: Any) -> RunSummary:
    return asyncio.run(run_study(exp, progress=False, **kw))


def query(exp: Experiment, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(exp.warehouse, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_faulty_provider_every_planned_game_lands_once_failures_counted(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    planned = {g.game_id for g in expand(exp)}
    assert len(planned) == 8 * 12 + 10
    s = run(exp)
    assert s.status == "completed-with-failures" and s.games_planned == len(planned) == s.games_played
    rows = query(exp, "select game_id, status, error from raw_games")
    assert sorted(r[0] for r in rows) == sorted(planned)  # exactly the planned ids, once each
    failed = [r for r in rows if r[1] == "failed"]
    assert failed and s.games_failed == len(failed) and all(r[2] for r in failed)
    assert s.games_done == len(planned) - len(failed)
    folder = landing.raw_dir(Path(exp.warehouse), exp.name)
    raw = landing.raw_records(folder)
    assert set(raw) == planned
    assert len(landing.shard_files(folder)) == 16  # one file per shard (106 games in shards of 7), no per-game files
    assert all(landing.read_record(line).game_id == gid for gid, line in raw.items())
    # format failures are flagged on the calls and on the events that fell back, and counted in the summary
    (ff_calls,) = query(exp, "select count(*) from raw_model_calls where format_failure")[0]
    (ff_events,) = query(exp, "select count(*) from raw_events where format_failure and random_fallback")[0]
    assert ff_calls > 0 and ff_calls == s.usage.format_failures
    assert ff_events > 0
    (calls, retries) = query(exp, "select count(*), sum(attempts) - count(*) from raw_model_calls")[0]
    assert calls == s.usage.calls and retries == s.usage.attempts - s.usage.calls > 0
    # a failed game holds at least one call that failed for good (simultaneous voters may fail together)
    per_game = dict(query(exp, "select game_id, count(*) from raw_model_calls where response_text is null "
                               "and error_class is not null group by game_id"))
    assert set(per_game) == {r[0] for r in failed} and s.usage.failed_calls == sum(per_game.values())
    # the ledger
    (status, played, n_failed) = query(exp, "select status, games_played, games_failed from raw_runs")[0]
    assert (status, played, n_failed) == ("completed-with-failures", len(planned), len(failed))
    assert "failed" in s.text() and "| games planned |" in s.markdown()
    assert 0 < s.games_concurrency <= 16

    # a re-run plays only what is not landed as finished: the failed games, replayed (and replaced if they finish)
    again = run(exp)
    assert again.games_already_landed == len(planned) - len(failed)
    assert again.games_played == len(failed) and again.games_loaded_from_raw == 0
    assert query(exp, "select count(*), count(distinct game_id) from raw_games")[0] == (len(planned), len(planned))
    assert len(query(exp, "select * from raw_runs")) == 2


def test_landed_files_missing_from_the_warehouse_are_loaded_not_replayed(tmp_path: Path) -> None:
    exp = experiment(tmp_path, cells=[{"name": "c", "agents": {"default": "scripted/naive"}}], design=None)
    first = run(exp)
    folder = landing.raw_dir(Path(exp.warehouse), exp.name)
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    Path(exp.warehouse).unlink()  # the warehouse lost, the raw folder kept (a crash between write and load)
    s = run(exp)
    assert s.games_loaded_from_raw == first.games_played == 12 and s.games_played == 0
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    assert query(exp, "select count(*) from raw_games")[0] == (12,)


def test_budget_cap_stops_starting_games(tmp_path: Path) -> None:
    exp = experiment(
        tmp_path,
        cells=[{"name": "c", "agents": {"default": "scripted/naive"}}],
        design=None,
        games_per_cell=40,
        concurrency={"games": 1},
        budget={"max_tokens": 20_000},
    )
    s = run(exp)
    assert s.budget_stopped and s.status == "budget-stopped"
    assert 0 < s.games_played < 40 and s.games_not_started == 40 - s.games_played
    per_game = s.usage.tokens / s.games_played
    assert s.usage.tokens >= 20_000 > s.usage.tokens - per_game * 1.5  # stopped at the first game past the cap
    (landed,) = query(exp, "select count(*) from raw_games")[0]
    assert landed == s.games_played
    # the cap covers the experiment, not a run: a re-run starts nothing
    again = run(exp)
    assert again.games_played == 0 and again.games_not_started == 40 - landed
    # raising the cap resumes
    more = run(exp.model_copy(update={"budget": exp.budget.model_copy(update={"max_tokens": 10**9})}))
    assert more.games_played == 40 - landed and not more.budget_stopped


def test_usd_budget_uses_the_price_table_and_refuses_unpriced_models(tmp_path: Path) -> None:
    priced = experiment(
        tmp_path,
        cells=[{"name": "c", "agents": {"default": "flaky/a"}}],
        design=None,
        endpoints={"flaky": {"kind": "fake"}},
        prices=[{"provider": "flaky", "model": "*", "input": 100.0, "output": 100.0}],
        budget={"max_usd": 1.0},
        concurrency={"games": 2},
        games_per_cell=50,
    )
    s = run(priced)
    assert s.budget_stopped and s.usage.cost_usd >= 1.0 and s.games_played < 50
    assert s.per_model["flaky/a"].cost_usd == pytest.approx(s.usage.cost_usd)
    assert s.price_version.endswith("+experiment")
    unpriced = experiment(
        tmp_path,
        name="unpriced",
        cells=[{"name": "c", "agents": {"default": "box/m"}}],
        design=None,
        endpoints={"box": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "key_required": False}},
        budget={"max_usd": 1.0},
    )
    with pytest.raises(UserError, match="box/m"):
        run(unpriced)


def test_a_second_run_gets_a_clear_error_naming_the_holder(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    with landing.warehouse_lock(Path(exp.warehouse), what="another run"), pytest.raises(
        landing.WarehouseLockedError
    ) as info:
        run(exp)
    assert f"pid {os.getpid()}" in str(info.value) and exp.warehouse in str(info.value)
    assert run(exp).games_played == 106  # and the warehouse is fine afterwards


def test_missing_key_fails_before_any_game(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    exp = experiment(tmp_path, cells=[{"name": "c", "agents": {"default": "openai/gpt-4.1-mini"}}], design=None)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        run(exp)
    assert not landing.raw_dir(Path(exp.warehouse), exp.name).exists()


def test_shards_are_retried_for_infrastructure_faults_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = experiment(tmp_path, cells=[{"name": "c", "agents": {"default": "scripted/naive"}}], design=None)
    real_write = landing.write_shard
    calls = {"n": 0}

    def flaky_disk(lines: Any, folder: Path, index: int) -> Path:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real_write(lines, folder, index)

    monkeypatch.setattr(landing, "write_shard", flaky_disk)

    reused: list[int] = []

    async def go() -> RunSummary:
        with Study(exp, progress=False, shard_retry_delays=(0.0,)) as study:
            study.prepare()
            reused.extend(r.reused for r in await study.fan_out())
            return study.finish()

    s = asyncio.run(go())
    assert s.status == "completed" and not s.shard_errors and calls["n"] == 3
    # the shard whose file could not be written kept its played games: its retry reused them, not replayed them,
    # and they are counted once
    assert sorted(reused) == [0, 5]
    assert s.games_played == 12
    assert query(exp, "select count(*), count(distinct game_id) from raw_games")[0] == (12, 12)

    def bug(lines: Any, folder: Path, index: int) -> Path:
        raise ValueError("a bug, not worth retrying")

    monkeypatch.setattr(landing, "write_shard", bug)
    exp2 = experiment(tmp_path, name="buggy", cells=exp.model_dump()["cells"], design=None)
    s2 = asyncio.run(run_study(exp2, progress=False))
    assert s2.status == "failed" and len(s2.shard_errors) == 2 and "ValueError" in s2.shard_errors[0]
    assert s2.games_played == 0


def test_infrastructure_fault_classification_and_budget_guard() -> None:
    assert is_infrastructure_fault(OSError("disk")) and is_infrastructure_fault(ConnectionResetError())
    assert not is_infrastructure_fault(ValueError()) and not is_infrastructure_fault(UserError("x"))
    from mafiabench.prices import Usage
    from mafiabench.study.spec import Budget

    guard = BudgetGuard(Budget(max_tokens=100), Usage(games=1, input_tokens=40))
    assert guard.try_start()  # 40 spent, nothing in flight
    assert guard.try_start()  # 40 + one game in flight, expected to cost the mean (40): 80 < 100
    assert not guard.try_start() and guard.stopped  # 40 + 2 × 40 ≥ 100
    guard.finish(Usage(input_tokens=10))
    assert guard.spent.tokens == 50 and guard.in_flight == 1


def test_progress_bar_counts_games_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = parse_experiment({
        "name": "bar", "games_per_cell": 7, "warehouse": str(tmp_path / "w.duckdb"),
        "cells": [{"name": "p", "agents": {"default": "policy/random"}}],
    })
    asyncio.run(run_study(exp, progress=True))
    err = capsys.readouterr().err
    assert "bar" in err and "7/7" in err and "game" in err


def _reader_gets_in(warehouse: str) -> bool:
    """Whether another process can open the warehouse read-only now (DuckDB: one writing process per file)."""
    import subprocess
    import sys

    code = (
        "import duckdb, sys\n"
        "try:\n"
        f"    duckdb.connect({warehouse!r}, read_only=True).close()\n"
        "except duckdb.IOException:\n"
        "    sys.exit(7)\n"
    )
    return subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_lander_holds_the_file_across_landings_for_at_most_the_hold_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Landings in quick succession share one open file (its open and closing checkpoint cost ~0.15 s, paid per
    shard before), and a reader still gets in once no landing comes for the hold time."""
    from mafiabench.study import lander as lander_module

    monkeypatch.setattr(lander_module, "LAND_HOLD_S", 3.0)
    exp = parse_experiment({
        "name": "hold", "games_per_cell": 9, "shard_size": 3,
        "cells": [{"name": "a", "agents": {"default": "policy/random"}}],
        "warehouse": str(tmp_path / "w.duckdb"),
    })
    opened: list[int] = []
    real_connect = lander_module.connect
    monkeypatch.setattr(lander_module, "connect", lambda *a, **k: opened.append(1) or real_connect(*a, **k))

    async def land_three(study: Study) -> bool:
        for shard in list(study.shards):
            await study.land_shard(await study.play_shard(shard))
        held = not _reader_gets_in(exp.warehouse)  # right after a landing: still held
        deadline = asyncio.get_running_loop().time() + 10.0
        while not _reader_gets_in(exp.warehouse):  # released by the timer, with the study still open
            assert asyncio.get_running_loop().time() < deadline, "the lander never released the warehouse"
            await asyncio.sleep(0.2)
        return held

    with Study(exp, progress=False) as study:
        study.prepare()
        before = len(opened)
        assert asyncio.run(land_three(study))
        assert len(opened) - before <= 1  # three shards landed through one open (the plan's, if still held)
        assert study.finish().games_played == 9
    assert query(exp, "select count(*), count(distinct game_id) from raw_games") == [(9, 9)]
