"""Pages read marts only: no module or template of the dashboards names a raw, staging or intermediate table (they
would show what the gate has not passed). The table names come from the dbt project itself, so a new `stg_` or
`int_` model is covered the day it is added; a planted read shows the check can fail."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "mafiabench"
DASHBOARDS = PACKAGE / "dashboards"
SQL = PACKAGE / "transform" / "sql"


def below_the_gate() -> set[str]:
    """Every raw source, staging model and intermediate model of the dbt project."""
    names = {p.stem for layer in ("staging", "intermediate") for p in (SQL / "models" / layer).glob("*.sql")}
    for path in (SQL / "models").rglob("*.yml"):
        sources = (yaml.safe_load(path.read_text()) or {}).get("sources") or []
        names |= {t["name"] for s in sources for t in s["tables"] if t["name"].startswith("raw_")}
    return names


def named_tables(folder: Path, names: set[str]) -> list[str]:
    """`file:line: table` for every table of `names` that a module or template under `folder` names."""
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b")
    found = []
    for path in sorted(folder.rglob("*")):
        if path.suffix in (".py", ".j2") and "__pycache__" not in path.parts:
            for n, line in enumerate(path.read_text().splitlines(), 1):
                found += [f"{path.relative_to(folder)}:{n}: {m}" for m in pattern.findall(line)]
    return found


def test_the_table_list_is_the_real_one() -> None:
    names = below_the_gate()
    assert {"raw_games", "raw_model_calls", "stg_events", "stg_games", "int_capability_games"} <= names
    assert all(n.startswith(("raw_", "stg_", "int_")) for n in names), names


def test_no_page_reads_below_the_gate() -> None:
    assert named_tables(DASHBOARDS, below_the_gate()) == []


def test_a_planted_read_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "pages" / "planted.py"
    page.parent.mkdir()
    page.write_text('rows = m.rows("select * from stg_events")\n')
    template = tmp_path / "planted.html.j2"
    template.write_text("{{ raw_model_calls }}\n")
    assert named_tables(tmp_path, below_the_gate()) == [
        "pages/planted.py:1: stg_events", "planted.html.j2:1: raw_model_calls"
    ]
