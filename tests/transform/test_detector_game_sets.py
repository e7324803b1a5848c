"""Tables I-III over the human games valid by the importer's rules beside every game read (issue 35 item 4): a study
that pins games the rules exclude (Hidden in Plain Text's 28 = 25 valid + 3 inferred) gets both sets, each
labelled, and the inferred games are never counted among the rule-valid ones. Hand-computed on the import fixtures
(tests/fixtures/datasets/dallinger, the real export's shape): H is valid (9 players, 2 mafiosos, 3 day cuts), B
(a dropout: technical failure; 5 players, 1 mafioso) and D (a night without a mafia vote; 4 players, 1 mafioso) are
excluded by the rules and read as a pinned list would read them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench.protocols import rows_for_warehouse
from mafiabench.quality.gate import run_suites
from mafiabench.study.protocol import protocol_card
from mafiabench.study.spec import load_experiment
from mafiabench.transform.models.detector import detector_tables, pinned_sets
from mafiabench.warehouse.raw import connect, load_detections, record_protocol_card
from support.gate import declared_suites

ROOT = Path(__file__).resolve().parents[2]
H = "ibraheem2022-human-4c5d6e7f-8091-a2b3-c4d5-e6f708192a3b"
B = "ibraheem2022-human-b2c3d4e5f60718293a4b5c6d7e8f90a1"
D = "ibraheem2022-human-d4e5f60718293a4b5c6d7e8f90a1b2c3"
VALID = "1 game valid by the importer's rules"
INFERRED = "3: 1 + 2 inferred to match the paper's counts"


def detection(gid: str, cut: int, n: int, predicted: list[str]) -> dict[str, Any]:
    return {"game_id": gid, "cut": cut, "detector": "d", "prompt_sha256": "", "k": len(predicted), "n_candidates": n,
            "predicted": predicted, "format_failure": False, "random_fallback": False,
            "transcript_sha256": f"{gid}-{cut}", "attempts": 0}


@pytest.fixture
def warehouse(tmp_path: Path, import_fixtures: Callable[..., None]) -> duckdb.DuckDBPyConnection:
    con = connect(tmp_path / "w.duckdb")
    import_fixtures(con, "dallinger")
    assert dict(con.execute("select game_id, valid from raw_games where game_id in (?, ?, ?)", [H, B, D]).fetchall()) \
        == {H: True, B: False, D: False}
    load_detections(con, [
        detection(H, 1, 9, ["Nora Vance", "Ada Bell"]),  # single
        detection(H, 2, 9, ["Omar Quist", "Nora Vance"]),  # single and exact
        detection(H, 3, 9, ["Ada Bell", "Ben Cole"]),  # none
        detection(B, 1, 5, ["Gus Hall"]),  # single and exact (one mafioso)
        detection(D, 1, 4, ["Rex Sa"]),  # none
    ])
    return con


def table(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["game_set"], r["row_label"]): r for r in detector_tables(con)["mart_detector_tables"].to_dicts()}


def figures(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["n_transcripts"], r["n_games"], r["n_single"], r["n_exact"], r["source_baseline_single_fraction"],
            r["source_baseline_exact_fraction"])


def test_tables_two_and_three_over_the_rule_valid_games_beside_every_game_read(
        warehouse: duckdb.DuckDBPyConnection) -> None:
    rows = table(warehouse)
    assert sorted(rows) == [("read", "1"), ("read", "2"), ("read", "3"), ("read", "Average"),
                            ("rule_valid", "1"), ("rule_valid", "2"), ("rule_valid", "3"), ("rule_valid", "Average")]
    # Rule-valid: H alone. n = 9, k = 2: P(single) = 1 - C(7,2)/C(9,2) = 1 - 21/36 = 5/12, P(exact) = 1/36.
    assert figures(rows[("rule_valid", "1")]) == (1, 1, 1, 0, "5/12", "1/36")
    assert figures(rows[("rule_valid", "2")]) == (1, 1, 1, 1, "5/12", "1/36")
    assert figures(rows[("rule_valid", "3")]) == (1, 1, 0, 0, "5/12", "1/36")
    assert figures(rows[("rule_valid", "Average")]) == (3, 1, 2, 1, "5/12", "1/36")
    # Every game read: H, B (1/5, 1/5) and D (1/4, 1/4); the source's baseline counts each game once:
    # single (5/12 + 1/5 + 1/4) / 3 = 13/45, exact (1/36 + 1/5 + 1/4) / 3 = 43/270.
    assert figures(rows[("read", "1")]) == (3, 3, 2, 1, "13/45", "43/270")
    assert figures(rows[("read", "2")]) == (1, 1, 1, 1, "13/45", "43/270")
    assert figures(rows[("read", "Average")]) == (5, 3, 3, 2, "13/45", "43/270")
    assert rows[("read", "Average")]["single_rate"] == pytest.approx(3 / 5)
    assert rows[("rule_valid", "Average")]["exact_rate"] == pytest.approx(1 / 3)
    # No study's card records the pinned set here: the 2 are named as excluded, not as inferred.
    assert {r["game_set_label"] for k, r in rows.items() if k[0] == "rule_valid"} == {VALID}
    assert {r["game_set_label"] for k, r in rows.items() if k[0] == "read"} == {
        "3: 1 + 2 the importer's rules exclude (read by a game list or --include-invalid)"}
    detections = {r["game_id"]: r["valid_by_rules"] for r in detector_tables(warehouse)["mart_detections"].to_dicts()}
    assert detections == {H: True, B: False, D: False}
    warehouse.close()


def test_the_inferred_games_are_never_counted_among_the_rule_valid(warehouse: duckdb.DuckDBPyConnection) -> None:
    """Were B and D counted as valid (the rule-valid set taken from every game read), the rule-valid rows would hold
    three games and five transcripts; they hold H alone, and Table I says the same."""
    rows = table(warehouse)
    valid = [r for (s, _), r in rows.items() if s == "rule_valid"]
    assert {r["n_games"] for r in valid} == {1} and sum(r["n_transcripts"] for r in valid if r["day"]) == 3
    datasets = {r["game_set"]: r for r in detector_tables(warehouse)["mart_detector_datasets"].to_dicts()}
    assert sorted(datasets) == ["read", "rule_valid"]
    # Table I, by hand: rule-valid H: 9 players, 3 days; every game read: 9, 5, 4 players (mean 6), 3, 1, 1 days.
    one = datasets["rule_valid"]
    assert (one["n_games"], one["participants_min"], one["participants_max"], one["days_mean"],
            one["game_set_label"]) == (1, 9, 9, 3.0, VALID)
    every = datasets["read"]
    assert (every["n_games"], every["participants_min"], every["participants_mean"], every["participants_max"],
            every["days_min"], every["days_max"]) == (3, 4, 6.0, 9, 1, 3)
    assert every["days_mean"] == pytest.approx(5 / 3)
    warehouse.close()


def test_a_study_card_that_pins_the_set_labels_it_inferred(warehouse: duckdb.DuckDBPyConnection) -> None:
    """The shipped experiment's card records its pinned set in the words the mart reads: 25 valid + 3 inferred."""
    card = protocol_card(load_experiment(ROOT / "experiments" / "hidden_in_plain_text.toml"))
    assert card is not None
    record_protocol_card(warehouse, card.experiment, rows_for_warehouse(card))
    assert pinned_sets(warehouse) == {(25, 3)}
    # A card recording this warehouse's own pinned set (1 valid + 2 inferred) names the read set as inferred.
    warehouse.execute("update raw_protocol_cards set experiment_value = ? where aspect = 'detector.human_set'",
                      [json.dumps("1 valid by the importer's rules + 2 inferred (B: a dropout; D: no mafia vote)")])
    rows = table(warehouse)
    assert rows[("read", "Average")]["game_set_label"] == INFERRED
    assert rows[("rule_valid", "Average")]["game_set_label"] == VALID
    datasets = {r["game_set"]: r["game_set_label"]
                for r in detector_tables(warehouse)["mart_detector_datasets"].to_dicts()}
    assert datasets == {"read": INFERRED, "rule_valid": VALID}
    warehouse.close()


