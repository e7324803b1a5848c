"""A replay that stops (transform.build.replay) costs time, never correctness: a statement that fails, or a relation
dbt would have seen otherwise, rolls the replay back and dbt builds, and the build publishes what a full rebuild
does; an interrupt mid-replay leaves the published tables as they were and nothing of the replay staged."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.transform.build import replay
from mafiabench.transform.build.marts import discard, stage
from support.increments import assert_same, full_rebuild, published
from support.replays import scheduled, staged_relations

# Its warehouses' first builds run dbt, then replay their own records; a long file, it starts early (tests/conftest.py).
pytestmark = [pytest.mark.dbt_runs_each_build, pytest.mark.slow]


def _corrupt(con: duckdb.DuckDBPyConnection) -> None:
    """Make one statement of the model midway through the recorded `dbt run` fail (those before it replayed)."""
    blob = con.execute(f"select record from {replay.TABLE} where kind = 'run'").fetchone()
    assert blob is not None
    record = json.loads(zlib.decompress(blob[0]))
    node = record["nodes"][len(record["nodes"]) // 2]
    body = next(s for s in node["statements"] if "create" in s["sql"])
    body["sql"] = "select * from no_such_table"
    con.execute(f"update {replay.TABLE} set record = ? where kind = 'run'",
                [zlib.compress(json.dumps(record).encode())])


def test_a_failing_statement_falls_back_to_dbt(tmp_path: Path) -> None:
    con = scheduled()
    _corrupt(con)
    result = build_warehouse(con)
    assert result.published and result.replayed == ["test"]  # dbt ran the models; the tests still replay
    assert_same(published(con), full_rebuild(con, tmp_path))


def test_a_relation_dbt_would_see_otherwise_falls_back_to_dbt(tmp_path: Path) -> None:
    con = scheduled()
    # Another relation in the schema: dbt's relation cache (which decides its materializations' drops and renames)
    # would not be the recorded one
    con.execute("create table notes as select 1 as x")
    result = build_warehouse(con)
    assert result.published and "run" not in result.replayed
    assert_same(published(con), full_rebuild(con, tmp_path))


def test_an_interrupt_mid_replay_leaves_the_published_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    con = scheduled()
    before = published(con, views=False)
    raw = {t: before.pop(t) for t in list(before) if t.startswith("raw_")}
    execute, calls, at_start = replay._execute, [0], []

    def interrupted(cur: duckdb.DuckDBPyConnection, statement: dict[str, Any]) -> Any:
        if not calls[0]:
            at_start.append(staged_relations(con))  # what the build staged before the replay (its increment)
        calls[0] += 1
        if calls[0] == 60:
            raise KeyboardInterrupt
        return execute(cur, statement)

    monkeypatch.setattr(replay, "_execute", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stage(con)  # the build's own clean-up (build_warehouse discards what a stopped build staged) aside
    # the node running beside the interrupted one (the replay runs dbt's threads) finishes; nothing else starts,
    # and nothing the replay staged is left
    assert 60 <= calls[0] < 90 and staged_relations(con) == at_start[0]
    discard(con)
    after = published(con, views=False)
    assert {t: after.pop(t) for t in list(after) if t.startswith("raw_")} == raw
    assert_same(after, before)
    monkeypatch.undo()
    again = build_warehouse(con)
    assert again.published and again.replayed == ["run", "test"]
    assert_same(published(con), full_rebuild(con, tmp_path))
