"""The shipped price table: every real provider's row dated and sourced, and the models the README and the CLI
help name as examples priced, so a researcher's first preview does not say "unpriced"."""

from __future__ import annotations

import re
import tomllib
from datetime import date
from pathlib import Path

from mafiabench.prices import DEFAULT_PRICES_PATH, load_prices

ROOT = Path(__file__).resolve().parents[2]
FREE = {"fake", "scripted", "policy"}


def rows() -> list[dict[str, object]]:
    return tomllib.loads(DEFAULT_PRICES_PATH.read_text())["price"]


def test_every_real_row_says_when_and_where_its_price_was_read() -> None:
    version = tomllib.loads(DEFAULT_PRICES_PATH.read_text())["version"]
    table_day = date.fromisoformat(version.split(".")[0])
    real = [r for r in rows() if r["provider"] not in FREE]
    assert real
    for r in real:
        assert isinstance(r.get("as_of"), date), r
        assert str(r.get("source", "")).startswith("https://"), r
        assert r["as_of"] <= table_day, r  # a price cannot be read after the table's own date


def test_models_named_in_the_readme_are_priced() -> None:
    table = load_prices()
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"\b((?:openai|anthropic|deepseek|xai)/[a-z0-9.\-]+)", readme))
    assert "anthropic/claude-haiku-4-5" in named  # the headline example
    missing = sorted(spec for spec in named if table.lookup(spec) is None)
    assert not missing, f"named in README.md but not in prices.toml: {missing}"


def test_deepseek_chat_is_dated_this_year() -> None:
    row = next(r for r in rows() if r["provider"] == "deepseek" and r["model"] == "deepseek-chat")
    assert isinstance(row["as_of"], date) and row["as_of"].year == 2026
