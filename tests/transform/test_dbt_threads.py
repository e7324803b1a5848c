"""dbt's threads (`dbt_runner.threads_for`): four on a small warehouse; on one of `LARGE_GAMES` games or more, one
for a whole build and two for an increment (dbt's var `increment`); `$MAFIABENCH_DBT_THREADS` overrides. The replay's
key holds them, so a record made with other threads is not replayed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from mafiabench.transform.build import dbt_runner


@pytest.fixture
def con(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect(str(tmp_path / "w.duckdb"))
    c.execute("create table raw_games as select 'g' || i as game_id from range(3) t(i)")
    yield c
    c.close()


@pytest.mark.parametrize(("large_games", "whole", "increment"), [(3, 1, 2), (4, 4, 4)], ids=["large", "small"])
def test_threads_by_games(con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch, large_games: int,
                          whole: int, increment: int) -> None:
    monkeypatch.delenv("MAFIABENCH_DBT_THREADS", raising=False)
    monkeypatch.setattr(dbt_runner, "LARGE_GAMES", large_games)
    assert dbt_runner.threads_for(con) == whole
    assert dbt_runner.threads_for(con, {"upset_threshold": 0.05}) == whole
    assert dbt_runner.threads_for(con, {"increment": True, "increment_replaces": False}) == increment


def test_environment_overrides(con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAFIABENCH_DBT_THREADS", "3")
    monkeypatch.setattr(dbt_runner, "LARGE_GAMES", 3)
    assert dbt_runner.threads_for(con) == 3
    assert dbt_runner.threads_for(con, {"increment": True}) == 3
