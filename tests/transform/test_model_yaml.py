"""One YAML beside each model (issue 38; jaffle-shop's layout): no YAML under src/ is over 300 lines; a SQL model's
description, columns, tests and gate rules are in `<model>.yml` next to `<model>.sql`, declaring that model alone; each
raw table is in its own source file; a Python model's tables are in the YAML beside the module that computes them."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from mafiabench.transform import LAYERS
from mafiabench.transform import models as python_models
from mafiabench.transform.build.dbt_runner import PACKAGED_PROJECT
from mafiabench.transform.models import PYTHON_MODELS

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_LINES = 300
SOURCES = PACKAGED_PROJECT / "models" / "staging" / "sources"
PYTHON_DIR = Path(python_models.__file__).parent


def too_long(folder: Path, limit: int = MAX_LINES) -> list[str]:
    """`file: n lines` for every YAML under `folder` longer than `limit` lines."""
    files = sorted([*folder.rglob("*.yml"), *folder.rglob("*.yaml")])
    counts = {p: len(p.read_text().splitlines()) for p in files}
    return [f"{p.relative_to(folder)}: {n} lines" for p, n in counts.items() if n > limit]


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def test_no_yaml_under_src_is_over_300_lines() -> None:
    assert too_long(SRC) == []
    assert len(list(SRC.rglob("*.yml"))) > 60  # the scan sees the project, not an empty folder


def test_a_yaml_over_the_limit_is_named(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.yml").write_text("- x\n" * 301)
    (tmp_path / "short.yml").write_text("- x\n" * 300)
    assert too_long(tmp_path) == ["sub/long.yml: 301 lines"]


def test_each_sql_model_has_its_own_yaml_beside_it() -> None:
    for layer in LAYERS:
        folder = PACKAGED_PROJECT / "models" / layer
        sql = sorted(p.stem for p in folder.glob("*.sql"))
        assert sql, layer
        assert sorted(p.stem for p in folder.glob("*.yml")) == sql, f"{layer}: a model without its YAML, or the reverse"
        for name in sql:
            doc = load(folder / f"{name}.yml")
            assert [m["name"] for m in doc.get("models") or []] == [name], f"{layer}/{name}.yml"
            assert not doc.get("sources"), f"{layer}/{name}.yml declares a source: its home is {SOURCES.name}/"


def test_each_raw_table_has_its_own_source_file() -> None:
    files = sorted(SOURCES.glob("*.yml"))
    assert {"raw_games", "raw_model_calls", "ref_prices"} <= {p.stem for p in files}
    for path in files:
        doc = load(path)
        assert [[t["name"] for t in s["tables"]] for s in doc["sources"]] == [[path.stem]], path.name
        assert not doc.get("models"), path.name
    elsewhere = [
        p for p in (PACKAGED_PROJECT / "models").rglob("*.yml") if p.parent != SOURCES and load(p).get("sources")
    ]
    assert elsewhere == []


def test_each_python_models_tables_are_in_the_yaml_beside_its_module() -> None:
    steps: dict[str, dict[str, str]] = defaultdict(dict)  # module -> table -> the step that writes it
    for model in PYTHON_MODELS:
        module = model.function.rpartition(".")[0]
        assert (PYTHON_DIR / f"{module}.py").is_file(), model.function
        steps[module].update({table: model.name for table in model.outputs})
    assert sorted(p.stem for p in PYTHON_DIR.glob("*.yml")) == sorted(steps)
    for module, tables in steps.items():
        declared = {m["name"]: m["meta"]["step"] for m in load(PYTHON_DIR / f"{module}.yml")["models"]}
        assert declared == tables, f"{module}.yml"
