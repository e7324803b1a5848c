"""The versioned price table and the cost ledger: tokens and money per call, game and cell.

Prices live in the repository (`prices.toml`, shared with the cost marts: `[[price]]` rows of provider, model or
`*`, and USD per million `input`, `cached_input`, `output` tokens, under a `version`), never fetched, so a figure in
a run summary can be traced to the table that produced it. An experiment may add or override rows in the same
format. Providers of kind `fake` or `scripted` (whatever their endpoint's name) and `policy/...` agents cost
nothing; a real model without a row is *unpriced*: its tokens are counted, its money is not, and the summary names
it (a USD budget refuses to start with one, since it could not be enforced).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mafiabench.errors import UserError, describe_validation_error
from mafiabench.record import GameRecord

FREE_KINDS = frozenset({"fake", "scripted"})


class Price(BaseModel):
    """One row of the price table: a model's list price in USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field(description="Endpoint name (openai, anthropic, deepseek, openrouter, ...).")
    model: str = Field(description="Model name as sent to the provider, or '*' for every model of the provider.")
    input: float = Field(ge=0, description="Uncached input tokens, USD per million.")
    output: float = Field(ge=0, description="Output tokens (reasoning included), USD per million.")
    cached_input: float | None = Field(
        None, ge=0, description="Cache-hit input tokens, USD per million; absent = billed as ordinary input."
    )
    as_of: date | None = Field(None, description="The day this list price was read from `source`.")
    source: str | None = Field(None, description="Where the price was read (the provider's pricing page).")
    deprecated: date | None = Field(
        None, description="The day the provider deprecated the model (still served, to be retired): preview warns."
    )
    retired: date | None = Field(
        None, description="The day the provider retires (or retired) the model: calls fail from then on."
    )
    lifecycle_source: str | None = Field(
        None, description="Where `deprecated` and `retired` were read (the provider's deprecations page)."
    )

    @property
    def spec(self) -> str:
        return f"{self.provider}/{self.model}"

    def lifecycle(self, today: date | None = None) -> str | None:
        """`retired on 2025-07-21`, `deprecated on 2025-12-19, retires on 2026-02-19`, or None for an active model:
        what preview and the protocol card warn of (a retired model's calls fail, so its games would too)."""
        today = today or date.today()
        if self.retired is not None and self.retired <= today:
            return f"retired on {self.retired.isoformat()}: its calls fail"
        if self.deprecated is not None:
            then = f", retires on {self.retired.isoformat()}" if self.retired is not None else ""
            return f"deprecated on {self.deprecated.isoformat()}{then}"
        if self.retired is not None:
            return f"retires on {self.retired.isoformat()}"
        return None

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
        """`input_tokens` is the whole prompt, cache hits included (how our backends report it)."""
        cached = min(max(cached_tokens, 0), max(input_tokens, 0))
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return ((input_tokens - cached) * self.input + cached * cached_rate + output_tokens * self.output) / 1e6


