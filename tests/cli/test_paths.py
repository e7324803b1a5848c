"""Commands act on the working folder, never on the checkout or the installed package's folder: `run`, `build`,
`dashboards` and `catalogue` started from a folder outside the checkout write only there (issue 14, item 4). Paths
follow one rule (issue 31): a path written in an experiment or game file is relative to that file's folder; a path
given on the command line, and a default, to the current folder.

Each command runs as a real subprocess with its working directory in tmp_path; the checkout's files (docs/catalogue.md,
dashboards/, warehouse/, everything tracked or not, caches aside) are hashed before and after."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mafiabench.warehouse import landing

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# Written by tools or by other tests, not by the commands under test.
VOLATILE = {".git", ".venv", ".venv-coherence", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
            ".hypothesis", "test-artifacts"}


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file of the checkout (caches aside) with its mtime and content hash."""
    files: dict[str, tuple[int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in VOLATILE and not d.endswith(".egg-info")]
        for name in filenames:
            path = Path(dirpath) / name
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            files[str(path.relative_to(root))] = (path.stat().st_mtime_ns, digest)
    return files


def mafiabench(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mafiabench.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, check=False)  # a cap: a loaded machine took over 300 s


def small_demo(folder: Path) -> Path:
    """The demo experiment, scaled down (3 games a design cell, 6 per baseline), with its relative warehouse path."""
    text = (ROOT / "experiments" / "demo.toml").read_text()
    text = text.replace("games_per_cell = 20", "games_per_cell = 3").replace("games = 60", "games = 6")
    assert 'warehouse = "../warehouse/mafiabench.duckdb"' in text  # beside experiments/ in the checkout
    path = folder / "small.toml"
    path.write_text(text.replace('"../warehouse/', '"warehouse/'))  # beside small.toml
    return path


def test_run_build_dashboards_and_catalogue_write_only_in_the_working_folder(tmp_path: Path) -> None:
    before = snapshot(ROOT)
    assert "docs/catalogue.md" in before and "experiments/demo.toml" in before
    small_demo(tmp_path)

    ran = mafiabench(["run", "small.toml", "--no-progress"], tmp_path)  # through Prefect's temporary server
    assert ran.returncode in (0, 3), ran.stderr[-3000:]
    built = mafiabench(["build"], tmp_path)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    rendered = mafiabench(["dashboards"], tmp_path)
    assert rendered.returncode == 0, rendered.stderr[-3000:]
    catalogued = mafiabench(["catalogue"], tmp_path)
    assert catalogued.returncode == 0, catalogued.stderr[-3000:]

    assert (tmp_path / "warehouse" / "mafiabench.duckdb").stat().st_size > 0
    assert len(landing.raw_records(tmp_path / "warehouse" / "raw" / "demo")) == 75
    assert (tmp_path / "dashboards" / "index.html").stat().st_size > 0
    catalogue = tmp_path / "docs" / "catalogue.md"
    assert "### `mart_capability_win_rates`" in catalogue.read_text()
    assert str(catalogue.relative_to(tmp_path)) in catalogued.stdout

    after = snapshot(ROOT)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"commands run from {tmp_path} changed the checkout: {changed[:20]}"


def test_paths_in_an_experiment_file_are_relative_to_it_and_command_line_paths_to_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mafiabench.play.config import load_game_config
    from mafiabench.study.spec import load_experiment

    study = tmp_path / "studies" / "one"
    (study / "data").mkdir(parents=True)
    (study / "exp.toml").write_text(
        'name = "paths"\nwarehouse = "../wh/w.duckdb"\ncache_dir = "cache"\n'
        '[[cells]]\nname = "c"\nagents = { default = "policy/random" }\n'
        '[[imports]]\nformat = "dallinger"\npath = "data"\n'
    )
    (study / "game.toml").write_text('cache_dir = "game-cache"\n[agents]\ndefault = "policy/random"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    exp = load_experiment(Path("..") / "studies" / "one" / "exp.toml")
    assert Path(exp.warehouse).resolve() == tmp_path / "studies" / "wh" / "w.duckdb"
    assert Path(exp.cache_dir or "").resolve() == study / "cache"
    assert Path(exp.imports[0].path).resolve() == study / "data"
    assert exp.warehouse_path("mine.duckdb").resolve() == elsewhere / "mine.duckdb"  # --warehouse: current folder
    assert Path(load_game_config(study / "game.toml").cache_dir or "").resolve() == study / "game-cache"
    (study / "default.toml").write_text('name = "d"\n[[cells]]\nname = "c"\nagents = { default = "policy/random" }\n')
    default = load_experiment(study / "default.toml").warehouse_path()
    assert default.resolve() == elsewhere / "warehouse" / "mafiabench.duckdb"  # unset: the current folder's default
