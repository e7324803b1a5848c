"""The flows read like a table of contents (issue 38 item 4): no flow module has a command line of its own or runs a
server (the `mafiabench` commands are the entry points; `mafiabench.prefect_server` keeps the local server), there is
one serve path (`mafiabench serve`, through Prefect's Runner), and the checkout's `flows/*.py` hand their arguments
to the commands."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "mafiabench"


def _calls_and_imports(path: Path) -> tuple[set[str], set[str]]:
    """The attribute or function names a module calls, and the modules it imports."""
    tree = ast.parse(path.read_text())
    calls, imports = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            calls.add(f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "")
        elif isinstance(node, ast.Import):
            imports |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imports.add(node.module)
    return calls, imports


@pytest.mark.parametrize("module", sorted(p.name for p in (SRC / "flows").glob("*.py")))
def test_a_flow_module_has_no_command_line_and_runs_no_server(module: str) -> None:
    path = SRC / "flows" / module
    text = path.read_text()
    calls, imports = _calls_and_imports(path)
    assert "__main__" not in text and "sys.argv" not in text, f"{module}: a command line of its own"
    assert not {"argparse", "subprocess", "socket", "uvicorn"} & {m.split(".")[0] for m in imports}, module
    assert not {"serve", "add_flow", "Popen"} & calls, f"{module}: serves or starts a process"


def test_one_serve_path() -> None:
    """Only `mafiabench serve` serves a flow (Prefect's Runner.add_flow), nothing calls a flow's own `.serve()`."""
    serving = {}
    for path in SRC.rglob("*.py"):
        calls, _ = _calls_and_imports(path)
        if {"serve", "add_flow"} & calls:
            serving[str(path.relative_to(SRC))] = sorted({"serve", "add_flow"} & calls)
    assert serving == {"commands/serve.py": ["add_flow"]}


@pytest.mark.parametrize(
    ("wrapper", "args", "command"),
    [
        ("study_flow.py", ["run", "--help"], "mafiabench run"),
        ("study_flow.py", ["serve", "--help"], "mafiabench serve"),
        ("detect_flow.py", ["--help"], "mafiabench detect"),
        ("import_flow.py", ["--help"], "mafiabench import"),
    ],
)
def test_the_checkout_wrappers_are_the_commands(wrapper: str, args: list[str], command: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(ROOT / "flows" / wrapper), *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"Usage: {command} "), done.stdout[:300]


def test_the_study_wrapper_names_its_two_commands() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(ROOT / "flows" / "study_flow.py"), "build"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "run|serve" in done.stderr
