"""The test suite's own shape (issue 38 item 5): every test file sits in its stage's folder, and no module under
tests/ imports a test module; what tests share is a fixture in tests/conftest.py or a helper in tests/support/. A
test module imported by another is collected twice under two names, and ties the two files' fates together."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imports_of_test_modules(root: Path) -> list[str]:
    """`file: module` for each import (at any depth, inside functions too) of a test module by a file under root."""
    test_modules = {p.stem for p in root.rglob("test_*.py")}
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{path.relative_to(root)}: {n}" for n in names if set(n.split(".")) & test_modules]
    return found


def test_no_module_under_tests_imports_a_test_module() -> None:
    assert imports_of_test_modules(TESTS) == []


def test_a_planted_import_of_a_test_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "test_a.py").write_text("X = 1\n")
    (tmp_path / "engine" / "test_b.py").write_text("def test_b():\n    from test_a import X\n    assert X\n")
    (tmp_path / "support").mkdir()
    (tmp_path / "support" / "helpers.py").write_text("import engine.test_a\n")
    assert imports_of_test_modules(tmp_path) == ["engine/test_b.py: test_a", "support/helpers.py: engine.test_a"]


def test_every_test_file_is_in_a_stage_folder_and_every_helper_in_support() -> None:
    assert sorted(p.name for p in TESTS.glob("*.py")) == ["conftest.py"]
    assert not list((TESTS / "support").glob("test_*.py")), "tests/support/ holds helpers, not tests"
