"""A gate that knows what is data (issue 27): the rules our simulator never breaks (the mafia never kills its own,
votes only by active players, a Mini-Mafia table of four) refuse a build when a simulated game breaks them; in an
imported game the same facts are the dataset's, counted in `mart_dataset_observations` and published. An imported
dataset's invalid games do not count against the build's unusable share; simulated ones do."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import load_records
from support.records import mini_record, rows

# A human game in which one mafioso killed the other on night 1 (c21a71b0..., ca142216... of the Dallinger
# dataset): five seats, two of them mafia, Eve found dead in the morning; town then votes Alice out.
TEAM_SEATS = (("Alice", "mafioso"), ("Eve", "mafioso"), ("Bob", "detective"), ("Charlie", "villager"),
              ("Diana", "villager"))


def teammate_killed(game_id: str, source: str) -> Any:
    return mini_record(game_id, seats=TEAM_SEATS, victim="Eve", source=source)


def dead_voter(game_id: str, source: str) -> Any:
    """Diana, killed in the night, still votes (in a human game: a vote the importer did not flag)."""
    return mini_record(game_id, votes={"Alice": "Bob", "Bob": "Alice", "Diana": "Alice"}, source=source)


def test_an_imported_teammate_kill_is_published_and_counted(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    load_records(con, [teammate_killed("human-1", "dallinger"), dead_voter("human-2", "dallinger"),
                       *(mini_record(f"human-{i}", source="dallinger") for i in range(3, 6))])
    result = build_warehouse(con)
    assert result.published
    assert rows(con, "select * from mart_dataset_observations order by observation") == [
        {"dataset": "dallinger", "study": "source:dallinger", "observation": "inactive_vote",
         "rule": "votes only by active players for other active players", "n_games": 1, "n_dataset_games": 5,
         "n_rows": 1, "example_game_ids": ["human-2"]},
        {"dataset": "dallinger", "study": "source:dallinger", "observation": "mafia_killed_own",
         "rule": "the mafia never kills one of its own (nor a mafioso himself) at night", "n_games": 1,
         "n_dataset_games": 5, "n_rows": 2, "example_game_ids": ["human-1"]},  # the kill and the death
        {"dataset": "dallinger", "study": "source:dallinger", "observation": "mini_mafia_composition",
         "rule": "mini-mafia games have four players: 1 mafioso, 1 detective, 2 villagers", "n_games": 1,
         "n_dataset_games": 5, "n_rows": 1, "example_game_ids": ["human-1"]},
    ]
    # The games are results like any other: all five are in the published marts.
    assert rows(con, "select count(*) as n from fct_games where is_scored") == [{"n": 5}]
    passed = {r.suite: r.success for r in result.validation if r.suite in (
        "mafia_kills", "vote_violations", "mini_mafia_composition")}
    assert passed == {"mafia_kills": True, "vote_violations": True, "mini_mafia_composition": True}


@pytest.mark.parametrize(("make", "suites", "shown"), [
    (teammate_killed, {"mafia_kills", "mini_mafia_composition"}, "Eve (mafioso) killed at night"),
    (dead_voter, {"vote_violations"}, "Diana->Alice at seq "),
])
def test_the_same_fact_in_a_simulated_game_fails_the_gate(
    make: Any, suites: set[str], shown: str, fresh_warehouse: duckdb.DuckDBPyConnection
) -> None:
    con = fresh_warehouse
    load_records(con, [make("sim-1", "simulation"), make("human-1", "dallinger"),
                       *(mini_record(f"sim-{i}") for i in range(2, 5))])
    result = build_warehouse(con, raise_on_failure=False)
    assert not result.published
    failed = {f.suite: f for f in result.failures}
    assert set(failed) == suites
    for suite in suites:  # only the simulated game is named: the imported one is a fact of its dataset
        assert {row["game_id"] for row in failed[suite].failing_rows} == {"sim-1"}
    assert any(str(row.get("detail")).startswith(shown) for f in result.failures for row in f.failing_rows)
    if make is dead_voter:
        assert failed["vote_violations"].failing_rows[0]["detail"].endswith("(voter not active)")


def test_an_imported_datasets_invalid_games_do_not_keep_its_valid_games_from_publishing(
    fresh_warehouse: duckdb.DuckDBPyConnection
) -> None:
    con = fresh_warehouse
    recs = [mini_record(f"ok-{i}", source="dallinger") for i in range(2)]
    recs += [mini_record(f"bad-{i}", source="dallinger", valid=False, invalid_reason="technical failure")
             for i in range(3)]
    load_records(con, recs)
    result = build_warehouse(con)
    assert result.published  # 60% invalid, over the 50% a simulated study may have
    usable = next(r for r in result.validation if r.suite == "usable_games" and "simulated" in r.rule)
    assert usable.success
    assert rows(con, "select count(*) as n from fct_games where is_scored") == [{"n": 2}]
    assert rows(con, "select * from mart_dataset_invalid") == [
        {"source": "dallinger", "invalid_reason": "technical failure", "games": 3}]


def test_simulated_games_keep_the_threshold_beside_an_imported_dataset(
    fresh_warehouse: duckdb.DuckDBPyConnection
) -> None:
    con = fresh_warehouse
    recs = [mini_record(f"h-{i}", source="dallinger") for i in range(10)]  # 10 valid imported games
    recs += [mini_record("sim-ok")] + [mini_record(f"sim-bad-{i}", valid=False, invalid_reason="no votes cast")
                                       for i in range(2)]
    load_records(con, recs)
    result = build_warehouse(con, raise_on_failure=False)
    assert not result.published
    (share,) = [f for f in result.failures if f.suite == "usable_games"]
    assert share.rule == "at most 50% of the simulated games are invalid or unscored"
    assert share.failing_rows[0]["n_simulated"] == 3 and share.failing_rows[0]["main_reason"] == "no votes cast"
