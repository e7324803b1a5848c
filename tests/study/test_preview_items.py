"""Preview and the upfront check as a researcher meets them (issue 14, item 7): the preview names every model the
price table has no row for, and a run with several missing keys names them all in one error, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.cli import main

EXPERIMENT = """
name = "items"
games_per_cell = 2
warehouse = "{warehouse}"

[[cells]]
name = "priced"
agents = {{ mafioso = "anthropic/claude-haiku-4-5", default = "policy/random" }}

[[cells]]
name = "unpriced"
agents = {{ mafioso = "openai/some-future-model", detective = "deepseek/some-other-model", default = "policy/random" }}

[concurrency]
latency_s = {{ anthropic = 1.0, openai = 1.0, deepseek = 1.0 }}
"""


def write(tmp_path: Path) -> Path:
    path = tmp_path / "items.toml"
    path.write_text(EXPERIMENT.format(warehouse=tmp_path / "w.duckdb"))
    return path


def test_preview_names_the_models_missing_from_the_price_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["preview", str(write(tmp_path))]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("Unpriced (no row in the price table):"))
    assert "openai/some-future-model" in line and "deepseek/some-other-model" in line
    assert "claude-haiku-4-5" not in line  # the README's headline model is priced


def test_run_names_every_missing_key_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert main(["run", str(write(tmp_path)), "--no-prefect"]) == 2
    err = capsys.readouterr().err
    assert "3 problems with the models, found before any call" in err and "Traceback" not in err
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        assert var in err
    assert not (tmp_path / "w.duckdb").exists()  # nothing started
