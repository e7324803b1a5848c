"""Expansion of an experiment into cells × games, each with a deterministic id and seed.

The same file always gives the same ids and seeds (they depend on the experiment's name, the cell's name and the
game's index only), which is what makes a re-run resume instead of replaying: landed ids are skipped. What a game
*is* (rules, seats, model settings, every word of the prompt) is each cell's fingerprint, recorded in the warehouse
with its first games and checked on every resume: a cell changed under the same name is a clear error, never a
silent skip of games played the old way. Adding games
to a cell appends indices; adding a target or a background adds cells; neither renames a game already played.

Cell names: explicit cells keep the user's name; design cells are `<capability>|<target>|<background>`, and a
homogeneous cell (the target is the background's only model) is `homogeneous|<model>` whatever capabilities are
asked, so it is played once for the three of them and extending the capability list does not rename it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mafiabench.agents.llm import ModelSettings, prompt_provenance
from mafiabench.agents.prompts import resolve_prompts
from mafiabench.agents.statements import provenance as statements_provenance
from mafiabench.agents.statements import statement_prompts
from mafiabench.engine import derive_seed, rules_for
from mafiabench.play.runner import GameSpec
from mafiabench.study.spec import BACKGROUND_ROLES, CAPABILITIES, TARGET_ROLE, Background, Experiment
from mafiabench.warehouse.raw import CellFingerprint


@dataclass(frozen=True)
class Cell:
    """A set of games played with the same agents and rules."""

    name: str
    agents: dict[str, str]
    games: int
    rules: dict[str, Any]
    capabilities: tuple[str, ...] = ()
    target: str | None = None
    background: str | None = None
    mirror_pair: str | None = None
    models: dict[str, ModelSettings] = field(default_factory=dict)  # the cell's own [models] entries (CellSpec)

    def model_settings(self, experiment_models: dict[str, ModelSettings]) -> dict[str, ModelSettings]:
        """The settings its games play with: the experiment's, with what the cell's own entry (or its `default`, for
        the cell's other models) sets written over them; a setting the cell does not give stays the experiment's."""
        if not self.models:
            return experiment_models
        out = dict(experiment_models)
        default = self.models.get("default")
        for spec in set(self.agents.values()):
            own = self.models.get(spec, None if spec.startswith("policy/") else default)
            if own is not None:
                base = experiment_models.get(spec)
                out[spec] = own if base is None else base.model_copy(update=own.model_dump(exclude_unset=True))
        return out

    @property
    def homogeneous(self) -> bool:
        return len(set(self.agents.values())) == 1

    @functools.cached_property
    def key(self) -> str:
        """Filesystem-safe and unique: a readable slug plus a short hash of the exact name."""
        return f"{slug(self.name)}.{hashlib.sha256(self.name.encode()).hexdigest()[:6]}"


@dataclass(frozen=True)
class PlannedGame:
    """One game of the plan: everything needed to play it, nothing that depends on when or where."""

    game_id: str
    cell: Cell
    index: int
    seed: int
    design: dict[str, Any] = field(hash=False, compare=False)

    def spec(self, experiment: Experiment, models: dict[str, Any] | None = None) -> GameSpec:
        """The runner's input; pass `models` (from `experiment.model_settings()`) when building many."""
        return GameSpec.build(
            self.game_id,
            experiment.variant,
            self.cell.rules,
            self.seed,
            self.cell.agents,
            models=self.cell.model_settings(models if models is not None else experiment.model_settings()),
            prompt_version=experiment.prompt_choice[0],
            prompt_file=experiment.prompt_choice[1],
            design=dict(self.design),
            statements=experiment.statements,
        )


def slug(text: str) -> str:
    """`deceive|openai/gpt-4.1-mini|x` → `deceive_openai-gpt-4.1-mini_x`: safe in file names and URLs."""
    out = text.replace("|", "_").replace("/", "-").replace(":", "-")
    out = re.sub(r"[^A-Za-z0-9._-]+", "-", out).strip("-.")
    return out[:100] or "cell"


def _background_roles(b: str | Background) -> tuple[str, dict[str, str]]:
    if isinstance(b, str):
        return b, dict.fromkeys(BACKGROUND_ROLES, b)
    return b.name, b.role_map()


def expand_cells(exp: Experiment) -> list[Cell]:
    """Explicit cells first, then the design's, in file order; homogeneous design cells merged."""
    cells: list[Cell] = [
        Cell(c.name, dict(c.agents), exp.cell_games(c.games), {**exp.rules, **c.rules}, models=dict(c.models))
        for c in exp.cells
    ]
    if exp.design is not None:
        d = exp.design
        n = exp.cell_games(d.games_per_cell)
        caps = [c for c in CAPABILITIES if c in d.capabilities]
        merged: dict[str, dict[str, Any]] = {}
        for target in d.targets:
            for b in d.backgrounds:
                bg_name, roles = _background_roles(b)
                for cap in caps:
                    agents = {**roles, TARGET_ROLE[cap]: target}
                    homogeneous = set(roles.values()) == {target}
                    name = f"homogeneous|{target}" if homogeneous else f"{cap}|{target}|{bg_name}"
                    entry = merged.setdefault(name, {"agents": agents, "caps": [], "target": target, "bg": bg_name})
                    if cap not in entry["caps"]:
                        entry["caps"].append(cap)
        for name, e in merged.items():
            cells.append(Cell(name, e["agents"], n, dict(exp.rules), tuple(e["caps"]), e["target"], e["bg"]))
    if exp.mirror is not None:
        n = exp.cell_games(exp.mirror.games_per_pair)
        for a, b in exp.mirror.pairs():
            pair = mirror_pair_name(a, b)
            for mafia, town in ((a, b), (b, a)):
                agents = {"default": town, "mafioso": mafia}
                cells.append(Cell(f"mirror|{mafia}|{town}", agents, n, dict(exp.rules), mirror_pair=pair))
    names = [c.name for c in cells]
    clash = sorted({x for x in names if names.count(x) > 1})
    if clash:
        from mafiabench.errors import UserError

        raise UserError(f"experiment {exp.name!r}: cell names clash between [[cells]] and [design]: {clash}")
    return cells


def mirror_pair_name(a: str, b: str) -> str:
    """The pair both mirror cells share (it seeds their games): `mirror|A|B` with A and B sorted."""
    first, second = sorted((a, b))
    return f"mirror|{first}|{second}"


def experiment_key(exp: Experiment) -> str:
    """The experiment part of ids and seeds: the name, salted by a non-zero base seed."""
    return exp.name if exp.seed == 0 else f"{exp.name}-s{exp.seed}"


def game_id(exp: Experiment, cell: Cell, index: int) -> str:
    return f"{cell_prefix(exp, cell)}{index:05d}"


# Model settings that do not change what a game is (how hard and how long the client tries), left out of fingerprints.
_DELIVERY_SETTINGS = frozenset({"timeout_s", "max_attempts", "backoff_base_s"})


def cell_fingerprint(exp: Experiment, cell: Cell) -> dict[str, Any]:
    """Everything that changes what a cell's games are: variant, full rules (defaults filled), seats, the settings
    of each model seated (sampling, token caps, re-prompting), the prompt (version and hash of every word) and, where
    the experiment asks for them, the statement labels (their words' hash and settings)."""
    models = cell.model_settings(exp.model_settings())
    settings = {
        spec: {k: v for k, v in models[spec].model_dump(mode="json").items() if k not in _DELIVERY_SETTINGS}
        for spec in sorted(set(cell.agents.values()))
        if spec in models
    }
    version, batch_config = exp.prompt_choice
    prompts = resolve_prompts(exp.variant, version, batch_config)
    prompt = prompt_provenance(prompts)
    out: dict[str, Any] = {
        "variant": exp.variant,
        "rules": rules_for(exp.variant, cell.rules).model_dump(mode="json"),
        "agents": dict(sorted(cell.agents.items())),
        "models": settings,
        "prompt": {"version": prompt["version"], "sha256": prompt["sha256"]},
    }
    if exp.statements is not None:  # only then: the fingerprints of cells without labels stay as they were
        out["statements"] = statements_provenance(exp.statements, statement_prompts(prompts))
    return out


def cell_fingerprints(exp: Experiment, cells: list[Cell]) -> list[CellFingerprint]:
    return [
        CellFingerprint(exp.name, c.name, f"{experiment_key(exp)}.{c.key}.", cell_fingerprint(exp, c)) for c in cells
    ]


def game_seed(exp: Experiment, cell: Cell, index: int) -> int:
    """`derive_seed(experiment, cell, index)`; a non-zero base seed salts the experiment part. The two cells of a
    mirror pair draw from the pair's name, so game i is dealt the same way round both ways."""
    return derive_seed(experiment_key(exp), cell.mirror_pair or cell.name, index)


def planned_game(exp: Experiment, cell: Cell, i: int) -> PlannedGame:
    return PlannedGame(
        game_id=game_id(exp, cell, i),
        cell=cell,
        index=i,
        seed=game_seed(exp, cell, i),
        design={
            "experiment": exp.name,
            "cell": cell.name,
            "game_index": i,
            "capabilities": list(cell.capabilities),
            "target": cell.target,
            "background": cell.background,
            **({"mirror_pair": cell.mirror_pair} if cell.mirror_pair else {}),
        },
    )


def cell_prefix(exp: Experiment, cell: Cell) -> str:
    """What every game id of the cell starts with (the game's index follows)."""
    return f"{experiment_key(exp)}.{cell.key}."


def iter_games(exp: Experiment, cells: list[Cell] | None = None) -> Iterator[PlannedGame]:
    for cell in cells if cells is not None else expand_cells(exp):
        for i in range(cell.games):
            yield planned_game(exp, cell, i)


def iter_interleaved(
    exp: Experiment, cells: list[Cell], wanted: Callable[[int, int], bool] | None = None
) -> Iterator[PlannedGame]:
    """Game index first, then cell (file order), lazily: a run stopped early (budget, kill) leaves every cell about
    equally advanced, and a million-game plan is never held in memory. `wanted(cell_position, index)` filters."""
    active = [k for k, c in enumerate(cells) if c.games > 0]
    i = 0
    while active:
        for k in active:
            if wanted is None or wanted(k, i):
                yield planned_game(exp, cells[k], i)
        i += 1
        active = [k for k in active if i < cells[k].games]


def expand(exp: Experiment) -> list[PlannedGame]:
    """The whole plan, cell by cell, index by index."""
    return list(iter_games(exp))
