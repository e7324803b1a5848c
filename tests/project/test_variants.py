"""A variant's parts named in one place (issue 38 item 8): every name of `mafiabench.variants.VARIANT_PARTS`
resolves (the engine class `engine.VARIANTS` plays, the prompt folders, the protocol TOMLs, the importers of
`FORMATS` and the variant of the games they read, the marts of the dbt project), and nothing a variant has is
missing from it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

import mafiabench
from mafiabench import engine
from mafiabench.agents.prompts import DEFAULT_PROMPT_VERSION
from mafiabench.importers.common import FORMATS
from mafiabench.variants import LAYER_PROTOCOLS, VARIANT_PARTS, Variant

PACKAGE = Path(mafiabench.__file__).parent
PROMPTS = PACKAGE / "agents" / "prompts"
PROTOCOLS = PACKAGE / "protocols"


def dbt_models() -> set[str]:
    """Every model of the packaged dbt project: its SQL files and the tables the YAML of the transform package
    describes (the Python models' too, beside their modules), found by the project file wherever it is kept."""
    (project_file,) = PACKAGE.rglob("dbt_project.yml")
    project = project_file.parent
    names = {p.stem for p in (project / "models").rglob("*.sql")}
    for path in project.parent.rglob("*.yml"):
        models = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("models")
        if isinstance(models, list):  # a properties file (dbt_project.yml's `models:` is configuration)
            names |= {m["name"] for m in models}
    return names


def test_every_engine_variant_has_an_entry_and_every_entry_an_engine() -> None:
    assert set(VARIANT_PARTS) == set(engine.VARIANTS)
    for name, parts in VARIANT_PARTS.items():
        assert engine.VARIANTS[name][0].__name__ == parts.engine, name
        assert getattr(engine, parts.engine) is engine.VARIANTS[name][0]


def test_prompt_versions_are_the_folders_default_first() -> None:
    assert {p.name for p in PROMPTS.iterdir() if p.is_dir() and not p.name.startswith("_")} >= set(VARIANT_PARTS)
    for name, parts in VARIANT_PARTS.items():
        folders = {p.name for p in (PROMPTS / name).iterdir() if p.is_dir() and not p.name.startswith("_")}
        assert set(parts.prompt_versions) == folders, name
        assert parts.prompt_versions[0] == DEFAULT_PROMPT_VERSION[name], name


def test_each_protocol_toml_belongs_to_one_variant_or_layer() -> None:
    named = [p for parts in VARIANT_PARTS.values() for p in parts.protocols]
    named += [p for protocols in LAYER_PROTOCOLS.values() for p in protocols]
    assert sorted(named) == sorted(p.stem for p in PROTOCOLS.glob("*.toml"))


def test_each_importer_reads_games_of_its_variant() -> None:
    named = [i for parts in VARIANT_PARTS.values() for i in parts.importers]
    assert sorted(named) == sorted(FORMATS)
    for name, parts in VARIANT_PARTS.items():
        for fmt in parts.importers:
            assert name == importlib.import_module(FORMATS[fmt][0]).VARIANT, fmt


def test_each_mart_is_a_dbt_model_of_one_variant() -> None:
    models = dbt_models()
    named = [m for parts in VARIANT_PARTS.values() for m in parts.marts]
    assert len(named) == len(set(named))
    assert sorted(m for m in named if m not in models) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("engine", "MiniMafiaa"), ("prompt_versions", ("v4.1-full", "v9")), ("protocols", ("mini-mafia-v9",)),
     ("importers", ("mini-mafia",)), ("marts", ("mart_capability_gamez",))],
)
def test_a_misspelt_part_is_caught(monkeypatch: pytest.MonkeyPatch, field: str, value: object) -> None:
    parts = VARIANT_PARTS["mini-mafia"]
    monkeypatch.setitem(VARIANT_PARTS, "mini-mafia", Variant(**{**parts.__dict__, field: value}))
    checks = [test_every_engine_variant_has_an_entry_and_every_entry_an_engine,
              test_prompt_versions_are_the_folders_default_first,
              test_each_protocol_toml_belongs_to_one_variant_or_layer,
              test_each_importer_reads_games_of_its_variant,
              test_each_mart_is_a_dbt_model_of_one_variant]
    failed = 0
    for check in checks:
        try:
            check()
        except (AssertionError, AttributeError):
            failed += 1
    assert failed == 1
