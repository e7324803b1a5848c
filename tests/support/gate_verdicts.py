"""The gate's verdicts, check for check, against golden files (`tests/golden/gate/<case>.json`).

The golden files were first recorded (commit f6f9c88) from the gate as it was before its rules moved into the
models' YAML (the 280-line `SUITES` literal of `quality/gate.py` and the singular tests of `transform/sql/tests/`),
on the planted-corruption cases of `test_quality` and `test_sql_asserts`; after the move the verdicts were equal
check for check, the retired double rules' verdicts given by their survivors (`SURVIVORS`). They were recorded again
when the gate learnt that an imported game's facts of play are data (issue 27): the diff of this folder in that
commit lists every verdict that changed. Every build of a case must give the same verdict for every recorded check
(suite, expectation, rule, arguments, success, counts); checks declared since (new models' rules) are not compared.
Regenerate deliberately with UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parents[1] / "golden" / "gate"

# Rules that were declared twice or more (issue 29: the same fact as a GX check and a dbt test, or on tables that
# carry the same values) now exist once. A retired check's verdict must be its survivor's: (suite, rule[,
# expectation]) of the checks that now hold the rule alone, all of which pass exactly when the retired one passed.
NO_EMPTY_MODELS = ("raw_players", "no empty model names")
SURVIVORS: dict[tuple[str, str], tuple[str, ...] | list[tuple[str, ...]]] = {
    ("dbt_tests", "assert_unique_game_ids"): ("raw_games", "no duplicate game ids"),
    ("dbt_tests", "assert_event_seq_contiguous"): ("game_checks", "event seq contiguous per game"),
    ("dbt_tests", "assert_no_empty_model_names"): NO_EMPTY_MODELS,
    # the GX check of int_game_checks.one_winner_ok, on valid games, is this test's rule word for word
    ("dbt_tests", "assert_one_winner_per_finished_game"): ("valid_game_checks", "one winner per finished game"),
    # each stored distribution: no null, each probability in [0, 1] (GX `beliefs`), summing to 1 (`belief_sums`)
    ("dbt_tests", "assert_belief_probabilities_valid"): [
        ("beliefs", "belief probabilities valid"),
        ("belief_sums", "belief probabilities valid (each distribution sums to 1)")],
    ("game_checks", "expect_column_values_to_be_between:n_empty_models"): NO_EMPTY_MODELS,  # stg_players.model per game
    # the same names, one row per model: each of its two checks has its twin on raw_players
    ("dim_models", "expect_column_values_to_not_be_null:model"): (
        *NO_EMPTY_MODELS, "expect_column_values_to_not_be_null"),
    ("dim_models", "expect_column_values_to_not_match_regex:model"): (
        *NO_EMPTY_MODELS, "expect_column_values_to_not_match_regex"),
}
# A singular test's rule was the first line of its `-- rule:` comment; moved into the YAML, it is the whole sentence.
RULES_NOW_WHOLE = {
    "assert_mini_mafia_composition": "a valid Mini-Mafia game seats four players: one mafioso, one detective, two "
                                     "villagers; every game's names and seats are distinct",
    "assert_homogeneous_cells_invariant": "in a homogeneous cell (one model in every role) the same games feed all "
    "three capabilities, so deceive + detect = 1 and detect = disclose (posterior means), with equal n, and n > 0 "
    "(over no scored game every posterior mean is 1/2 and the identities would hold for nothing)",
}


def verdicts(results: Iterable[Any]) -> list[dict[str, Any]]:
    """One plain record per check, sorted (the order of suites is the runner's, not a verdict). A dbt test's file
    is left out: the rule moved files, its verdict did not."""
    out = []
    for r in results:
        kwargs = {k: v for k, v in r.kwargs.items() if k != "file"}
        out.append({"suite": r.suite, "expectation": r.expectation, "rule": r.rule, "kwargs": kwargs,
                    "success": r.success, "element_count": r.element_count, "unexpected_count": r.unexpected_count})
    return sorted(out, key=lambda v: json.dumps(v, sort_keys=True))


def _retired_key(v: dict[str, Any]) -> tuple[str, str]:
    if v["suite"] == "dbt_tests":
        return ("dbt_tests", v["expectation"])
    return (v["suite"], f"{v['expectation']}:{v['kwargs'].get('column')}")


def _identity(v: dict[str, Any]) -> str:
    """A check, without its verdict."""
    return json.dumps({k: v[k] for k in ("suite", "expectation", "rule", "kwargs")}, sort_keys=True)


def _file(case: str) -> Path:
    return GOLDEN / (re.sub(r"[^a-z0-9]+", "_", case.lower()).strip("_") + ".json")


def check(case: str, results: Iterable[Any], beside: Iterable[Any] = ()) -> None:
    """Compare a build's verdicts with the case's golden file (write it under UPDATE_GOLDEN=1): the same, check for
    check, but for the retired double rules, whose survivors must give their verdict (found among `results`, or
    `beside`: the GX results of a case that records only the dbt tests)."""
    got = verdicts(results)
    path = _file(case)
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    survivors = got + verdicts(beside)
    expected = []
    for v in json.loads(path.read_text()):
        survivor = SURVIVORS.get(_retired_key(v))
        if survivor is not None:
            targets = survivor if isinstance(survivor, list) else [survivor]
            now = [g["success"] for g in survivors for t in targets
                   if (g["suite"], g["rule"], g["expectation"])[:len(t)] == t]
            assert now and all(now) == v["success"], (case, v, survivor, now)
            continue
        if v["suite"] == "dbt_tests" and v["expectation"] in RULES_NOW_WHOLE:
            assert RULES_NOW_WHOLE[v["expectation"]].startswith(v["rule"])
            v = {**v, "rule": RULES_NOW_WHOLE[v["expectation"]]}
        expected.append(v)
    expected.sort(key=lambda v: json.dumps(v, sort_keys=True))
    # A rule declared after the recording (a new model's suite, a new data test) adds verdicts: they are not part of
    # the comparison. Every recorded check must give its verdict again; none may change or vanish.
    known = {_identity(v) for v in expected}
    compared = [g for g in got if _identity(g) in known]
    assert compared == expected, _diff(case, expected, compared)


def _diff(case: str, expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> str:
    key = [json.dumps(v, sort_keys=True) for v in expected]
    new = [json.dumps(v, sort_keys=True) for v in got]
    lines = [f"gate verdicts changed for case {case!r}:"]
    lines += [f"- {v}" for v in key if v not in new]
    lines += [f"+ {v}" for v in new if v not in key]
    return "\n".join(lines)
