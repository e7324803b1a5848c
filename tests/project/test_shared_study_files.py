"""support.scheduling lists the test files that read the session's shared studies, and those on the session's Prefect
test harness, so that `make test` runs each group on one worker: each list is every such file, and only those (a file
missing from it only costs time, but silently)."""

from __future__ import annotations

import ast
from pathlib import Path

from support.scheduling import PREFECT_HARNESS_FILES, SHARED_STUDY_FILES

ROOT = Path(__file__).resolve().parents[2]


BUILDERS = {"shared_site", "offline_study"}


def readers(root: Path) -> set[str]:
    """Test files under root/tests that call one of the shared studies' builders."""
    return {str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
            if any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILDERS
                   for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))))}


def harness_users(root: Path) -> set[str]:
    """Test files under root/tests with a test (or fixture) that takes the `prefect_harness` fixture."""
    return {str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
            if any(isinstance(node, ast.FunctionDef) and any(a.arg == "prefect_harness" for a in node.args.args)
                   for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))))}


def test_the_shared_study_files_are_listed() -> None:
    assert readers(ROOT) == SHARED_STUDY_FILES


def test_the_prefect_harness_files_are_listed() -> None:
    assert harness_users(ROOT) == PREFECT_HARNESS_FILES


def test_a_new_reader_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests" / "dashboards").mkdir(parents=True)
    (tmp_path / "tests" / "dashboards" / "test_new.py").write_text("site = shared_site(tmp_path_factory)\n")
    (tmp_path / "tests" / "dashboards" / "test_other.py").write_text("x = 1\n")
    assert readers(tmp_path) == {"tests/dashboards/test_new.py"}
    (tmp_path / "tests" / "dashboards" / "test_flow.py").write_text("def test_x(tmp_path, prefect_harness): pass\n")
    assert harness_users(tmp_path) == {"tests/dashboards/test_flow.py"}
