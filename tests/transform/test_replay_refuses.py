"""What a replay may repeat (transform.build.replay): a recorded statement that writes a relation that is not staged,
runs a statement other than a query, DDL or DML, or ends a transaction of its own makes dbt's invocation
unrecordable; comments and string literals do not count."""

from __future__ import annotations

import pytest

from mafiabench.transform.build import replay

COMMENT = '/* {"app": "dbt", "node_id": "model.mafiabench.m"} */\n'


def _check(sql: str) -> dict[str, object]:
    statement: dict[str, object] = {"sql": COMMENT + sql, "bindings": None}
    replay._Recorder._check(statement, "an-invocation-id")
    return statement


@pytest.mark.parametrize("sql", [
    'insert into "w"."main"."fct_games" select * from "w"."main"."__staged_fct_games__delta"',
    'create table "w"."main"."__staged_m" as select 1; drop table main.fct_games',
    'alter table "w"."main"."__staged_m__dbt_tmp" rename to "fct_games"',
    "delete from main.raw_games where true",
    "copy (select 1) to 'out.csv'",
    "checkpoint",
    "select 1; commit",
    "attach 'other.duckdb'",
    "create schema other",
    "select 'an-invocation-id' as run",
])
def test_a_statement_a_replay_may_not_repeat_refuses_the_record(sql: str) -> None:
    with pytest.raises(replay._Refused):
        _check(sql)


def test_staged_writes_comments_and_literals_are_recorded() -> None:
    statement = _check(
        'create or replace table "w"."main"."__staged_m__dbt_tmp" as (\n'
        "  -- a comment; drop table fct_games\n"
        "  select ';' as x, 'insert into fct_games' as y\n"
        ');\nalter table "w"."main"."__staged_m__dbt_tmp" rename to "__staged_m"; '
        'set variable v = 1; create schema if not exists "w"."main"'
    )
    assert statement["writes"] == ["__staged_m", "__staged_m__dbt_tmp"]
