"""The gate's checks run in DuckDB (`quality.expectations`) with the meaning GX gives them on a pandas frame: on rows
full of edge cases every expectation gives GX's verdict, counts and failing rows, and a clean table's rows are
counted where they are, never fetched.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from mafiabench.quality import expectations
from mafiabench.quality.gate import Check, Suite, run_suites
from mafiabench.quality.suites import not_blank
from mafiabench.quality.validator import _Validator
from support.gate import CHECKS, ROWS, declared_suites

# A second table: more failing rows than a sample shows, booleans and integers against numeric bounds, infinities,
# a text column GX reads with Python's `\s`, and a table-level check.
MORE = [(i, i % 2 == 0, i - 3, float("inf") if i == 7 else i / 4, " \u2028\u3000" if i % 3 == 0 else f"w{i}")
        for i in range(12)]
MORE_CHECKS = (
    Check("ExpectColumnValuesToBeBetween", {"column": "b", "min_value": 0, "max_value": 0}, "b never set"),
    Check("ExpectColumnValuesToBeBetween", {"column": "n", "min_value": 0.5}, "n at least a half"),
    Check("ExpectColumnValuesToBeBetween", {"column": "f", "max_value": 2}, "f at most 2"),
    Check("ExpectColumnValuesToBeInSet", {"column": "n", "value_set": [0, 1, 2]}, "n small"),
    Check("ExpectColumnValuesToBeUnique", {"column": "b"}, "b unique"),
    not_blank("w", "w not blank"),
    Check("ExpectTableRowCountToEqual", {"value": 0}, "no rows"),
)


def _con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("create table t (id integer, key varchar, name varchar, x double, flag boolean, model varchar)")
    con.executemany("insert into t values (?, ?, ?, ?, ?, ?)", ROWS)
    con.execute("create table m (i integer, b boolean, n bigint, f double, w varchar)")
    con.executemany("insert into m values (?, ?, ?, ?, ?)", MORE)
    return con


def _gx(con: duckdb.DuckDBPyConnection, suite: Suite, validator: _Validator) -> list[Any]:
    return validator.validate(suite, con.sql(suite.query).df())


CASES = [("select * from t", check) for check in CHECKS] + [("select * from m", check) for check in MORE_CHECKS]


@pytest.fixture(scope="module")
def validator() -> _Validator:
    return _Validator()


@pytest.mark.parametrize(("query", "check"), CASES, ids=[c.rule for _, c in CASES])
def test_each_check_gives_the_verdict_of_gx_on_the_whole_frame(query: str, check: Check, validator: _Validator) -> None:
    con = _con()
    suite = Suite("edge_cases", query, (check,))
    (sql,) = run_suites(con, suites=[suite])
    (gx,) = _gx(con, suite, validator)
    assert not gx.success  # every check fails on these rows, so the comparison means something
    assert sql == gx  # suite, expectation type, rule, arguments, verdict, counts and failing rows


def test_a_suite_of_many_checks_gives_each_its_own_verdict(validator: _Validator) -> None:
    con = _con()
    con.execute("insert into t values (9, 'a', 'n9', 0.5, true, 'ok')")  # a row every check accepts
    suite = Suite("all_checks", "select * from t", CHECKS)
    assert run_suites(con, suites=[suite]) == _gx(con, suite, validator)
    con.execute("delete from t where id <> 9")
    results = run_suites(con, suites=[suite])
    assert results == _gx(con, suite, validator)
    assert all(r.success and r.element_count == 1 for r in results)


def test_an_empty_suite_passes_its_column_checks_and_a_broken_check_fails_alone(validator: _Validator) -> None:
    con = _con()
    con.execute("delete from t")
    suite = Suite("empty", "select * from t", CHECKS)
    assert run_suites(con, suites=[suite]) == _gx(con, suite, validator)
    missing = Check("ExpectColumnValuesToNotBeNull", {"column": "no_such_column"}, "a column that is not there")
    results = run_suites(_con(), suites=[Suite("broken", "select * from t", (CHECKS[7], missing))])
    assert [r.success for r in results] == [False, False]
    assert results[0].unexpected_count == 2  # the other check still counts
    assert results[1].unexpected_count == -1 and "no_such_column" in results[1].failing_rows[0]["exception"]


def test_clean_rows_are_counted_in_the_database_not_fetched() -> None:
    con = _con()
    con.execute("delete from t where id <> 1")
    con.execute("insert into t select r.i + 10, 'a', 'm' || r.i, 0.25, true, 'm' from range(100000) r(i)")
    fetched: list[int] = []
    real = expectations.SqlSuite._rows

    def rows(self: expectations.SqlSuite, sql: str) -> list[dict[str, Any]]:
        out = real(self, sql)
        fetched.append(len(out))
        return out

    expectations.SqlSuite._rows = rows  # type: ignore[method-assign]
    try:
        results = run_suites(con, suites=[Suite("clean", "select * from t", CHECKS)])
    finally:
        expectations.SqlSuite._rows = real  # type: ignore[method-assign]
    assert all(r.success and r.element_count == 100001 and r.unexpected_count == 0 for r in results)
    assert fetched == []  # no sample was needed; the counts were one row of numbers


def test_distinct_keys_are_shown_in_the_suites_one_scan() -> None:
    """A uniqueness check whose keys are all distinct needs no query of its own (their hashes, counted in the suite's
    scan, are distinct); a repeated key, or a floating-point key column, gets the exact count."""
    con = duckdb.connect()
    con.execute("create table k as select i, 'g' || (i // 4) as game, 'n' || (i % 4) as name, i / 8 as x "
                "from range(40000) r(i)")
    exact: list[str] = []
    real = expectations.SqlSuite._scalar

    def scalar(self: expectations.SqlSuite, sql: str) -> int:
        exact.append(sql)
        return real(self, sql)

    checks = (Check("ExpectColumnValuesToBeUnique", {"column": "i"}, "i unique"),
              Check("ExpectCompoundColumnsToBeUnique", {"column_list": ["game", "name"]}, "a name once a game"),
              Check("ExpectCompoundColumnsToBeUnique", {"column_list": ["game", "x"]}, "x once a game"))
    expectations.SqlSuite._scalar = scalar  # type: ignore[method-assign]
    try:
        clean = run_suites(con, suites=[Suite("k", "select * from k", checks[:2])])
        empty = run_suites(con, suites=[Suite("k", "select * from k where i < 0", checks[:2])])
        assert [r.unexpected_count for r in clean + empty] == [0, 0, 0, 0] and exact == []
        con.execute("insert into k values (7, 'g1', 'n3', 9.5)")  # i = 7 twice, and game g1's n3 twice
        repeated = run_suites(con, suites=[Suite("k", "select * from k", checks)])
    finally:
        expectations.SqlSuite._scalar = real  # type: ignore[method-assign]
    assert [r.unexpected_count for r in repeated] == [2, 2, 0] and len(exact) == 3  # x is a double: counted exactly


def test_every_declared_check_compiles_to_sql() -> None:
    for suite in declared_suites():
        for check in suite.checks:
            assert check.expectation in expectations.COMPILED, (suite.name, check)


def test_an_unknown_expectation_is_refused_naming_suite_and_rule() -> None:
    odd = Suite("odd", "select * from t", (Check("ExpectColumnValuesToMatchJsonSchema", {"column": "x"}, "json"),))
    with pytest.raises(expectations.UnsupportedCheck, match=r"suite 'odd': 'json'.*MatchJsonSchema"):
        run_suites(_con(), suites=[odd])


# The copy check as first written: every game's seats and event log fingerprinted (the gate's query narrows first).
COPIES_REFERENCE = """
    with fp as (
        select g.game_id, g.variant, g.seed,
               (select string_agg(p.seat || ':' || p.name || ':' || p.role || ':' || coalesce(p.agent, ''), ','
                                  order by p.seat) from raw_players p where p.game_id = g.game_id) as seats,
               (select md5(string_agg(e.seq || '|' || e.type || '|' || coalesce(e.actor, '') || '|'
                                      || coalesce(e.target, '') || '|' || coalesce(e.text, ''), chr(30) order by e.seq))
                from raw_events e where e.game_id = g.game_id) as events_md5
        from raw_games g
    )
    select variant, seed, count(*) as n_copies, list(game_id order by game_id) as game_ids
    from fp where events_md5 is not null and seed is not null
    group by variant, seed, seats, events_md5 having count(*) > 1"""


def test_the_copy_check_finds_what_fingerprinting_every_game_finds() -> None:
    con = duckdb.connect()
    con.execute("create table raw_games (game_id varchar, variant varchar, seed ubigint)")
    con.execute("create table raw_players (game_id varchar, seat integer, name varchar, role varchar, agent varchar)")
    con.execute("create table raw_events (game_id varchar, seq integer, type varchar, actor varchar, target varchar, "
                "text varchar)")
    games = {
        # id: (variant, seed, agents, last event's text)
        "a": ("mini", 1, ("x", "y"), "bye"),
        "a-copy": ("mini", 1, ("x", "y"), "bye"),  # a copy
        "a-copy-2": ("mini", 1, ("x", "y"), "bye"),  # and another
        "b": ("mini", 1, ("x", "z"), "bye"),  # same seed, other seats
        "c": ("mini", 1, ("x", "y"), "other"),  # same seed and seats, another log
        "d": ("classic", 1, ("x", "y"), "bye"),  # another variant
        "e": ("mini", 2, ("x", None), "bye"),  # a null agent reads as '' in the fingerprint ...
        "e-copy": ("mini", 2, ("x", ""), "bye"),  # ... so this is a copy
        "f": ("mini", None, ("x", "y"), "bye"),  # no seed: never a copy
        "f-copy": ("mini", None, ("x", "y"), "bye"),
        "g": ("mini", 3, ("x", "y"), None),  # no events: never a copy
        "g-copy": ("mini", 3, ("x", "y"), None),
        "h": ("mini", 4, ("x", "y"), "bye"),  # an extra seat with a null name does not change the seats
        "h-copy": ("mini", 4, ("x", "y"), "bye"),
    }
    for gid, (variant, seed, agents, text) in games.items():
        con.execute("insert into raw_games values (?, ?, ?)", [gid, variant, seed])
        for seat, agent in enumerate(agents):
            con.execute("insert into raw_players values (?, ?, ?, 'villager', ?)", [gid, seat, f"p{seat}", agent])
        if gid == "h":
            con.execute("insert into raw_players values ('h', 9, null, 'villager', 'x')")
        if text is not None:
            con.execute("insert into raw_events values (?, 0, 'message', 'p0', null, 'hi'), (?, 1, 'message', 'p1', "
                        "null, ?)", [gid, gid, text])
    # The same events in another order: not a copy (the fingerprint is order-free over events, but each event's
    # seq is inside what it hashes).
    for gid, texts in {"i": ("hi", "bye"), "i-swapped": ("bye", "hi")}.items():
        con.execute("insert into raw_games values (?, 'mini', 5)", [gid])
        for seat, agent in enumerate(("x", "y")):
            con.execute("insert into raw_players values (?, ?, ?, 'villager', ?)", [gid, seat, f"p{seat}", agent])
        for seq, text in enumerate(texts):
            con.execute("insert into raw_events values (?, ?, 'message', 'p0', null, ?)", [gid, seq, text])
    query = next(s for s in declared_suites() if s.name == "copied_games").query
    found = sorted(con.sql(query).fetchall(), key=str)
    assert found == sorted(con.sql(COPIES_REFERENCE).fetchall(), key=str)
    assert sorted(ids for *_, ids in found) == [["a", "a-copy", "a-copy-2"], ["e", "e-copy"], ["h", "h-copy"]]
