"""A small Mini-Mafia study played, landed, built and rendered once per test session and shared by the dashboard
tests (and the xdist workers) read-only."""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from mafiabench import publish as transform
from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.cli import main
from mafiabench.play.runner import BackendPool, GameSpec, play_game
from mafiabench.protocols import rows_for_warehouse
from mafiabench.record import GameRecord
from mafiabench.study.protocol import protocol_card
from mafiabench.study.spec import load_experiment
from mafiabench.warehouse import raw as warehouse

SCRIPT = "<script>alert(1)</script>"


BACKGROUNDS = ("policy/informed", "scripted/naive")


TARGETS = ("fake/alpha", "flaky/beta", "policy/random")


ROLE = {"deceive": "mafioso", "detect": "villager", "disclose": "detective"}


def _pool() -> BackendPool:
    # `flaky/...` breaks the answer format now and then: format failures, silences and random fallback votes.
    return BackendPool(endpoints={"flaky": EndpointConfig("flaky", "fake", options={"p_malformed": 0.3})})


def study_records(games_per_cell: int = 4, experiment: str = "dash") -> list[GameRecord]:
    """A small Mini-Mafia design: 2 backgrounds x 3 targets x 3 capabilities, plus one homogeneous cell.

    One message of the first game is replaced by a script tag, as a model might write it.
    """
    specs: list[GameSpec] = []
    seed = 0
    cells: list[tuple[str, dict[str, str], list[str], str | None, str | None]] = []
    for background in BACKGROUNDS:
        for target in TARGETS:
            for cap, role in ROLE.items():
                agents = dict.fromkeys(ROLE.values(), background)
                agents[role] = target
                cells.append((f"{cap}|{target}|{background}", agents, [cap], target, background))
    cells.append(("homogeneous|fake/alpha", dict.fromkeys(ROLE.values(), "fake/alpha"), list(ROLE), "fake/alpha",
                  "fake/alpha"))
    for cell, agents, caps, target, background in cells:
        for i in range(games_per_cell):
            seed += 1
            gid = f"{experiment}.{re.sub(r'[^A-Za-z0-9]+', '-', cell)}.{i:03d}"
            design = {"experiment": experiment, "cell": cell, "game_index": i, "capabilities": caps,
                      "target": target, "background": background}
            specs.append(GameSpec.build(gid, "mini-mafia", None, seed, agents, design=design))

    async def play() -> list[GameRecord]:
        pool = _pool()
        return list(await asyncio.gather(*(play_game(s, pool) for s in specs)))

    records = asyncio.run(play())
    first = records[0]
    for j, e in enumerate(first.events):
        if e.type == "message":
            first.events[j] = dataclasses.replace(e, text=f"{SCRIPT} I am innocent & so is </script> Bob")
            break
    return records


def protocol_card_rows(experiment: str = "dash") -> list[dict[str, Any]]:
    """The flagship experiment's protocol card, recorded for this study, with a label written as a model might write
    text (the card's words are ours, but every cell is escaped all the same)."""
    card = protocol_card(load_experiment(Path(__file__).resolve().parents[2] / "experiments"
                                         / "mini_mafia_backgrounds.toml"))
    assert card is not None
    rows = rows_for_warehouse(dataclasses.replace(card, experiment=experiment))
    rows[0]["note"] = f"{SCRIPT} a note"
    return rows


def build_study(path: Path, games_per_cell: int = 4) -> Path:
    """Play, land and build a small study warehouse at `path` (closed afterwards, so tests can copy it)."""
    con = warehouse.connect(path)
    try:
        warehouse.load_records(con, study_records(games_per_cell))
        warehouse.record_protocol_card(con, "dash", protocol_card_rows())
        transform.build_warehouse(con, upset_threshold=0.3)
        con.execute("checkpoint")
    finally:
        con.close()
    return path


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _shared(tmp_path_factory: pytest.TempPathFactory, name: str) -> tuple[Path, Any]:
    """A folder shared by every pytest-xdist worker of this session, and an exclusive lock on it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    lock = open(root / f"{name}.lock", "w")  # noqa: SIM115 - held until the caller closes it
    fcntl.flock(lock, fcntl.LOCK_EX)
    return root / name, lock


def shared_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(warehouse, dashboards): a small study built once per test session and rendered by the command line with
    images; both test files use it read-only (building costs ~10 s, rendering with images a few more)."""
    folder, lock = _shared(tmp_path_factory, "dashboards-study")
    try:
        # w.duckdb, as most tests name theirs: dbt's parsed project is kept per warehouse name, and read, not parsed
        db, out = folder / "w.duckdb", folder / "dashboards"
        if not (folder / "done").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build_study(db)
            assert main(["dashboards", "--warehouse", str(db), "--out", str(out), "--export-images"]) == 0
            (folder / "done").touch()
        return db, out
    finally:
        lock.close()
