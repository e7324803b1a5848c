"""docs/catalogue.md is generated from the models and must be kept current."""

from __future__ import annotations

from pathlib import Path

from mafiabench.build import catalogue
from mafiabench.build.marts import discover_models

CHECKOUT_CATALOGUE = Path(__file__).resolve().parents[1] / catalogue.DEFAULT_PATH


def test_catalogue_is_current() -> None:
    text = catalogue.generate()
    assert CHECKOUT_CATALOGUE.read_text() == text, "docs/catalogue.md is out of date: run `mafiabench catalogue`"


def test_catalogue_documents_every_table_with_grain_and_columns() -> None:
    text = catalogue.generate()
    for model in discover_models().values():
        for table in model.tables:
            section = text.split(f"### `{table}`", 1)[1].split("### ", 1)[0]
            assert "**Grain:**" in section and "| column | type |" in section, table
    for table in catalogue.SOURCE_DOCS:
        assert f"### `{table}`" in text
    assert "assert_votes_by_active_players" in text
