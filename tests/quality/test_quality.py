"""The quality gate: GX suites + SQL asserts, stored results, and publishing blocked by corrupted raw data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.quality.gate import QualityGateError
from mafiabench.warehouse.builds import gate_passed, latest_build
from mafiabench.warehouse.raw import load_records
from support import gate_verdicts
from support.records import cell_records, design, engine_records, fresh_con, mini_record, rotated_seats, rows

pytestmark = pytest.mark.slow  # a long file: it starts early (tests/conftest.py), not last


def clean_con() -> duckdb.DuckDBPyConnection:
    con = fresh_con()
    call = {"index": 0, "player": "Alice", "action": "vote", "phase": "day", "round": 1, "provider": "fake",
            "model": "X", "started_at": "2026-01-01T00:00:00+00:00", "latency_ms": 12.5, "attempts": 1,
            "input_tokens": 120, "output_tokens": 6, "cached_tokens": 0, "error_class": None, "finish_reason": "stop",
            "response": "Bob", "parse": {"format_failure": False, "error": None}, "request": {}}
    recs = cell_records("h", n=6, mafia_wins=2, models="X", design=design("homogeneous|X", None, "X", "X"),
                        calls=[call])
    recs += engine_records(10)
    recs += engine_records(3, seed=1, variant="classic", rules={"n_players": 6, "n_mafia": 1, "decision": "belief"})
    load_records(con, recs)
    return con


def test_clean_data_passes_and_is_published() -> None:
    con = clean_con()
    result = build_warehouse(con)
    assert result.passed and result.published and gate_passed(con)
    assert not result.failures
    gate_verdicts.check("clean", result.validation)
    stored = rows(con, "select * from validation_results where build_id = ?", [result.build_id])
    assert len(stored) == len(result.validation) > 20
    assert all(r["success"] for r in stored)
    suites = {r["suite"] for r in stored}
    assert {"raw_games", "raw_players", "game_checks", "valid_game_checks", "vote_violations", "beliefs", "mart_rates",
            "homogeneous_cells", "dbt_tests"} <= suites
    build = latest_build(con)
    assert build is not None and build["build_id"] == result.build_id and build["status"] == "passed"
    # Landing a new game makes the published marts stale until the next build.
    load_records(con, [mini_record("late")])
    assert not gate_passed(con)
    build_warehouse(con)
    assert gate_passed(con)


def test_empty_warehouse_is_refused(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    """A gate over no games proves nothing: the build names the expectation instead of publishing empty marts."""
    con = fresh_warehouse
    result = build_warehouse(con, raise_on_failure=False)
    assert not result.published and not gate_passed(con)
    gate_verdicts.check("empty warehouse", result.validation)
    assert [f.rule for f in result.failures] == ["games were landed (a gate over no games proves nothing)",
                                                 "at most 50% of the simulated games are invalid or unscored"]


def _failures(con: duckdb.DuckDBPyConnection, case: str, **build: object) -> dict[str, list[dict[str, object]]]:
    result = build_warehouse(con, raise_on_failure=False, **build)  # type: ignore[arg-type]
    assert not result.published
    gate_verdicts.check(case, result.validation)
    return {f.rule: f.failing_rows for f in result.failures}


def test_all_games_invalid_fails_the_build_naming_why(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    load_records(con, cell_records("x", n=5, mafia_wins=2, models="X", valid=False,
                                   invalid_reason="inconsistent memories"))
    failed = _failures(con, "all games invalid")
    assert failed["at most 50% of the simulated games are invalid or unscored"] == [
        {"n_games": 5, "n_scored": 0, "n_simulated": 5, "unusable_share": 1.0, "main_reason": "inconsistent memories"}]
    assert failed["every simulated study that has games has a scored game"] == [
        {"study": "source:simulation", "n_games": 5, "n_scored": 0, "main_reason": "inconsistent memories"}]
    with pytest.raises(QualityGateError, match="at most 50% of the simulated games are invalid or unscored"):
        build_warehouse(con)


def test_the_unusable_share_is_a_setting(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    # 10 games of one study: their seats turned game by game, so that the mafioso is not always listed first
    recs = cell_records("ok", n=4, mafia_wins=2, models="X", rotate_seats=True)
    recs += [mini_record(f"bad-{i}", models="X", valid=False, invalid_reason="no votes cast",
                         seats=rotated_seats(i + 1)) for i in range(6)]
    load_records(con, recs)
    failed = _failures(con, "unusable share")
    assert list(failed) == ["at most 50% of the simulated games are invalid or unscored"]
    share = failed["at most 50% of the simulated games are invalid or unscored"][0]["unusable_share"]
    assert share == pytest.approx(0.6)
    result = build_warehouse(con, max_unusable=0.7)
    assert result.published
    gate_verdicts.check("unusable share under a higher threshold", result.validation)


def test_a_capability_cell_with_games_but_none_scored_fails(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    recs = cell_records("h", n=6, mafia_wins=2, models="X", design=design("homogeneous|X", None, "X", "X"),
                        rotate_seats=True)
    recs += cell_records("h2", n=6, mafia_wins=3, models="Y", design=design("homogeneous|Y", None, "Y", "Y"),
                         rotate_seats=True)
    # one deceive cell whose games were all flagged invalid: 2 of 14 games, far under the share threshold
    recs += cell_records("d", n=2, mafia_wins=1, models={"mafioso": "Y", "detective": "X", "villager": "X"},
                         design=design("deceive|Y|X", "deceive", "Y", "X"), valid=False,
                         invalid_reason="inconsistent memories")
    load_records(con, recs)
    failed = _failures(con, "capability cell unscored")
    assert list(failed) == ["every capability cell of a simulated study that has games has a scored game"]
    assert failed["every capability cell of a simulated study that has games has a scored game"] == [
        {"study": "exp", "prompt_version": "v4.1", "capability": "deceive", "background": "X", "target_model": "Y",
         "n": 0, "n_unscored": 2}]


def test_the_homogeneous_invariant_over_no_scored_game_fails(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    """Over n = 0 every posterior mean is 1/2, so deceive + detect = 1 and detect = disclose hold for nothing: the
    invariant's own checks (GX suite and SQL assert) refuse it, not only the empty-cell rule."""
    con = fresh_warehouse
    recs = cell_records("ok", n=8, mafia_wins=3, models="X", design=design("homogeneous|X", None, "X", "X"))
    recs += cell_records("z", n=2, mafia_wins=1, models="Z", design=design("homogeneous|Z", None, "Z", "Z"),
                         valid=False, invalid_reason="technical failure")
    load_records(con, recs)
    failed = _failures(con, "homogeneous cell unscored")
    assert "homogeneous cells: the invariant is checked on scored games (n > 0)" in failed
    assert failed["homogeneous cells: the invariant is checked on scored games (n > 0)"][0]["target_model"] == "Z"
    sql_rule = next(r for r in failed if r.startswith("in a homogeneous cell"))
    assert failed[sql_rule][0]["target_model"] == "Z" and failed[sql_rule][0]["n_deceive"] == 0


