"""requirements.lock pins, with a hash, every dependency pyproject.toml declares (and the dev extra), at a version
inside its bounds: a dependency added without `make lock` fails here, not in a fresh setup."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def locked() -> dict[str, str]:
    text = (ROOT / "requirements.lock").read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n\s+--hash=sha256:[0-9a-f]{64}", text, flags=re.M))
    assert len(pins) == len(re.findall(r"^[A-Za-z0-9_.-]+==", text, flags=re.M)), "a pin without a hash"
    return {canonicalize_name(k): v for k, v in pins.items()}


def test_every_declared_dependency_is_locked_inside_its_bounds() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["dev"]]]
    pins = locked()
    assert len(pins) > 100  # the whole tree, not only the direct dependencies
    problems = []
    for req in declared:
        version = pins.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req.name} is declared but not locked: run `make lock`")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}=={version} in the lock is outside {req.specifier}: run `make lock`")
    assert problems == []


def test_bounds_are_compatible_ranges_not_exact_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for raw in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        req = Requirement(raw)
        ops = {s.operator for s in req.specifier}
        assert ">=" in ops and "==" not in ops, f"{raw}: give a lower bound and a ceiling; exact pins go in the lock"


def test_make_setup_bootstraps_uv_from_its_hashed_pin_in_the_lock() -> None:
    """make setup and the CI checks install uv first with `grep -A1 '^uv==' requirements.lock` and pip's
    --require-hashes, then the lock with uv: those two lines must be uv's pin and its hash."""
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("uv==")]
    assert len(at) == 1, "uv is pinned once in the lock"
    assert re.fullmatch(r"uv==\S+ \\", lines[at[0]])
    assert re.fullmatch(r"\s+--hash=sha256:[0-9a-f]{64}", lines[at[0] + 1])
    for script in ("Makefile", ".ci/installed_check", ".ci/coherence_check"):
        text = (ROOT / script).read_text()
        assert "grep -A1 '^uv==' " in text, script
        installs = r'uv"? pip install -q --python \S+ (--compile-bytecode )?--require-hashes -r "?\S*requirements\.lock'
        assert re.search(installs, text), f"{script} installs the lock with uv"
