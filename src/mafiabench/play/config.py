"""Typed configuration read from TOML, with errors that name the file, the field and the value."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from mafiabench.agents.llm import ModelSettings
from mafiabench.agents.policies import POLICIES
from mafiabench.agents.statements import StatementsConfig
from mafiabench.backends.backend import ConfigError, provider_modules
from mafiabench.backends.endpoints import BUILTIN_ENDPOINTS, EndpointConfig, split_spec
from mafiabench.engine import VARIANTS, rules_for
from mafiabench.engine.core import ROLE_TEAM
from mafiabench.errors import UserError, as_field_error, describe_validation_error

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Mapping[str, Any], source: str) -> M:
    try:
        obj = model.model_validate(dict(data))
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc, source)) from None
    variant, rules = getattr(obj, "variant", None), getattr(obj, "rules", None)
    if isinstance(variant, str) and isinstance(rules, dict):
        validate_rules(variant, rules, source)
    return obj


def validate_rules(variant: str, rules: Mapping[str, Any], source: str, prefix: str = "rules.") -> BaseModel:
    """The variant's rule options, validated by the engine's own rules model (so config and engine agree)."""
    try:
        return rules_for(variant, rules)
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc, source, prefix)) from None


def read_toml(path: Path) -> dict[str, Any]:
    """The file's table; every way a path can be unreadable is a `UserError` naming it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a TOML file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not UTF-8 text (byte {data[exc.start:exc.start + 1]!r} at offset {exc.start}); TOML files "
            "must be UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UserError(f"{path}: not valid TOML: nested too deeply") from None


def _known_variant(v: str) -> str:
    if v not in VARIANTS:
        raise ValueError(f"unknown variant; known: {', '.join(VARIANTS)}")
    return v


VariantName = Annotated[str, AfterValidator(_known_variant)]
"""A variant the engine knows, checked where a config is read."""


def check_agent_spec(spec: str) -> str:
    """Syntax and known policy names only: keys are checked when a run starts, so `preview` needs none."""
    provider, model = split_spec(spec)
    if provider == "policy":
        policy, _, arg = model.partition(":")
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {model!r}; known: {', '.join(POLICIES)}")
        if policy == "always-accuse" and not arg:
            raise ValueError("always-accuse needs a target, e.g. policy/always-accuse:Bob")
    return spec


def check_agent_keys(agents: Mapping[str, str], variant: str, rules: Mapping[str, Any]) -> None:
    """Each key of an agents table is `default`, a role of the variant or a player of its games, and each
    `policy/always-accuse:NAME` names a player. A misspelt role (`mafiso`) was read as a player name no game has, and
    failed only when a game was played, naming neither the file nor the key."""
    try:
        parsed = rules_for(variant, rules)
    except (ValidationError, ValueError):
        return  # the rules' own error is reported where they are validated
    roles = list(getattr(parsed, "composition", {}))
    roles += [alias for role, alias in (("villager", "bystander"), ("bystander", "villager"))
              if role in roles and alias not in roles]  # interchangeable, as agent_spec_for reads them
    names = list(getattr(parsed, "pool", ()) if getattr(parsed, "draw_names", False)
                 else getattr(parsed, "player_names", None) or getattr(parsed, "names", None) or ())
    players = f"a player ({', '.join(names)})" if names else "a player's name"
    for key in agents:
        if key == "default" or key in ROLE_TEAM or key in names or not names:  # any role: tables are shared
            continue
        close = difflib.get_close_matches(key, ["default", *roles, *names], n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"agents.{key}: {key!r} is not 'default', a role of {variant} ({', '.join(roles)}) "
                         f"nor {players}{hint}")
    for key, spec in agents.items():
        target = spec.partition(":")[2] if spec.startswith("policy/always-accuse:") else None
        if target is not None and names and target not in names:
            close = difflib.get_close_matches(target, names, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"agents.{key} = {spec!r}: {target!r} is not a player of these games "
                             f"(players: {', '.join(names)}){hint}")


def check_provider(spec: str, declared: Mapping[str, Any]) -> None:
    """The spec's provider is a built-in or declared endpoint (keys are checked only when a run starts)."""
    provider, _ = split_spec(spec)
    known = set(BUILTIN_ENDPOINTS) | set(declared)
    if provider not in ("policy", "human") and provider not in known:
        raise ValueError(
            f"agent {spec!r}: unknown provider {provider!r}; known: {', '.join(sorted(known))} "
            "(add it under [endpoints])"
        )


