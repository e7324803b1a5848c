"""`make clean` removes every warehouse's pages (issue 31 item 12): each warehouse has its own pages folder in the
working folder (`dashboards/` for mafiabench.duckdb, `dashboards-<name>/` for the others: `publish.dashboards_for`),
and the target removed only `dashboards/*.html`, leaving the other warehouses' folders, the assets, transcripts and
site file, and a render's leftover staging folders. The Makefile runs in a scratch copy of the layout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mafiabench.publish import dashboards_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_clean_removes_every_warehouse_pages_folder(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    pages = [dashboards_for(f"warehouse/{n}.duckdb") for n in ("mafiabench", "detector", "strategema-offline")]
    assert [str(p) for p in pages] == ["dashboards", "dashboards-detector", "dashboards-strategema-offline"]
    files = [
        ".venv/bin/python", "warehouse/README.md", "warehouse/mafiabench.duckdb", "warehouse/mafiabench.duckdb.lock",
        "warehouse/detector.duckdb.wal", "warehouse/raw/demo/shard-0.jsonl", "dashboards/README.md",
        *(f"{p}/{f}" for p in pages for f in ("index.html", "site.json", "assets/vega.js", "transcripts/g.html")),
        ".dashboards-detector.tmp-123-abc/index.html", ".dashboards.tmp-9-x/index.html",
        "docs/catalogue.md", "experiments/demo.toml", "dashboards.md",
    ]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    done = subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["Makefile", "dashboards.md", "dashboards/README.md", "docs/catalogue.md",
                    "experiments/demo.toml", "warehouse/README.md"]
    assert not (tmp_path / "dashboards-detector").exists() and not (tmp_path / ".venv").exists()
    # a second clean (nothing to remove) succeeds too
    assert subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, check=False).returncode == 0
