"""The package's import graph, read from the source (AST, every import including those inside functions), and the
checks that keep it the shape `docs/architecture.md` draws: no circles, each stage importing only what its row of
the allowed-imports table names.

Used by `tests/project/test_architecture.py`; a function of a source folder so a test can plant a violation in a copy.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT_PACKAGE = "mafiabench"


@dataclass(frozen=True)
class Edge:
    """`source` (a module) imports `target` (a module of the package), at `path:line`."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} imports {self.target}"


def module_name(package_dir: Path, file: Path) -> str:
    rel = file.relative_to(package_dir.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(package_dir: Path) -> dict[str, Path]:
    """Every module of the package under `package_dir` (e.g. `src/mafiabench`), by dotted name."""
    return {module_name(package_dir, f): f for f in sorted(package_dir.rglob("*.py"))}


def import_edges(package_dir: Path) -> list[Edge]:
    """Every import from one of the package's modules to another (`from a import b` counts as `a.b` when `a.b` is a
    module, else as `a`), with relative imports resolved."""
    known = modules(package_dir)
    edges: list[Edge] = []
    for name, file in known.items():
        is_package = file.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    if node.level > 1:
                        base = base[: -(node.level - 1)]
                    mod = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
            for target in targets:
                while target and target not in known:  # `import a.b.c` where c is a name: the module a.b
                    target = target.rpartition(".")[0]
                if target and target != name and target.split(".")[0] == ROOT_PACKAGE:
                    edges.append(Edge(name, target, str(file), node.lineno))
    return edges


def unit(module: str) -> str:
    """The stage a module belongs to: `mafiabench.transform.build.marts` -> `transform`, `mafiabench.record` ->
    `record`, the package's own `__init__` (its version) -> `mafiabench`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (each is at least one import circle), sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:  # Tarjan; the graph has ~100 nodes, recursion depth is no concern
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def parse_allowed(markdown: str) -> dict[str, set[str]]:
    """The allowed-imports table of `docs/architecture.md`: rows `| `unit` | ... | `a`, `b` |` between the
    `<!-- allowed-imports -->` markers; the first backticked name is the unit, the last cell lists what it may
    import (`—` for nothing; `*` for any unit)."""
    match = re.search(r"<!-- allowed-imports -->(.*?)<!-- /allowed-imports -->", markdown, flags=re.S)
    if not match:
        raise ValueError("no <!-- allowed-imports --> table in the document")
    allowed: dict[str, set[str]] = {}
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        may = set(re.findall(r"`([^`]+)`", cells[-1]))
        if "*" in cells[-1] and not may:
            may = {"*"}
        for name in names:
            allowed[name] = may
    return allowed


def violations(edges: Iterable[Edge], allowed: Mapping[str, set[str]]) -> list[str]:
    """Imports between stages that the table does not allow (the package's `__init__`, i.e. its version, is free)."""
    out = []
    for e in edges:
        src, dst = unit(e.source), unit(e.target)
        if src == dst or dst == ROOT_PACKAGE:
            continue
        if src not in allowed:
            out.append(f"{e}: stage {src!r} has no row in the allowed-imports table")
        elif dst not in allowed[src] and "*" not in allowed[src]:
            out.append(f"{e}: {src} may not import {dst}")
    return out
