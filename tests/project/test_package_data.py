"""Every file the package reads at run time ships in the wheel: each non-Python file under src/mafiabench (prompt
templates, dashboard templates, the price table) matches a `[tool.setuptools.package-data]` pattern. The detector's
prompt files were once missing, so an installed mafiabench could not validate an experiment with a [detector]."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "mafiabench"
DOCS_ONLY = {".md"}  # folder READMEs for readers of the checkout; nothing loads them


def test_every_data_file_is_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mafiabench"]
    files = [p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in {".py", ".pyc", *DOCS_ONLY}
             and "__pycache__" not in p.parts]
    assert any(p.name == "prompt.txt" and p.parent.parent.name == "prompts" and p.parent.parent.parent.name == "detect"
               for p in files)
    shipped = {f for pat in patterns for f in PACKAGE.glob(pat)}
    missing = [str(p.relative_to(PACKAGE)) for p in files if p not in shipped]
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"


def test_the_licence_is_an_spdx_expression() -> None:
    """`license = { text = "MIT" }` made `make demo` print three 14-line setuptools deprecation notices (issue 31
    item 12): the licence is the SPDX string of PEP 639, and the build requires a setuptools that reads it."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in pyproject["project"].get("classifiers", []))
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
