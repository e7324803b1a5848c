"""The dbt project's SQL models read as plain SQL, for the few readers that need a model's rows where no build made
them: the import report (the listing-order leak counts of the raw tables, before any build) and the marts given
alone, as tests and benchmarks give them. The model's file stays the one statement of its rule; this only drops its
Jinja comments and config and puts the given relations where it refs others."""

from __future__ import annotations

import re
from pathlib import Path

# The packaged project's models (transform/sql/models): read as files, not imported.
SQL_MODELS = Path(__file__).resolve().parents[1] / "transform" / "sql" / "models"


def model_sql(path: Path, refs: dict[str, str]) -> str:
    """A dbt model's SQL as plain SQL: its Jinja comments and config dropped, each ref replaced by `refs`' text."""
    text = re.sub(r"\{#.*?#\}", "", path.read_text(), flags=re.S)
    text = re.sub(r"\{\{\s*config\(.*?\)\s*\}\}", "", text, flags=re.S)
    text = re.sub(r"\{\{\s*ref\('(\w+)'\)\s*\}\}", lambda m: refs[m.group(1)], text)
    if "{{" in text or "{%" in text:
        raise ValueError(f"{path}: Jinja left after its refs were replaced")
    return text