def test_a_source_read_whole_by_the_rules_gets_one_set(warehouse: duckdb.DuckDBPyConnection) -> None:
    warehouse.execute("delete from raw_detections where game_id <> ?", [H])
    rows = table(warehouse)
    assert {s for s, _ in rows} == {"read"}
    assert rows[("read", "Average")]["game_set_label"] == VALID
    warehouse.close()


def test_the_gate_checks_each_sets_average_against_its_own_days(warehouse: duckdb.DuckDBPyConnection) -> None:
    """The tables suite pools each game set's day rows into its own Average row (two sets of one source side by
    side would otherwise sum into one)."""
    for name, frame in detector_tables(warehouse).items():
        warehouse.register("_f", frame.to_arrow())
        warehouse.execute(f"create or replace table {name} as select * from _f")
        warehouse.unregister("_f")
    suites = [s for s in declared_suites() if s.name == "mart_detector_tables"]
    rule = "detector tables: exact <= single <= transcripts, and the Average row pools the day rows"
    assert {r.rule: r.success for r in run_suites(warehouse, suites=suites)}[rule]
    warehouse.execute("update mart_detector_tables set n_single = n_single - 1 where row_label = 'Average' "
                      "and game_set = 'rule_valid'")
    assert not {r.rule: r.success for r in run_suites(warehouse, suites=suites)}[rule]
    warehouse.close()
