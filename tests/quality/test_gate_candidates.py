"""The gate pulls only the rows a check could flag (`gate.candidate_sql`): on data full of edge cases every
expectation must give the same verdict, count and failing rows as GX on the whole frame."""

from __future__ import annotations

import duckdb

from mafiabench.quality.gate import Suite, candidate_sql, run_suites
from mafiabench.quality.validator import _Validator
from support.gate import CHECKS, _con, declared_suites


def test_narrowed_suites_give_the_verdicts_of_the_whole_frame() -> None:
    con = _con()
    validator = _Validator()
    for i, check in enumerate(CHECKS):
        suite = Suite(f"edge_case_{i}", "select * from t", (check,))
        assert candidate_sql(suite) is not None, check
        (narrowed,) = run_suites(con, suites=[suite])
        (whole,) = validator.validate(suite, con.sql(suite.query).df())
        assert not whole.success, check  # every check fails on these rows, so the comparison means something
        assert (narrowed.success, narrowed.unexpected_count, narrowed.element_count) == (
            whole.success, whole.unexpected_count, whole.element_count), check
        assert narrowed.failing_rows == whole.failing_rows, check


def test_clean_rows_are_not_pulled_but_counted() -> None:
    con = _con()
    con.execute("delete from t where id <> 1")
    con.execute("insert into t select r.i + 10, 'a', 'm' || r.i, 0.25, true, 'm' from range(1000) r(i)")
    suite = Suite("clean", "select * from t", CHECKS)
    assert con.sql(candidate_sql(suite)).fetchall() == []
    results = run_suites(con, suites=[suite])
    assert all(r.success and r.element_count == 1001 and r.unexpected_count == 0 for r in results)


def test_every_row_wise_suite_is_narrowed_and_table_level_ones_are_not() -> None:
    for suite in declared_suites():
        table_level = any(c.expectation == "ExpectTableRowCountToEqual" for c in suite.checks)
        assert (candidate_sql(suite) is None) == table_level, suite.name


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
