"""The experiment file (TOML): what to play, how many times, with which models, limits and budget.

An experiment is either explicit cells (who plays each role) or a Mini-Mafia *background design* (targets ×
backgrounds × capabilities), or both. It is validated into a typed, frozen spec before anything runs, with errors
that name the file, the field and the value. The experiment's `name` is the identity of its games: game ids and
seeds derive from it, so renaming an experiment starts it afresh while re-running it resumes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mafiabench.agents.llm import ModelSettings
from mafiabench.agents.statements import StatementsConfig
from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.detect.section import DetectorSection, resolve_prompt_file
from mafiabench.engine import rules_for
from mafiabench.errors import as_field_error
from mafiabench.play.config import (
    EndpointSpec,
    PromptSource,
    VariantName,
    check_agent_keys,
    check_agent_spec,
    check_provider,
    endpoints_from,
    read_toml,
    resolve_paths,
    resolve_prompt_source,
    validate,
)
from mafiabench.prices import Price
from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE

Capability = Literal["deceive", "detect", "disclose"]
CAPABILITIES: tuple[Capability, ...] = ("deceive", "detect", "disclose")
# The role the target plays for each capability (metrics.md §2); the background plays the other two.
TARGET_ROLE: dict[str, str] = {"deceive": "mafioso", "detect": "villager", "disclose": "detective"}
BACKGROUND_ROLES = ("mafioso", "detective", "villager")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
# Bounds that keep a typo (games_per_cell = 1000000000000) from exhausting memory: checked arithmetically, before
# any plan is built. The full Mini-Mafia background design is 14,000 games.
MAX_GAMES_PER_CELL = 1_000_000
MAX_GAMES = 2_000_000


class Background(BaseModel):
    """A background that is not one model: a model per background role (the target's role is ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="How the background is named in the warehouse and dashboards.")
    mafioso: str = Field(description="Agent spec playing the mafioso when the target does not.")
    detective: str = Field(description="Agent spec playing the detective when the target does not.")
    villager: str = Field(description="Agent spec playing the villagers when the target does not.")

    @field_validator("mafioso", "detective", "villager")
    @classmethod
    def _spec(cls, v: str) -> str:
        return check_agent_spec(v)

    def role_map(self) -> dict[str, str]:
        return {"mafioso": self.mafioso, "detective": self.detective, "villager": self.villager}


class DesignSpec(BaseModel):
    """The Mini-Mafia background design: each target plays one role against each background in the other two.

    A homogeneous cell (the target is the background's only model) serves all three capabilities and is played once.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: list[str] = Field(min_length=1, description="Agent specs evaluated, e.g. 'openai/gpt-4.1-mini'.")
    backgrounds: list[str | Background] = Field(
        min_length=1,
        description="A model spec (it plays both background roles) or a table {name, mafioso, detective, villager}.",
    )
    capabilities: list[Capability] = Field(
        default_factory=lambda: list(CAPABILITIES), min_length=1, description="deceive | detect | disclose"
    )
    games_per_cell: StrictInt | None = Field(
        None, ge=1, le=MAX_GAMES_PER_CELL, description="Overrides the experiment's games_per_cell."
    )

    @field_validator("targets")
    @classmethod
    def _targets(cls, v: list[str]) -> list[str]:
        for spec in v:
            check_agent_spec(spec)
        if len(set(v)) != len(v):
            raise ValueError("targets must be distinct")
        return v

    @field_validator("backgrounds")
    @classmethod
    def _backgrounds(cls, v: list[str | Background]) -> list[str | Background]:
        names = [b if isinstance(b, str) else b.name for b in v]
        for b in v:
            if isinstance(b, str):
                check_agent_spec(b)
        if len(set(names)) != len(names):
            raise ValueError("backgrounds must have distinct names")
        return v

    @field_validator("capabilities")
    @classmethod
    def _caps(cls, v: list[Capability]) -> list[Capability]:
        if len(set(v)) != len(v):
            raise ValueError("capabilities must be distinct")
        return v


class CellSpec(BaseModel):
    """An explicit cell: who plays each role (by role, by player name, or `default`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Unique cell name within the experiment (part of each game's id and seed).")
    agents: dict[str, str] = Field(description="Agent spec per role (mafioso, detective, villager), name or default.")
    games: StrictInt | None = Field(
        None, ge=1, le=MAX_GAMES_PER_CELL, description="Games in this cell; default: the experiment's games_per_cell."
    )
    rules: dict[str, Any] = Field(default_factory=dict, description="Rule options overriding the experiment's.")
    models: dict[str, ModelSettings] = Field(
        default_factory=dict,
        description="Settings per agent spec for this cell's games, written over the experiment's [models] entry "
        "(e.g. the same model at another temperature); the key 'default' applies to the cell's other models.",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip() or "\n" in v:
            raise ValueError("cell names must be non-empty single lines")
        return v

    @field_validator("agents")
    @classmethod
    def _agents(cls, v: dict[str, str]) -> dict[str, str]:
        if not v:
            raise ValueError("give at least one agent (e.g. default = 'policy/random')")
        for spec in v.values():
            check_agent_spec(spec)
        return v


# Measured (BENCHMARKS.md): one event loop keeps ~100% of the ideal rate at 64 games in flight over HTTP; at 256 it
# needs ~2.3 ms of CPU per call (most of it the SDK's request path), about a whole core: worker processes pay off above.
AUTO_PROCESSES_ABOVE = 64
AUTO_PROCESSES_MAX = 8


class StoppingSpec(BaseModel):
    """Adaptive sample size: play every cell in waves until its mafia win rate is known to ± `half_width`
    (`mafiabench.study.stopping` says how the intervals stay honest when stopping on the data)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    half_width: float = Field(gt=0, le=0.5, description="Stop a cell when its interval's half-width is at most this.")
    min_games: StrictInt = Field(ge=1, le=MAX_GAMES_PER_CELL, description="Games of the first wave of each cell.")
    max_games: StrictInt = Field(ge=1, le=MAX_GAMES_PER_CELL, description="A cell stops here whatever its width.")
    wave: StrictInt | None = Field(
        None, ge=1, le=MAX_GAMES_PER_CELL, description="Games added to an unfinished cell per wave (default min_games)."
    )
    confidence: float = Field(0.95, ge=0.5, lt=1, description="Coverage the stopping interval keeps (default 0.95).")

    @model_validator(mode="after")
    def _order(self) -> StoppingSpec:
        if self.max_games < self.min_games:
            raise ValueError(f"max_games ({self.max_games}) must be at least min_games ({self.min_games})")
        return self

    def rule(self) -> Any:
        from mafiabench.study.stopping import Rule

        return Rule(self.half_width, self.min_games, self.max_games, self.wave or self.min_games, self.confidence)


class Concurrency(BaseModel):
    """Limits of one run: games in flight, model calls in flight per provider (endpoint name), worker processes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    games: StrictInt = Field(64, ge=1, le=100_000, description="Games played at the same time.")
    default_provider: StrictInt = Field(
        64, ge=1, le=100_000, description="Calls in flight for a provider not listed in `providers`."
    )
    providers: dict[str, StrictInt] = Field(
        default_factory=dict, description="Calls in flight per provider, e.g. {openai = 32, anthropic = 8}."
    )
    processes: Annotated[int, Field(ge=1, le=64), Strict()] | Literal["auto"] = Field(
        "auto",
        description="Worker processes playing games; above 1, each has its own event loop and model clients (one "
        "loop's CPU caps HTTP calls at a few hundred per second). `auto`: one per core (at most 8) when more than "
        f"{AUTO_PROCESSES_ABOVE} games are in flight and some model is called over HTTP, or when only policies play "
        "5,000 games or more (whole shards per worker), else 1. `games` stays one "
        "limit over all of them; each provider's call limit is split evenly across them. The run itself still "
        "writes every record.",
    )

    latency_s: dict[str, Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)]] = Field(
        default_factory=dict,
        description="Expected seconds per model call, per provider (endpoint name), for preview's wall-time "
        "estimate, e.g. {openai = 1.2}; unlisted providers use a default per provider (study/estimate.py).",
    )

    def worker_processes(self, uses_http: bool, cpus: int | None = None) -> int:
        """The processes a run uses: the number given, or for `auto` one per core (up to 8) when more than
        `AUTO_PROCESSES_ABOVE` games are in flight and some model is reached over HTTP (in-process providers and
        scripted players gain nothing from workers: a record costs more to send back than to play)."""
        if self.processes != "auto":
            return self.processes
        if not uses_http or self.games <= AUTO_PROCESSES_ABOVE:
            return 1
        return max(1, min(cpus if cpus is not None else os.cpu_count() or 1, AUTO_PROCESSES_MAX))

    @field_validator("providers")
    @classmethod
    def _positive(cls, v: dict[str, int]) -> dict[str, int]:
        bad = {k: n for k, n in v.items() if n < 1}
        if bad:
            raise ValueError(f"limits must be at least 1, got {bad}")
        return v


class Cluster(BaseModel):
    """Where games are played when one machine is not enough (study/cluster.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dask: str = Field(
        description="Address of a running Dask scheduler (`tcp://host:8786`); each game runs as a task on its "
        "workers, the run itself stays the one writer."
    )

    @field_validator("dask")
    @classmethod
    def _address(cls, v: str) -> str:
        if not re.fullmatch(r"(tcp|tls|ws|wss|inproc)://[^\s/]+(:\d+)?/?", v):
            raise ValueError(f"expected a scheduler address such as tcp://127.0.0.1:8786, got {v!r}")
        return v


class Budget(BaseModel):
    """A cap on what the experiment spends, counting every landed game of it (earlier runs included).

    The guard stops *starting* games once the cap is reached; games already in flight finish, so the overshoot is
    at most about one game per concurrent slot.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: StrictInt | None = Field(None, ge=0, description="Input + output tokens over all calls.")
    max_usd: float | None = Field(None, ge=0, description="Money from the price table.")

    @property
    def active(self) -> bool:
        return self.max_tokens is not None or self.max_usd is not None


class ImportSource(BaseModel):
    """A dataset to import before detecting (`[[imports]]`): the same as `mafiabench import FORMAT PATH`, and as
    idempotent, so re-running the experiment imports nothing twice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["mini-mafia", "mini-mafia-sqlite", "mini-mafia-web", "dallinger", "llmafia"] = Field(
        description="mini-mafia | mini-mafia-sqlite | mini-mafia-web | dallinger | llmafia"
    )
    path: str = Field(description="The dataset's folder or file, relative to the experiment file.")
    study: str | None = Field(None, description="The study these games are (default: the source's name).")

    @field_validator("path")
    @classmethod
    def _exists(cls, v: str) -> str:
        if not Path(v).exists():
            raise ValueError(f"no such file or folder: {v}")
        return v


class MirrorSpec(BaseModel):
    """Mirror pairs: every pair of models plays twice, once each way round (A as mafia against B as town, then B
    against A), game for game with the same seed, so the game's asymmetry (and each seed's luck) cancels in the pair.

    In every game the mafia seats are one model's and every other seat the other's. A pair is two cells,
    `mirror|A|B` and `mirror|B|A` (mafia model first); game i of both is played with the same seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: list[str] = Field(min_length=2, description="Agent specs; every pair of them plays both ways round.")
    games_per_pair: StrictInt | None = Field(
        None, ge=1, le=MAX_GAMES_PER_CELL, description="Games each way round; default: the experiment's games_per_cell."
    )

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[str]) -> list[str]:
        for spec in v:
            check_agent_spec(spec)
        if len(set(v)) != len(v):
            raise ValueError(f"mirror.models must be distinct: {sorted({m for m in v if v.count(m) > 1})}")
        return v

    def pairs(self) -> list[tuple[str, str]]:
        """Each unordered pair once, in file order."""
        return [(a, b) for i, a in enumerate(self.models) for b in self.models[i + 1 :]]


