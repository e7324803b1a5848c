"""support.scheduling lists the test files that read the session's shared studies, so that `make test` runs them on
one worker: the list is every such file, and only those (a file missing from it only costs time, but silently)."""

from __future__ import annotations

import ast
from pathlib import Path

from support.scheduling import SHARED_STUDY_FILES

ROOT = Path(__file__).resolve().parents[2]


BUILDERS = {"shared_site", "offline_study"}


def readers(root: Path) -> set[str]:
    """Test files under root/tests that call one of the shared studies' builders."""
    return {str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
            if any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILDERS
                   for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))))}


def test_the_shared_study_files_are_listed() -> None:
    assert readers(ROOT) == SHARED_STUDY_FILES


def test_a_new_reader_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests" / "dashboards").mkdir(parents=True)
    (tmp_path / "tests" / "dashboards" / "test_new.py").write_text("site = shared_site(tmp_path_factory)\n")
    (tmp_path / "tests" / "dashboards" / "test_other.py").write_text("x = 1\n")
    assert readers(tmp_path) == {"tests/dashboards/test_new.py"}
