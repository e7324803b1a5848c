"""Pages per warehouse (issue 31, item 3): two experiments with their own warehouses never overwrite each other's
pages. A warehouse's default pages folder is its own (`dashboards/` for `mafiabench.duckdb`, `dashboards-<name>/`
otherwise); a folder says which warehouse and build it shows (`site.json`, and the footer of every page, the index's
included); rendering another warehouse into it is refused with a clear error, and the pages stay as they were,
unless `--force`; `run --publish` refuses before it plays anything."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mafiabench.cli import main
from support.dashboards import shared_site, snapshot

pytestmark = pytest.mark.slow


def test_each_warehouse_has_its_own_pages_and_another_warehouse_is_refused_without_force(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    study, _ = shared_site(tmp_path_factory)
    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a" / "mafiabench.duckdb", tmp_path / "b" / "detector.duckdb"
    for target in (a, b):
        target.parent.mkdir()
        shutil.copy(study, target)

    assert main(["dashboards", "--warehouse", str(a)]) == 0
    assert main(["dashboards", "--warehouse", str(b)]) == 0
    pages_a, pages_b = tmp_path / "dashboards", tmp_path / "dashboards-detector"
    site_a = json.loads((pages_a / "site.json").read_text())
    site_b = json.loads((pages_b / "site.json").read_text())
    assert site_a["warehouse"] == str(a.resolve()) and site_b["warehouse"] == str(b.resolve())
    assert site_a["build_id"]
    index = (pages_a / "index.html").read_text(encoding="utf-8")
    assert f"from warehouse a/mafiabench.duckdb, build {site_a['build_id']}" in index

    before = snapshot(pages_a)
    capsys.readouterr()
    assert main(["dashboards", "--warehouse", str(b), "--out", "dashboards"]) == 2
    err = capsys.readouterr().err
    assert "dashboards shows the pages of warehouse" in err and str(a.resolve()) in err and "--force" in err
    assert snapshot(pages_a) == before  # refused: a's pages as they were

    assert main(["dashboards", "--warehouse", str(b), "--out", "dashboards", "--force"]) == 0
    assert json.loads((pages_a / "site.json").read_text())["warehouse"] == str(b.resolve())


def test_run_publish_refuses_another_warehouse_s_pages_before_playing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    pages = tmp_path / "dashboards-mine"
    pages.mkdir()
    (pages / "site.json").write_text(json.dumps({"warehouse": str(tmp_path / "theirs.duckdb"), "build_id": "b1"}))
    (tmp_path / "exp.toml").write_text(
        'name = "mine"\ngames_per_cell = 2\nwarehouse = "mine.duckdb"\n'
        '[[cells]]\nname = "c"\nagents = { default = "policy/random" }\n'
    )
    assert main(["run", "exp.toml", "--no-prefect", "--no-progress", "--publish"]) == 2
    assert "dashboards-mine shows the pages of warehouse" in capsys.readouterr().err
    assert not (tmp_path / "mine.duckdb").exists()  # nothing played, nothing landed