class PriceTableFile(BaseModel):
    """The schema of `prices.toml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = Field(description="Date or tag of this table; recorded with every run summary.")
    currency: str = Field("USD", description="Always USD.")
    price: list[Price] = Field(default_factory=list, description="One row per provider and model (or '*').")


@dataclass(frozen=True)
class PriceTable:
    version: str
    models: Mapping[str, Price]  # by "provider/model" ("provider/*" for wildcards)
    free_providers: frozenset[str] = frozenset()

    def lookup(self, spec: str) -> Price | None:
        """Exact `provider/model` first, then the provider's `*` row."""
        if spec in self.models:
            return self.models[spec]
        provider = spec.split("/", 1)[0]
        return self.models.get(f"{provider}/*")

    def is_free(self, spec: str) -> bool:
        return spec.startswith("policy/") or spec.split("/", 1)[0] in self.free_providers

    def cost(self, spec: str, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float | None:
        """USD for one call: its row if it has one (so a fake run can be priced as if real), else 0 for free
        providers, else None (unpriced)."""
        price = self.lookup(spec)
        if price is not None:
            return price.cost(input_tokens, output_tokens, cached_tokens)
        return 0.0 if self.is_free(spec) else None

    def with_overrides(self, overrides: Iterable[Price], free_providers: Iterable[str] = ()) -> PriceTable:
        """The table with an experiment's rows added (its version then says so) and free providers marked."""
        extra = {p.spec: p for p in overrides}
        return PriceTable(
            version=f"{self.version}+experiment" if extra else self.version,
            models={**self.models, **extra},
            free_providers=self.free_providers | frozenset(free_providers),
        )


DEFAULT_PRICES_PATH = Path(str(resources.files("mafiabench") / "prices.toml"))


def load_prices(path: Path | None = None) -> PriceTable:
    """Read a price table (default: the one shipped with the package)."""
    path = path or DEFAULT_PRICES_PATH
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: price table not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    try:
        parsed = PriceTableFile.model_validate(data)
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc, str(path))) from None
    return PriceTable(version=parsed.version, models={p.spec: p for p in parsed.price})


def free_providers_of(endpoints: Mapping[str, Any]) -> set[str]:
    """Endpoint names whose kind costs nothing (built-ins merged with the experiment's)."""
    from mafiabench.backends.endpoints import BUILTIN_ENDPOINTS

    merged = {**BUILTIN_ENDPOINTS, **endpoints}
    return {name for name, ep in merged.items() if getattr(ep, "kind", None) in FREE_KINDS}


@dataclass
class Usage:
    """Calls, tokens and money of a group of calls (a game, a cell, a model, a run)."""

    games: int = 0
    failed_games: int = 0
    calls: int = 0
    failed_calls: int = 0
    format_failures: int = 0
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: set[str] = field(default_factory=set)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.games += other.games
        self.failed_games += other.failed_games
        self.calls += other.calls
        self.failed_calls += other.failed_calls
        self.format_failures += other.format_failures
        self.attempts += other.attempts
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens
        self.cost_usd += other.cost_usd
        self.unpriced |= other.unpriced

    def to_dict(self) -> dict[str, Any]:
        return {
            "games": self.games,
            "failed_games": self.failed_games,
            "calls": self.calls,
            "failed_calls": self.failed_calls,
            "format_failures": self.format_failures,
            "attempts": self.attempts,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "unpriced": sorted(self.unpriced),
        }


def call_spec(call: Mapping[str, Any]) -> str:
    return f"{call.get('provider')}/{call.get('model')}"


def call_cost(call: Mapping[str, Any], table: PriceTable) -> float | None:
    """USD for one recorded model call (failed calls carry zero tokens and cost nothing here)."""
    return table.cost(
        call_spec(call),
        int(call.get("input_tokens") or 0),
        int(call.get("output_tokens") or 0),
        int(call.get("cached_tokens") or 0),
    )


def game_usage(record: GameRecord, table: PriceTable) -> tuple[Usage, dict[str, Usage]]:
    """The game's total and its split per model spec (what the cost ledger sums per cell and per model)."""
    total = Usage(games=1, failed_games=int(record.outcome.get("status") == "failed"))
    per_model: dict[str, Usage] = {}
    for call in record.calls:
        spec = call_spec(call)
        u = Usage(
            calls=1,
            failed_calls=int(call.get("response") is None and call.get("error_class") is not None),
            format_failures=int(bool((call.get("parse") or {}).get("format_failure"))),
            attempts=int(call.get("attempts") or 0),
            input_tokens=int(call.get("input_tokens") or 0),
            output_tokens=int(call.get("output_tokens") or 0),
            cached_tokens=int(call.get("cached_tokens") or 0),
        )
        cost = call_cost(call, table)
        if cost is None:
            u.unpriced.add(spec)
        else:
            u.cost_usd = cost
        per_model.setdefault(spec, Usage()).add(u)
        total.add(u)
    return total, per_model
