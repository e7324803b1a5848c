"""The `sql:` suites proven from an increment by a proof of their own (quality.delta.FORMS) are pinned to the SQL
the proof was made for: the packaged YAML must declare that SQL (else the suite runs whole, and this test says the
proof must be made again), and every table the SQL reads must be one the proof checks."""

from __future__ import annotations

import re

import duckdb

from mafiabench.quality.delta import FORMS, query_digest
from mafiabench.warehouse.raw import RAW_SCHEMA
from support.gate import declared_suites


def test_each_proof_is_of_the_declared_sql_and_checks_every_table_it_reads() -> None:
    suites = {s.name: s for s in declared_suites()}
    for name, form in FORMS.items():
        assert name in suites, f"{name}: no suite of that name is declared"
        assert query_digest(suites[name].query) == form.sha, (
            f"{name}: its SQL changed since its proof (quality.delta.FORMS): prove it again and pin the new digest "
            f"{query_digest(suites[name].query)}")
        read = {t for t in RAW_SCHEMA if re.search(rf"\b{t}\b", suites[name].query)}
        assert read == set(form.reads) | set(form.unchanged), name


def test_the_narrowed_copies_query_finds_a_copy_of_a_published_game() -> None:
    """copied_games narrowed to the increment's (variant, seed) finds a copy pair of which one game is new, and not
    a pair of published games (which the published gate would have refused)."""
    query = suites_query("copied_games")
    narrowed = FORMS["copied_games"].narrow(query, "new_games")  # type: ignore[misc]
    assert narrowed is not None and narrowed != query
    con = duckdb.connect()
    con.execute("create table raw_games (game_id varchar, variant varchar, seed bigint)")
    con.execute("create table raw_players (game_id varchar, seat integer, name varchar, role varchar, agent varchar)")
    con.execute("create table raw_events (game_id varchar, seq integer, type varchar, actor varchar, target varchar, "
                "text varchar)")
    con.execute("create table new_games (game_id varchar)")
    for game, seed in (("old-1", 7), ("old-2", 7), ("old-3", 9), ("new-1", 9)):
        con.execute("insert into raw_games values (?, 'mini-mafia', ?)", [game, seed])
        con.execute("insert into raw_players values (?, 0, 'Alice', 'mafioso', 'a')", [game])
        con.execute("insert into raw_events values (?, 0, 'vote', 'Alice', 'Bob', null)", [game])
    con.execute("insert into new_games values ('new-1')")
    whole = con.execute(f"select game_ids from ({query}) order by all").fetchall()
    assert whole == [(["new-1", "old-3"],), (["old-1", "old-2"],)]
    assert con.execute(f"select game_ids from ({narrowed})").fetchall() == [(["new-1", "old-3"],)]


def suites_query(name: str) -> str:
    return next(s.query for s in declared_suites() if s.name == name)
