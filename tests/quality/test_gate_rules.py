"""Each data rule is declared once, beside what it guards: the gate's GX suites are read from the `meta.gx` of the
models' YAML (`quality.suites`), `transform/sql/tests/` keeps only rules that span several tables, and a badly
declared rule is refused with the file, the model and the check named. (That the gate's verdicts did not change when
its rules moved is `gate_verdicts`' golden comparison, run by every build of `test_quality` and `test_sql_asserts`.)
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from mafiabench.quality.gate import gate_suites
from mafiabench.quality.suites import RuleError, check_from_spec, suites_of
from mafiabench.transform.build.catalogue import model_docs
from mafiabench.transform.build.dbt_runner import PACKAGED_PROJECT
from support.gate import declared_suites


def _relations_declaring(rule: str) -> set[str]:
    return {name for name, doc in model_docs(PACKAGED_PROJECT).items()
            for suite in suites_of(name, doc["meta"], {"max_unusable": 0.5}, doc["yaml"])
            for check in suite.checks if check.rule == rule}


def _dbt_tests() -> dict[str, str]:
    """Every dbt data test the project declares: its name (or generic kind) -> where."""
    out = {p.stem: f"tests/{p.name}" for p in (PACKAGED_PROJECT / "tests").glob("*.sql")}
    for path in (PACKAGED_PROJECT / "models").rglob("*.yml"):
        text = path.read_text()
        out.update({m: str(path.relative_to(PACKAGED_PROJECT)) for m in re.findall(r"name: (assert_\w+)", text)})
    return out


@pytest.mark.parametrize(("rule", "relation"), [
    ("no duplicate game ids", "raw_games"),
    ("no empty model names", "raw_players"),
    ("event seq contiguous per game", "int_game_checks"),
])
def test_the_three_double_rules_are_declared_once(rule: str, relation: str) -> None:
    assert _relations_declaring(rule) == {relation}
    suites = [s for s in declared_suites() if any(c.rule == rule for c in s.checks)]
    assert len(suites) == 1
    tests = _dbt_tests()
    for gone in ("assert_unique_game_ids", "assert_no_empty_model_names", "assert_event_seq_contiguous"):
        assert gone not in tests


def test_singular_tests_only_span_several_tables() -> None:
    singular = sorted((PACKAGED_PROJECT / "tests").glob("*.sql"))
    assert singular
    for path in singular:
        tables = set(re.findall(r"\{\{\s*(?:ref|source)\(([^)]*)\)\s*\}\}", path.read_text()))
        assert len(tables) >= 2, f"{path.name} reads only {tables}: declare its rule in that model's YAML"


def test_every_declared_suite_is_read_and_named_once() -> None:
    suites = declared_suites()
    names = [s.name for s in suites]
    assert len(names) == len(set(names)) >= 18
    assert all(s.checks and s.query.lower().lstrip().startswith(("select", "with")) for s in suites)
    # every relation that declares a suite exists in the project (a model's SQL, a source, or a Python mart)
    docs = model_docs(PACKAGED_PROJECT)
    for name, doc in docs.items():
        if doc["meta"].get("gx") and doc["file"]:
            assert (PACKAGED_PROJECT / doc["file"]).is_file(), name


def test_the_build_setting_reaches_its_rule() -> None:
    usable = {s.name: s for s in declared_suites(0.25)}["usable_games"]
    share = next(c for c in usable.checks if c.kwargs.get("column") == "unusable_share")
    assert share.kwargs["max_value"] == 0.25
    assert share.rule == "at most 25% of the simulated games are invalid or unscored"
    with pytest.raises(Exception, match=r"max_unusable must be within \[0, 1\], got 1.5"):
        declared_suites(1.5)


def test_a_rule_added_to_a_models_yaml_is_run_by_the_gate(tmp_path: Path) -> None:
    project = tmp_path / "sql"
    shutil.copytree(PACKAGED_PROJECT, project)
    path = project / "models" / "marts" / "fct_games.yml"
    doc = yaml.safe_load(path.read_text())
    fct = next(m for m in doc["models"] if m["name"] == "fct_games")
    fct.setdefault("meta", {})["gx"] = [{"select": ["game_id", "days"], "checks": [
        {"between": "days", "min": 0, "rule": "a game lasts no negative number of days"}]}]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    suites = {s.name: s for s in gate_suites(model_docs(project))}
    assert suites["fct_games"].query == "select game_id, days from fct_games"
    assert [c.rule for c in suites["fct_games"].checks] == ["a game lasts no negative number of days"]


PARAMS = {"max_unusable": 0.5}


@pytest.mark.parametrize(("spec", "message"), [
    ({"unique": "game_id"}, "says the rule it enforces"),
    ({"rule": "x"}, "names exactly one of"),
    ({"unique": "a", "not_null": "a", "rule": "x"}, "names exactly one of"),
    ({"between": "x", "rule": "x"}, "gives `min`, `max` or both"),
    ({"between": "x", "min": "1e-9", "rule": "x"}, "`min` must be a number"),
    ({"between": "x", "max": {"param": "nope"}, "rule": "x"}, "unknown parameter 'nope'"),
    ({"in_set": "x", "rule": "x"}, "lists its `values`"),
    ({"in_set": "x", "values": [1], "min": 0, "rule": "x"}, r"unknown keys \['min'\]"),
    ({"no_rows": "yes", "rule": "x"}, "write `no_rows: true`"),
    ({"not_null": 3, "rule": "x"}, "names a column"),
    ({"not_null": "x", "rule": "at most {nope:.0%}"}, "names an unknown parameter"),
    ("unique game_id", "is a mapping"),
])
def test_a_badly_declared_check_is_refused_naming_where(spec: Any, message: str) -> None:
    with pytest.raises(RuleError, match=message) as err:
        check_from_spec(spec, PARAMS, "models/marts/fct_games.yml: fct_games: meta.gx[0].checks[1]")
    assert str(err.value).startswith("models/marts/fct_games.yml: fct_games: meta.gx[0].checks[1]: ")


@pytest.mark.parametrize(("meta", "message"), [
    ({"gx": {"checks": []}}, "is a list of suites"),
    ({"gx": [{"checks": []}]}, "has no checks"),
    ({"gx": [{"sql": "select 1", "select": ["a"], "checks": [{"no_rows": True, "rule": "x"}]}]}, "not both"),
    ({"gx": [{"query": "select 1", "checks": [{"no_rows": True, "rule": "x"}]}]}, "a suite has"),
])
def test_a_badly_declared_suite_is_refused(meta: dict[str, Any], message: str) -> None:
    with pytest.raises(RuleError, match=message):
        suites_of("fct_games", meta, PARAMS, "models/marts/fct_games.yml")


def test_two_suites_of_one_name_are_refused() -> None:
    docs = {t: {"meta": {"gx": [{"suite": "same", "checks": [{"no_rows": True, "rule": "x"}]}]}, "yaml": "f.yml"}
            for t in ("a", "b")}
    with pytest.raises(RuleError, match="two suites are named 'same'"):
        gate_suites(docs)
