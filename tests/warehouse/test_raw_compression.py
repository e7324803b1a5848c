"""The calls' prompts (`request_json`) are stored with zstd, not DuckDB's default for strings, which wrote them at
half the rate into 18 times the space, and made a vacuum merging 50,000 copied LLM-shaped games' row groups cost a
minute (`warehouse.raw.COLUMN_COMPRESSION`). Storage only: the declared schema, which the sidecars and the build's
state key are checked against, is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from mafiabench.warehouse.raw import COLUMN_COMPRESSION, RAW_SCHEMA, column_names, ensure_schema, table_ddl


def prompt(i: int) -> str:
    """A request in the shape our calls record it (`backends.backend.Message.to_dict` as `agents.llm` sends it, one
    user message: `{"messages": [{"role": "user", "content": ...}]}`, as in the demo's and Strategema-offline's
    `raw_model_calls.request_json`): the rules' preamble every call shares, then the game so far (each call's own:
    no two prompts are equal, as in a study's games). Our own format, no third party's text."""
    transcript = "\n".join(f"Day {d}. Player {(i + d) % 6 + 1} says: I suspect Player {(i * d) % 6 + 1} (game "
                           f"{i}, turn {d})." for d in range(1, 40))
    return json.dumps({"messages": [{"role": "user", "content": "You are playing Mafia. " * 40 + transcript}]})


@pytest.mark.parametrize("table", sorted(COLUMN_COMPRESSION))
def test_the_prompts_are_written_with_zstd(table: str, tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    ensure_schema(con)
    con.execute(f"insert into {table} (game_id, call_index, request_json) select 'g' || (i // 8), i % 8, p "
                "from (select unnest($i) as i, unnest($p) as p)", {"i": list(range(4_000)),
                                                                  "p": [prompt(i) for i in range(4_000)]})
    con.execute("checkpoint")
    stored = dict(con.execute(
        f"select column_name, list(distinct compression) from pragma_storage_info('{table}') "
        "where segment_type = 'VARCHAR' group by all").fetchall())
    assert stored["request_json"] == ["ZSTD"]
    assert "ZSTD" not in stored["game_id"]  # only the columns named: the rest keep DuckDB's choice
    back = con.execute(f"select request_json from {table} order by game_id, call_index limit 1").fetchall()[0][0]
    assert json.loads(back)["messages"][0]["content"].startswith("You are playing Mafia.")


def test_storage_is_not_schema() -> None:
    """The declared columns carry no storage clause, so sidecars written before stay valid and a warehouse built
    before is not rebuilt whole for it (the sidecars' schema checksum and the state key read RAW_SCHEMA)."""
    assert not any("COMPRESSION" in columns.upper() for columns in RAW_SCHEMA.values())
    for table in COLUMN_COMPRESSION:
        assert table_ddl(table) != RAW_SCHEMA[table]
        assert [c.split()[0] for c in table_ddl(table).split(",")] == column_names(table)


def test_a_table_created_before_keeps_its_column(tmp_path: Path) -> None:
    """`create table if not exists`: an existing warehouse is not rewritten; its new rows follow its own storage. (A
    guard: DuckDB never chooses zstd for such a column itself, so this fails only if `ensure_schema` starts to
    migrate, which should then be decided and tested on its own.)"""
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute(f"create table raw_model_calls ({RAW_SCHEMA['raw_model_calls']})")
    ensure_schema(con)
    con.execute("insert into raw_model_calls (game_id, call_index, request_json) select 'g', i, repeat('x y ', 900) "
                "|| i from range(3000) t(i)")
    con.execute("checkpoint")
    (kinds,) = con.execute("select list(distinct compression) from pragma_storage_info('raw_model_calls') "
                           "where column_name = 'request_json' and segment_type = 'VARCHAR'").fetchall()[0]
    assert "ZSTD" not in kinds


@pytest.mark.parametrize("declared", ["request_json VARCHAR[]", "old_request_json VARCHAR", "request_json INTEGER"])
def test_a_compression_for_a_column_not_declared_varchar_is_refused(
    declared: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`table_ddl` matches the column's whole definition, and says which one it could not find (not an assert, which
    `python -O` would drop, creating the column without its storage)."""
    monkeypatch.setitem(RAW_SCHEMA, "raw_model_calls", f"game_id VARCHAR, {declared}, seed INTEGER")
    with pytest.raises(ValueError, match=r"raw_model_calls\.request_json"):
        table_ddl("raw_model_calls")
