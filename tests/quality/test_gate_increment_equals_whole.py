"""A build that only adds games proves the suites over the raw tables from the increment's rows (quality.delta), and
its gate gives every expectation the verdict, counts and failing rows the whole suites give."""

from __future__ import annotations

from pathlib import Path

from support.gate_increments import RAW_SUITES, assert_same_gate, build, copy, gate_twice


def test_an_added_increment_is_gated_as_a_whole_gate_would(landed_increment: Path, tmp_path: Path) -> None:
    got, whole = gate_twice(landed_increment, tmp_path)
    assert got.published and any(m.materialized == "incremental" for m in got.models)
    assert got.proven_suites == RAW_SUITES
    assert_same_gate(got, whole)


def test_the_next_increment_is_proven_from_an_increment_gate(landed_increment: Path, tmp_path: Path) -> None:
    """A published build whose raw suites were proven vouches for its tables in turn (here an increment at another
    temperature, which turns fct_player_games.settings_varied for the published games of model X); an empty
    increment too."""
    from mafiabench.warehouse.raw import load_records
    from support.increments import games

    con = copy(landed_increment, tmp_path)
    try:
        assert build(con).proven_suites == RAW_SUITES
        load_records(con, games("c", 3, 2, temperature=0.2))
        again = build(con)
        assert again.published and again.proven_suites == RAW_SUITES
        varied = con.execute("select count(*) from fct_player_games where settings_varied").fetchone()
        assert varied is not None and varied[0] > 0
        nothing = build(con)
        assert nothing.published and nothing.proven_suites == RAW_SUITES
        gx = [r for r in nothing.validation if r.suite != "dbt_tests"]
        whole = build(con, whole_gate=True)
        assert [r for r in whole.validation if r.suite != "dbt_tests"] == gx
    finally:
        con.close()