def _duplicate_game(con: duckdb.DuckDBPyConnection) -> None:
    # A landing bug that wrote one game twice: the raw_games primary key would refuse it, so drop the key first
    # (as an older or hand-made warehouse might lack it) and copy every row of the game.
    con.execute("create table _g as select * from raw_games; drop table raw_games; alter table _g rename to raw_games")
    for table in ("raw_games", "raw_players", "raw_events"):
        con.execute(f"insert into {table} select * from {table} where game_id = 'h-1'")


CASES = {
    "duplicated game": (
        _duplicate_game,
        ["no duplicate game ids", "event seq contiguous per game", "h-1"],
    ),
    "vote by a dead player": (
        # Diana was killed in the night; make her cast Charlie's vote.
        lambda c: c.execute("update raw_events set actor = 'Diana' "
                            "where game_id = 'h-2' and type = 'vote' and actor = 'Charlie'"),
        ["votes only by active players for other active players", "h-2", "Diana", "voter not active"],
    ),
    "negative tokens": (
        lambda c: c.execute("update raw_model_calls set output_tokens = -7 where game_id = 'h-1'"),
        ["model calls: token counts are not negative", "h-1"],
    ),
    "negative latency": (
        lambda c: c.execute("update raw_model_calls set latency_ms = -3.5 where game_id = 'h-2'"),
        ["model calls: latency is not negative", "h-2"],
    ),
    "zero attempts": (
        lambda c: c.execute("update raw_model_calls set attempts = 0 where game_id = 'h-3'"),
        ["model calls: every call made at least one attempt", "h-3"],
    ),
    "orphan player rows": (
        lambda c: c.execute("insert into raw_players select * replace ('ghost-game' as game_id) from raw_players "
                            "where game_id = 'h-1'"),
        ["no orphan rows", "ghost-game", "raw_players"],
    ),
    "game copied under another id": (
        lambda c: [c.execute(f"insert into {t} select * replace ('h-1-copy' as game_id) from {t} where game_id = 'h-1'")
                   for t in ("raw_games", "raw_players", "raw_events", "raw_model_calls")],
        ["no game copied under another id", "h-1-copy"],
    ),
    "mafioso kills himself": (
        lambda c: c.execute("update raw_events set target = actor where game_id = 'h-4' and type = 'kill'"),
        ["the mafia never kills one of its own", "h-4"],
    ),
    "blank model name": (
        lambda c: c.execute("update raw_players set model = ' ' where game_id = 'h-4'"),
        ["no empty model names", "h-4"],
    ),
    "missing winner": (
        lambda c: c.execute("update raw_games set winner = null where game_id = 'h-3'"),
        ["one winner per finished game", "h-3"],
    ),
}