class Experiment(BaseModel):
    """A study: cells × games, with the settings to play them and the limits to respect."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Identity of the experiment's games (letters, digits, '.', '_', '-').")
    description: str = Field("", description="Free text shown in the run summary.")
    variant: VariantName = Field("mini-mafia", description="mini-mafia | classic | async")
    rules: dict[str, Any] = Field(default_factory=dict, description="Rule options of the variant (see the engine).")
    reference: str | None = Field(
        None,
        description="The reference protocol this experiment replicates (src/mafiabench/protocols/<name>.toml, e.g. "
        "'mini-mafia-v4.1'): preview prints every deviation from it, the run records the card.",
    )
    prompt_version: str | None = Field(None, description="Prompt template version; default per variant.")
    prompt: PromptSource | None = Field(
        None, description="{ version = ... } or { from_batch_config = 'your/batch_config.json' } (reference templates)."
    )
    seed: StrictInt = Field(
        0, ge=0, lt=2**63, description="Base seed; 0 keeps the seeds derived from (name, cell, index) alone."
    )
    games_per_cell: StrictInt = Field(
        10, ge=1, le=MAX_GAMES_PER_CELL, description="Games per cell unless a cell or the design says otherwise."
    )
    endpoints: dict[str, EndpointSpec] = Field(default_factory=dict, description="Extra or overriding endpoints.")
    cells: list[CellSpec] = Field(default_factory=list, description="Explicit cells (seat assignments).")
    mirror: MirrorSpec | None = Field(
        None, description="[mirror]: every pair of models played both ways round with the same seeds."
    )
    design: DesignSpec | None = Field(
        None, validate_default=True, description="A Mini-Mafia background design (targets × backgrounds)."
    )
    models: dict[str, ModelSettings] = Field(
        default_factory=dict, description="Settings per agent spec; the key 'default' applies to the others."
    )
    concurrency: Concurrency = Field(default_factory=Concurrency, description="In-process concurrency limits.")
    cluster: Cluster | None = Field(None, description="Play the games on a Dask cluster ([cluster] dask = ADDRESS).")
    budget: Budget = Field(default_factory=Budget, description="Spending cap (tokens and/or USD).")
    stopping: StoppingSpec | None = Field(
        None, description="Adaptive sample size for every cell (replaces games_per_cell and games): see [stopping]."
    )
    prices: list[Price] = Field(
        default_factory=list,
        description="[[prices]] rows added to or overriding the price table (provider, model, input, output, ...).",
    )
    warehouse: str = Field(
        str(DEFAULT_WAREHOUSE),
        description="DuckDB file, relative to the experiment file (unset: warehouse/mafiabench.duckdb in the current "
        "folder).",
    )
    shard_size: StrictInt = Field(
        50, ge=1, le=100_000, description="Games per orchestration task (a Prefect task run)."
    )
    cache_dir: str | None = Field(
        None, description="Record/replay cache folder for model calls, relative to the experiment file."
    )
    imports: list[ImportSource] = Field(
        default_factory=list, description="[[imports]]: datasets imported into the warehouse before detecting."
    )
    detector: DetectorSection | None = Field(
        None, description="[detector]: the Mafia Detector run on this experiment's games and/or imported ones."
    )
    statements: StatementsConfig | None = Field(
        None,
        description="[statements]: after each public message, the speaker's own deception label and each living "
        "listener's, asked in the prompt version's words (WOLF's questions); off when absent.",
    )

    @field_validator("detector")
    @classmethod
    def _detector(cls, v: DetectorSection | None, info: ValidationInfo) -> DetectorSection | None:
        if v is not None:
            _check_providers([m for m in v.models if not m.startswith("policy/")], info)
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("must be 1-80 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v

    @field_validator("rules")
    @classmethod
    def _rules(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "variant" in info.data:
            _check_rules(info.data["variant"], v)
        return v

    @field_validator("reference")
    @classmethod
    def _reference(cls, v: str | None) -> str | None:
        if v is not None:
            from mafiabench.protocols import load_protocol

            with as_field_error():
                load_protocol(v)
        return v

    @field_validator("prompt_version")
    @classmethod
    def _prompt_version(cls, v: str | None, info: ValidationInfo) -> str | None:
        if "variant" in info.data:
            from mafiabench.agents.prompts import load_prompts

            with as_field_error():
                load_prompts(info.data["variant"], v)
        return v

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, v: dict[str, EndpointSpec]) -> dict[str, EndpointSpec]:
        try:
            endpoints_from(v)
        except Exception as exc:  # a ConfigError naming the endpoint
            raise ValueError(str(exc)) from None
        return v

    @field_validator("cells")
    @classmethod
    def _cells(cls, v: list[CellSpec]) -> list[CellSpec]:
        names = [c.name for c in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"cell names must be unique; repeated: {dupes}")
        return v  # each cell's rules and agents are checked with the whole experiment (_cell_checks)

    @field_validator("design")
    @classmethod
    def _design(cls, v: DesignSpec | None, info: ValidationInfo) -> DesignSpec | None:
        if v is None:
            if "cells" in info.data and not info.data["cells"] and info.data.get("mirror") is None:
                raise ValueError(
                    "give [[cells]] (explicit seat assignments), a [design] (targets × backgrounds) or a [mirror] "
                    "(pairs of models, both ways round)"
                )
            return v
        if info.data.get("variant", "mini-mafia") != "mini-mafia":
            raise ValueError("a background [design] needs variant = 'mini-mafia' (its roles are fixed)")
        specs = list(v.targets)
        for b in v.backgrounds:
            specs += [b] if isinstance(b, str) else list(b.role_map().values())
        _check_providers(specs, info)
        return v

    @model_validator(mode="after")
    def _cell_checks(self) -> Experiment:
        """A cell's rules (the experiment's and its own) are the variant's, its agents' providers are built in or
        declared, and its agents name roles and players of the games it plays. An error names the cell and the key
        (issue 31 item 6: raised from the `cells` field, a bad rule or provider printed the whole list of cells,
        and an unknown provider named neither the cell nor the key)."""
        declared = self.endpoints
        for i, c in enumerate(self.cells):
            try:
                _check_rules(self.variant, {**self.rules, **c.rules}, prefix="rules.")
                for key, spec in c.agents.items():
                    try:
                        check_provider(spec, declared)
                    except ValueError as exc:
                        raise ValueError(f"agents.{key}: {exc}") from None
                check_agent_keys(c.agents, self.variant, {**self.rules, **c.rules})
            except ValueError as exc:
                raise ValueError(f"cells[{i}] (cell {c.name!r}): {exc}") from None
        return self

    @model_validator(mode="after")
    def _bounded(self) -> Experiment:
        if self.stopping is not None:
            fixed = [f"cells[{i}].games = {c.games}" for i, c in enumerate(self.cells) if c.games is not None]
            if self.design is not None and self.design.games_per_cell is not None:
                fixed.append(f"design.games_per_cell = {self.design.games_per_cell}")
            if fixed:
                raise ValueError(
                    f"[stopping] decides how many games each cell plays (up to stopping.max_games); remove {fixed[0]}"
                )
        n = self.planned_games()
        if n > MAX_GAMES:
            raise ValueError(
                f"the experiment plans {n:,} games, more than the {MAX_GAMES:,} one run may hold; split it into "
                "several experiments or lower games_per_cell / games"
            )
        return self

    def planned_games(self) -> int:
        """How many games the experiment plans, counted without building the plan."""
        n = sum(self.cell_games(c.games) for c in self.cells)
        if self.design is not None:
            d = self.design
            names: set[str] = set()
            for target in d.targets:
                for b in d.backgrounds:
                    roles = {b} if isinstance(b, str) else set(b.role_map().values())
                    for cap in d.capabilities:
                        homogeneous = roles == {target}
                        bg = b if isinstance(b, str) else b.name
                        names.add(f"homogeneous|{target}" if homogeneous else f"{cap}|{target}|{bg}")
            n += len(names) * self.cell_games(d.games_per_cell)
        if self.mirror is not None:
            n += 2 * len(self.mirror.pairs()) * self.cell_games(self.mirror.games_per_pair)
        return n

    def cell_games(self, given: int | None) -> int:
        """Games planned for a cell: with [stopping] its max_games (the waves stop earlier), else the cell's or
        design's own count, else games_per_cell."""
        if self.stopping is not None:
            return self.stopping.max_games
        return given or self.games_per_cell

    # -- derived ------------------------------------------------------------------------------------------------
    def endpoint_configs(self) -> dict[str, EndpointConfig]:
        return endpoints_from(self.endpoints)

    def agent_specs(self) -> list[str]:
        """Every agent spec the experiment uses, in first-seen order."""
        seen: dict[str, None] = {}
        for c in self.cells:
            for s in c.agents.values():
                seen.setdefault(s, None)
        if self.design is not None:
            for s in self.design.targets:
                seen.setdefault(s, None)
            for b in self.design.backgrounds:
                for s in [b] if isinstance(b, str) else b.role_map().values():
                    seen.setdefault(s, None)
        for s in self.mirror.models if self.mirror is not None else []:
            seen.setdefault(s, None)
        return list(seen)

    def model_settings(self) -> dict[str, ModelSettings]:
        """Settings per model spec used, with `default` filled in for those not listed."""
        default = self.models.get("default")
        out = {k: v for k, v in self.models.items() if k != "default"}
        if default is not None:
            for spec in self.agent_specs():
                if not spec.startswith("policy/"):
                    out.setdefault(spec, default)
        return out

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, v: PromptSource | None, info: ValidationInfo) -> PromptSource | None:
        if v is not None and info.data.get("prompt_version") is not None:
            raise ValueError("give prompt_version or prompt, not both")
        if v is not None and v.version and "variant" in info.data:
            from mafiabench.agents.prompts import load_prompts

            with as_field_error():
                load_prompts(info.data["variant"], v.version)
        if v is not None and v.from_batch_config and info.data.get("variant", "mini-mafia") != "mini-mafia":
            raise ValueError("from_batch_config holds Mini-Mafia templates: it needs variant = 'mini-mafia'")
        return v

    @model_validator(mode="after")
    def _statement_words(self) -> Experiment:
        """[statements] asks its questions in the words of the game's prompt version: it must have them."""
        if self.statements is not None:
            from mafiabench.agents.prompts import resolve_prompts
            from mafiabench.agents.statements import statement_prompts

            with as_field_error("statements: "):
                statement_prompts(resolve_prompts(self.variant, *self.prompt_choice))
        return self

    @property
    def prompt_choice(self) -> tuple[str | None, str | None]:
        """(shipped version, batch_config path) games are played with."""
        if self.prompt is not None:
            return self.prompt.version, self.prompt.from_batch_config
        return self.prompt_version, None

    def prompt_label(self) -> str:
        """The prompt version games will record (the variant's default when none is set)."""
        from mafiabench.agents.prompts import resolve_prompts

        return resolve_prompts(self.variant, *self.prompt_choice).ident

    def warehouse_path(self, override: str | Path | None = None) -> Path:
        return Path(override) if override is not None else Path(self.warehouse)

    def detector_spec(self) -> Any:
        """The detection step's `DetectorSpec` (None without a `[detector]` section)."""
        return None if self.detector is None else self.detector.spec(self.name)