class EndpointSpec(BaseModel):
    """A named provider endpoint. OpenAI-compatible servers use kind = "openai" with a base URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(description="openai | anthropic | fake | scripted")
    base_url: str | None = Field(None, description="API base URL (OpenAI-compatible servers, a local fake).")
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the key.")
    key_required: StrictBool = Field(True, description="False for local servers that accept any key.")
    options: dict[str, Any] = Field(default_factory=dict, description="Provider options (fake: fault rates).")

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v not in provider_modules():
            raise ValueError(f"unknown kind; expected one of {list(provider_modules())}")
        return v

    @model_validator(mode="after")
    def _options(self) -> EndpointSpec:
        """Fake-provider options (fault rates, latency) are checked where the file is read, before preview."""
        if self.kind == "fake":
            from mafiabench.backends.fake import check_fault_options

            check_fault_options(self.options)  # a ConfigError naming the option and its value
        return self


def endpoints_from(specs: Mapping[str, EndpointSpec]) -> dict[str, EndpointConfig]:
    try:
        return {name: EndpointConfig.from_dict(name, spec.model_dump()) for name, spec in specs.items()}
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise UserError(str(exc)) from None


class PromptSource(BaseModel):
    """`prompt = { version = "v4.1-full" }` or `prompt = { from_batch_config = "path/batch_config.json" }`: the prompt a
    game plays with. A batch_config path is read from your own copy of the reference's published batches (relative
    paths are relative to the TOML file); its templates are hashed into every record and never shipped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str | None = Field(None, description="A shipped prompt version (default per variant).")
    from_batch_config: str | None = Field(
        None, description="A Mini-Mafia batch_config.json whose prompt_config.templates to play with."
    )

    @model_validator(mode="after")
    def _one(self) -> PromptSource:
        if self.version and self.from_batch_config:
            raise ValueError("give either version or from_batch_config, not both")
        if self.from_batch_config:
            from mafiabench.agents.prompts import PromptSet

            with as_field_error():
                PromptSet.from_batch_config(self.from_batch_config)
        return self


def resolve_paths(data: dict[str, Any], base: Path, keys: Sequence[str]) -> dict[str, Any]:
    """Make the relative paths under these top-level `keys` relative to the file that names them (`base` is its
    folder): every path written in a game or experiment file is read from that file's folder, wherever the command
    runs (paths given on the command line stay relative to the current folder)."""
    out = dict(data)
    for key in keys:
        value = out.get(key)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            out[key] = os.path.normpath(base / value)
    return out


def resolve_prompt_source(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Make a relative `prompt.from_batch_config` relative to the file that names it (`base` is its folder)."""
    prompt = data.get("prompt")
    if isinstance(prompt, dict) and isinstance(prompt.get("from_batch_config"), str):
        path = Path(prompt["from_batch_config"]).expanduser()
        if not path.is_absolute():
            data = {**data, "prompt": {**prompt, "from_batch_config": str(base / path)}}
    return data


class GameConfig(BaseModel):
    """One game (`mafiabench play --config`): variant, rules, who plays each role, model settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    variant: VariantName = Field("mini-mafia", description="mini-mafia | classic | async")
    seed: StrictInt = Field(0, ge=0, description="The game's seed: roles, names, orders, tie-breaks, fallbacks.")
    game_id: str | None = Field(None, description="Defaults to play-<variant>-<seed>.")
    prompt_version: str | None = Field(None, description="Prompt template version; default per variant.")
    prompt: PromptSource | None = Field(None, description="{ version = ... } or { from_batch_config = ... }.")
    rules: dict[str, Any] = Field(default_factory=dict, description="Variant rule options (see the engine).")
    agents: dict[str, str] = Field(
        default_factory=dict,
        description="Agent spec per role (mafioso, detective, villager), per player name, or 'default'.",
    )
    models: dict[str, ModelSettings] = Field(default_factory=dict, description="Settings per agent spec.")
    endpoints: dict[str, EndpointSpec] = Field(default_factory=dict, description="Extra named endpoints.")
    cache_dir: str | None = Field(None, description="Record/replay cache folder for model calls.")
    statements: StatementsConfig | None = Field(
        None, description="[statements]: the speaker's and each living listener's label of every public message."
    )

    @field_validator("agents")
    @classmethod
    def _agent_specs(cls, v: dict[str, str]) -> dict[str, str]:
        for seat, spec in v.items():
            try:
                check_agent_spec(spec)
            except ValueError as exc:  # name the seat: pydantic's location stops at `agents`
                raise ValueError(f"agents.{seat} = {spec!r}: {exc}") from None
        return v

    @model_validator(mode="after")
    def _agents(self) -> GameConfig:
        if not self.agents:
            raise ValueError("agents: give at least a 'default' agent spec")
        if self.prompt is not None and self.prompt_version is not None:
            raise ValueError("give prompt_version or prompt, not both")
        check_agent_keys(self.agents, self.variant, self.rules)
        return self  # unknown providers and missing keys: `BackendPool.check` reports them all at once

    @property
    def prompt_choice(self) -> tuple[str | None, str | None]:
        """(shipped version, batch_config path)."""
        if self.prompt is not None:
            return self.prompt.version, self.prompt.from_batch_config
        return self.prompt_version, None


def load_game_config(
    path: Path, overrides: Mapping[str, Any] | None = None, seats: Mapping[str, str] | None = None
) -> GameConfig:
    """The game file, with `overrides` replacing its keys and `seats` (the command line's agents, e.g. `default`
    or `villager`) laid over its `[agents]` before validation: a file holding only endpoints or rules is complete
    once the command line names the seats."""
    data = resolve_paths(resolve_prompt_source(read_toml(path), path.parent), path.parent, ("cache_dir",))
    data.update(overrides or {})
    if seats:
        file_seats = data.get("agents")
        data["agents"] = {**(file_seats if isinstance(file_seats, dict) else {}), **seats}
    return validate(GameConfig, data, str(path))