@pytest.fixture(scope="module")
def published_clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean warehouse built and published once for the module (each case corrupts a copy)."""
    con = clean_con()
    build_warehouse(con)
    assert gate_passed(con)
    path = Path(con.execute("select path from duckdb_databases() where database_name = current_database()")
                .fetchall()[0][0])
    con.close()
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_corrupted_raw_data_fails_the_gate_with_a_clear_message(
    case: str, published_clean: Path, tmp_path: Path
) -> None:
    corrupt, expected = CASES[case]
    shutil.copy(published_clean, tmp_path / "w.duckdb")
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    assert gate_passed(con)
    published = {t: rows(con, f"select * from {t} order by all") for t in ("mart_win_rates", "fct_games", "stg_games")}
    corrupt(con)
    with pytest.raises(QualityGateError) as err:
        # Whole: an incremental build recomputes the per-game models for the games landed since the published build
        # (the landing step is the raw tables' only writer); rows edited in place by hand are not landed games.
        build_warehouse(con, full_refresh=True)
    # The refused build was staged only: readers still see the previously published marts, unchanged (the
    # staging view reads raw rows, so only the tables are compared), and nothing staged is left behind.
    for table in ("mart_win_rates", "fct_games"):
        assert rows(con, f"select * from {table} order by all") == published[table], table
    staged = rows(con, "select table_name from duckdb_tables() where starts_with(table_name, '__staged') "
                       "union all select view_name from duckdb_views() where starts_with(view_name, '__staged')")
    assert staged == []
    gate_verdicts.check(case, err.value.result.validation)
    message = str(err.value)
    assert message.startswith("quality gate failed for build")
    assert "not published" in message
    for text in expected:
        assert text in message, (text, message)
    assert not gate_passed(con)
    build = latest_build(con)
    assert build is not None and build["status"] == "failed" and not build["published"]
    failed = rows(con, "select * from validation_results where build_id = ? and not success", [build["build_id"]])
    assert failed and all(r["unexpected_count"] != 0 for r in failed)
    samples = [json.loads(r["failing_rows_json"]) for r in failed]
    assert any(sample for sample in samples)


def test_failure_can_be_returned_instead_of_raised() -> None:
    con = clean_con()
    con.execute("update raw_games set winner = null where game_id = 'h-3'")
    result = build_warehouse(con, raise_on_failure=False)
    assert not result.passed and not result.published
    gate_verdicts.check("missing winner returned", result.validation)
    rules = {f.rule for f in result.failures}
    assert "one winner per finished game" in rules
    failing = next(f for f in result.failures if f.suite == "valid_game_checks")
    assert failing.failing_rows[0]["game_id"] == "h-3" and failing.unexpected_count == 1


def test_unvalidated_build_is_not_published(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    result = build_warehouse(con, validate=False)
    assert not result.published and not gate_passed(con)
    assert "skipped" in result.summary()


def test_games_flagged_invalid_do_not_block_publishing(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    # An imported game the importer flagged invalid (here: a vote by the night victim, no winner) is excluded
    # from every rate; the gate's rules about play skip it, its structural checks still apply.
    con = fresh_warehouse
    bad = mini_record("bad", models="X", votes={"Alice": "Bob", "Bob": "Alice", "Diana": "Alice"}, valid=False,
                      invalid_reason="technical failure", source="naacl")
    load_records(con, [bad, *cell_records("ok", n=2, mafia_wins=1, models="X", source="naacl")])
    con.execute("update raw_games set winner = null where game_id = 'bad'")
    result = build_warehouse(con)
    assert result.published
    gate_verdicts.check("games flagged invalid", result.validation)
