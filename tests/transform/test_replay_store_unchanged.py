"""A build that replayed every dbt invocation from the warehouse's records publishes without writing them again
(transform.build.replay.store): they are the records it holds; a build that ran dbt for one writes them all."""

from __future__ import annotations

from typing import Any

import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import replay
from mafiabench.warehouse.raw import load_records
from support.increments import games
from support.replays import scheduled

pytestmark = pytest.mark.dbt_runs_each_build  # its warehouses' first builds run dbt, then replay their own records


def records(con: Any) -> list[tuple[str, str, bytes]]:
    return con.execute(f"select kind, key, record from {replay.TABLE} order by kind").fetchall()


def test_records_written_only_when_they_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    con = scheduled()
    packed: list[Any] = []
    pack = replay._packed
    monkeypatch.setattr(replay, "_packed", lambda record: packed.append(record) or pack(record))
    before = records(con)
    result = build_warehouse(con)
    assert result.published and result.replayed == ["run", "test"]
    assert packed == [] and records(con) == before

    con.execute(f"delete from {replay.TABLE} where kind = 'test'")  # dbt runs the tests, recorded anew
    load_records(con, games("d", 4, 3))
    result = build_warehouse(con)
    assert result.published and result.replayed == ["run"]
    assert len(packed) == 3 and [r[:2] for r in records(con)] == [r[:2] for r in before]
    stored = replay.load(con)
    assert all(stored.get(kind, key) is not None for kind, key, _ in before)
