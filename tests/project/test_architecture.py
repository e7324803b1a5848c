"""The package has the shape docs/architecture.md draws: every subpackage imports, no import circles, and each stage
imports only what its row of the allowed-imports table names (engine nothing outside itself, dashboards only the
warehouse and the leaves errors and scratch). The checks run on the real source, and on a copy with planted
violations to show they can fail."""

from __future__ import annotations

import importlib
import pkgutil
import re
import shutil
from pathlib import Path

import pytest

import mafiabench
from support.import_graph import Edge, cycles, import_edges, parse_allowed, unit, violations

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "mafiabench"
DOC = ROOT / "docs" / "architecture.md"


def known_exceptions(markdown: str) -> tuple[set[tuple[str, str]], list[list[str]]]:
    """The doc's pending exceptions: allowed stage edges (`a` imports `b`) and module circles (`x` ⇄ `y`)."""
    match = re.search(r"<!-- known-exceptions -->(.*?)<!-- /known-exceptions -->", markdown, flags=re.S)
    edges: set[tuple[str, str]] = set()
    circles: list[list[str]] = []
    for item in re.split(r"\n- ", match.group(1) if match else ""):
        if m := re.match(r"\s*-?\s*`(\w+)` imports `(\w+)`", item):
            edges.add((m.group(1), m.group(2)))
        elif m := re.match(r"\s*-?\s*circle ((?:`[\w.]+`(?: ⇄ )?)+)", item):
            circles.append(sorted(re.findall(r"`([\w.]+)`", m.group(1))))
    return edges, circles


def check(package_dir: Path, doc: str) -> list[str]:
    """Every problem with the package's imports, against the doc's table and its pending exceptions."""
    allowed = parse_allowed(doc)
    pending_edges, pending_circles = known_exceptions(doc)
    for a, b in pending_edges:
        allowed.setdefault(a, set()).add(b)
    edges = import_edges(package_dir)
    problems = violations(edges, allowed)
    stage_edges = {(unit(e.source), unit(e.target)) for e in edges if unit(e.target) != "mafiabench"}
    problems += [f"stage circle: {' ⇄ '.join(c)}" for c in cycles(stage_edges)]
    module_circles = cycles((e.source, e.target) for e in edges)
    problems += [f"module circle: {' ⇄ '.join(c)}" for c in module_circles if c not in pending_circles]
    problems += [f"docs/architecture.md lists a fixed exception: remove `{a}` imports `{b}`"
                 for a, b in pending_edges if (a, b) not in stage_edges]
    problems += [f"docs/architecture.md lists a fixed circle: remove {c}" for c in pending_circles
                 if c not in module_circles]
    return problems


def test_every_subpackage_imports() -> None:
    names = [m.name for m in pkgutil.iter_modules(mafiabench.__path__, "mafiabench.") if m.ispkg] + ["mafiabench.cli"]
    assert {"mafiabench.engine", "mafiabench.backends", "mafiabench.dashboards", "mafiabench.warehouse"} <= set(names)
    for name in names:
        importlib.import_module(name)


def test_the_import_graph_follows_the_documented_table() -> None:
    assert check(PACKAGE, DOC.read_text()) == []


def test_the_table_names_every_stage_and_the_rules_of_the_issue() -> None:
    allowed = parse_allowed(DOC.read_text())
    stages = {unit(e.source) for e in import_edges(PACKAGE)} - {"mafiabench"}
    assert stages <= set(allowed), f"stages without a row: {stages - set(allowed)}"
    assert allowed["engine"] == set()
    assert allowed["dashboards"] == {"warehouse", "scratch", "errors"}  # scratch: a leaf (folders, a pid alive)
    assert "quality" not in allowed["transform"]
    # the flows are only flows: the local Prefect server's lifecycle is a stage of its own, outside them
    assert allowed["prefect_server"] == {"scratch", "errors"} and "prefect_server" not in allowed["flows"]
    assert not (PACKAGE / "flows" / "server.py").exists()
    assert len(import_edges(PACKAGE)) > 200  # the scan sees the real graph, not an empty one


@pytest.fixture(scope="module")
def real_edges() -> list[Edge]:
    return import_edges(PACKAGE)


