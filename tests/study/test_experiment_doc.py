"""docs/experiment.md is generated from the experiment schema (issue 31 item 6) and must be kept current: every
section and key of the pydantic models, with type, default and description, and examples from experiments/*.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from mafiabench.cli import main
from mafiabench.engine import VARIANTS
from mafiabench.study import keys_doc
from mafiabench.study.spec import Experiment

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def text() -> str:
    return keys_doc.generate(ROOT / "experiments")


def test_experiment_doc_is_current(text: str) -> None:
    current = (ROOT / "docs" / "experiment.md").read_text()
    assert current == text, "docs/experiment.md is out of date: run `mafiabench schema`"


def _models(model: type[BaseModel]) -> set[type[BaseModel]]:
    found = {model}
    for field in model.model_fields.values():
        for sub in keys_doc._models_in(field.annotation):
            if sub not in found:
                found |= _models(sub)
    return found


def test_every_key_of_every_section_is_documented(text: str) -> None:
    models = _models(Experiment)
    assert len(models) >= 10  # prompt, endpoints, cells, design, models, concurrency, budget, prices, imports, ...
    for model in models:
        for key, field in model.model_fields.items():
            assert f"| `{field.alias or key}` |" in text, f"{model.__name__}.{key}"
            assert field.description, f"{model.__name__}.{key} has no description"
    for variant, (_, rules) in VARIANTS.items():
        section = text.split(f'## [rules] of `variant = "{variant}"`', 1)[1].split("\n## ", 1)[0]
        assert all(f"| `{key}` |" in section for key in rules.model_fields), variant
    for title in ("## Top level", "## [[cells]]", "## [design]", "## [endpoints.<name>]", "## [models.<name>]",
                  "## [detector]", "## [[imports]]", "## [budget]"):
        assert title in text


def test_rows_give_type_default_and_an_example(text: str) -> None:
    top = text.split("## Top level", 1)[1].split("\n## ", 1)[0]
    rows = {line.split(" | ")[0]: line for line in top.splitlines() if line.startswith("| `")}
    assert rows["| `games_per_cell`"] == ("| `games_per_cell` | integer | `10` | Games per cell unless a cell or the "
                                          "design says otherwise. | `20` (experiments/demo.toml) |")
    assert "| required |" in rows["| `name`"]
    assert "(see [[cells]])" in rows["| `cells`"]


def test_the_command_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "experiment.md"
    assert main(["schema", "--output", str(out)]) == 0
    assert main(["schema", "--output", str(out), "--check"]) == 0
    out.write_text(out.read_text().replace("| `seed` |", "| `sead` |"))
    assert main(["schema", "--output", str(out), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