def _check_rules(variant: str, rules: dict[str, Any], prefix: str = "") -> None:
    try:
        rules_for(variant, rules)
    except ValidationError as exc:
        detail = "; ".join(f"{prefix}{'.'.join(map(str, e['loc']))} = {e.get('input')!r}: {e['msg']}"
                           for e in exc.errors())
        raise ValueError(detail) from None


def _check_providers(specs: Iterable[str], info: ValidationInfo) -> None:
    """Every agent's provider is a built-in or declared endpoint (keys are checked only when a run starts)."""
    declared = info.data.get("endpoints") or {}
    for spec in specs:
        check_provider(spec, declared)


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file; a `UserError` names the file, the field and the value."""
    path = Path(path)
    data = resolve_prompt_file(_resolve_imports(resolve_prompt_source(read_toml(path), path.parent), path.parent),
                               path.parent)
    data = resolve_paths(data, path.parent, ("warehouse", "cache_dir"))  # every path in the file: from its folder
    return validate(Experiment, data, str(path))


def _resolve_imports(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Make each relative `[[imports]] path` relative to the experiment file that names it."""
    items = data.get("imports")
    if not isinstance(items, list):
        return data
    out = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            p = Path(item["path"]).expanduser()
            item = {**item, "path": str(p if p.is_absolute() else base / p)}
        out.append(item)
    return {**data, "imports": out}


def parse_experiment(data: dict[str, Any], source: str = "<experiment>") -> Experiment:
    """Validate an experiment given as a dict (tests, programmatic studies)."""
    return validate(Experiment, data, source)
