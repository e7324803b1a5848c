"""docs/catalogue.md is generated from the dbt project's YAML and must be kept current; every column of every mart
has a meaning, and the YAML lists exactly the columns the models build."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.transform import catalogue
from mafiabench.transform.python_models import PYTHON_MODELS
from test_marts_common import landed, rows

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def text() -> str:
    return catalogue.generate()


@pytest.fixture(scope="module")
def built():  # type: ignore[no-untyped-def]
    return landed([])


def test_catalogue_is_current(text: str) -> None:
    current = (ROOT / "docs" / "catalogue.md").read_text()
    assert current == text, "docs/catalogue.md is out of date: run `mafiabench catalogue`"


def test_every_mart_column_has_a_meaning(built) -> None:  # type: ignore[no-untyped-def]
    docs = catalogue.model_docs()
    marts = [n for n, d in docs.items() if d["layer"] == "marts"]
    assert {t for s in PYTHON_MODELS for t in s.outputs} <= set(marts)
    assert len(marts) > 20
    for name in marts:
        doc = docs[name]
        assert doc["description"].strip() and doc["grain"].strip(), name
        actual = [r["column_name"] for r in rows(built, f"select column_name from (describe \"{name}\")")]
        assert list(doc["columns"]) == actual, f"{name}: the YAML's columns differ from the built table's"
        empty = [c for c, meaning in doc["columns"].items() if not meaning.strip()]
        assert not empty, f"{name}: columns without a description: {empty}"


def test_every_model_and_source_column_is_described(built) -> None:  # type: ignore[no-untyped-def]
    for name, doc in catalogue.model_docs().items():
        assert doc["description"].strip(), name
        actual = [r["column_name"] for r in rows(built, f"select column_name from (describe \"{name}\")")]
        assert list(doc["columns"]) == actual, name
        assert all(m.strip() for m in doc["columns"].values()), name


def test_catalogue_documents_every_table_with_grain_columns_and_meanings(text: str) -> None:
    for name, doc in catalogue.model_docs().items():
        section = text.split(f"### `{name}`", 1)[1].split("### ", 1)[0]
        assert "| column | type | meaning |" in section, name
        if doc["layer"] != "sources":
            assert "**Grain:**" in section, name
    assert "`detective` means town arrested its own detective" in text
    assert "assert_rates_in_unit_interval" in text and "unique_fct_games_game_id" in text


def test_each_source_says_who_writes_it_and_its_own_meanings(text: str) -> None:
    """Every source said "(the build writes `ref_prices`)" and the beliefs' probability carried the exceptional
    games' description (issue 31 item 8): each section names its own writer and its own column meanings."""
    def section(name: str) -> str:
        return text.split(f"### `{name}`", 1)[1].split("### ", 1)[0]

    assert "*table* written by the build, from `src/mafiabench/prices.toml`" in section("ref_prices")
    assert "*table* written by the landing step\n" in section("raw_games") and "ref_prices" not in section("raw_games")
    assert text.count("ref_prices`)") == 0
    for name in ("raw_beliefs", "stg_beliefs"):
        (row,) = [ln for ln in section(name).splitlines() if ln.startswith("| `probability` |")]
        assert "action distribution" in row and "rule's reference" not in row, name
