"""Exported figures in a folder of the user's choosing (issue 40 item 5): `--export-images` files lived only in the
pages' folder, which the next render replaces, and `run --publish` could not export them; `--figures DIR` keeps a
copy that later renders leave alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.cli import main


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.dashboards import shared_site

    return shared_site(tmp_path_factory)[0]


def test_figures_outlive_the_next_render(study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, figures = tmp_path / "pages", tmp_path / "paper" / "figures"
    assert main(["dashboards", "--warehouse", str(study), "--out", str(out), "--figures", str(figures)]) == 0
    kept = sorted(p.relative_to(figures) for p in figures.rglob("*") if p.is_file())
    assert len(kept) >= 12 and {p.suffix for p in kept} == {".png", ".svg"}
    assert all((out / p).is_file() for p in kept)  # the same files beside the pages
    assert f"also in {figures}" in capsys.readouterr().out
    assert main(["dashboards", "--warehouse", str(study), "--out", str(out)]) == 0  # a render without images
    assert not list(out.glob("*.png"))  # the pages' folder was replaced ...
    assert sorted(p.relative_to(figures) for p in figures.rglob("*") if p.is_file()) == kept  # ... the figures kept


def test_run_takes_figures_with_publish_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "e.toml"
    exp.write_text('name = "e"\ngames_per_cell = 1\n[[cells]]\nname = "c"\nagents = { default = "policy/random" }\n')
    assert main(["run", str(exp), "--no-prefect", "--figures", str(tmp_path / "f")]) == 2
    assert "needs --publish" in capsys.readouterr().err
    assert not (tmp_path / "warehouse").exists()