def test_violations_planted_in_a_copy_of_the_source_are_caught(tmp_path: Path) -> None:
    copy = tmp_path / "mafiabench"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.txt", "*.toml", "*.j2", "*.css"))
    doc = DOC.read_text()
    assert check(copy, doc) == []
    planted = {
        "engine/core.py": "from mafiabench.warehouse import raw",
        "dashboards/__init__.py": "from ..study import spec",
        "warehouse/landing.py": "import mafiabench.play.runner",
        "backends/backend.py": "from . import endpoints",
    }
    for file, line in planted.items():
        path = copy / file
        path.write_text(path.read_text() + f"\n\ndef _planted() -> None:\n    {line}\n")
    problems = "\n".join(check(copy, doc))
    assert "engine/core.py" in problems and "engine may not import warehouse" in problems
    assert "dashboards/__init__.py" in problems and "dashboards may not import study" in problems
    assert "warehouse/landing.py" in problems and "warehouse may not import play" in problems
    assert any(
        line.startswith("module circle:") and "mafiabench.backends.backend ⇄" in line and "backends.endpoints" in line
        for line in problems.splitlines()
    )


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ("mafiabench.engine.core", "mafiabench.warehouse.raw", "engine may not import warehouse"),
        ("mafiabench.engine.core", "mafiabench.backends.backend", "engine may not import backends"),
        ("mafiabench.engine.core", "mafiabench.errors", "engine may not import errors"),
        ("mafiabench.dashboards.render", "mafiabench.play.runner", "dashboards may not import play"),
        ("mafiabench.dashboards.render", "mafiabench.quality.gate", "dashboards may not import quality"),
        ("mafiabench.transform.build.marts", "mafiabench.dashboards.render", "transform may not import dashboards"),
        ("mafiabench.warehouse.raw", "mafiabench.study.spec", "warehouse may not import study"),
        ("mafiabench.nowhere", "mafiabench.engine.core", "stage 'nowhere' has no row"),
        ("mafiabench.record", "mafiabench.study.spec",
         "stage circle: agents ⇄ detect ⇄ play ⇄ prices ⇄ record ⇄ study ⇄ transform ⇄ warehouse"),
    ],
)
def test_each_rule_can_fail(real_edges: list[Edge], source: str, target: str, expected: str) -> None:
    doc = DOC.read_text()
    planted = [*real_edges, Edge(source, target, "planted.py", 1)]
    allowed = parse_allowed(doc)
    pending, _ = known_exceptions(doc)
    for a, b in pending:
        allowed.setdefault(a, set()).add(b)
    problems = violations(planted, allowed)
    stage_edges = {(unit(e.source), unit(e.target)) for e in planted if unit(e.target) != "mafiabench"}
    problems += [f"stage circle: {' ⇄ '.join(c)}" for c in cycles(stage_edges)]
    assert any(expected in p for p in problems), problems


def test_fixing_a_pending_exception_asks_for_the_doc_to_be_updated() -> None:
    doc = re.sub(
        r"<!-- known-exceptions -->.*?<!-- /known-exceptions -->",
        "<!-- known-exceptions -->\n- `engine` imports `warehouse`: planted\n"
        "- circle `mafiabench.engine.core` ⇄ `mafiabench.record`: planted\n<!-- /known-exceptions -->",
        DOC.read_text(),
        flags=re.S,
    )
    problems = "\n".join(check(PACKAGE, doc))
    assert "lists a fixed exception: remove `engine` imports `warehouse`" in problems
    assert "lists a fixed circle: remove ['mafiabench.engine.core', 'mafiabench.record']" in problems


def test_edges_resolve_relative_and_from_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "mafiabench"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("from .x import f\n")
    (pkg / "a" / "x.py").write_text("def f():\n    from ..b import y\n")
    (pkg / "b.py").write_text("import mafiabench.a.x\nfrom mafiabench import a\ny = 1\n")
    got = {(e.source, e.target) for e in import_edges(pkg)}
    assert got == {("mafiabench.a", "mafiabench.a.x"), ("mafiabench.a.x", "mafiabench.b"),
                   ("mafiabench.b", "mafiabench.a.x"), ("mafiabench.b", "mafiabench.a")}
    assert cycles(got) == [["mafiabench.a", "mafiabench.a.x", "mafiabench.b"]]
    assert isinstance(next(iter(import_edges(pkg))), Edge)
