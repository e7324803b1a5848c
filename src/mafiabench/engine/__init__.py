"""The game engine: pure rule state machines, one per variant, chosen by name.

Imports nothing outside itself (no SDK, no I/O, no clock): everything else builds on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from mafiabench.engine.async_mafia import AsyncMafia, AsyncRules
from mafiabench.engine.classic import Classic, ClassicRules
from mafiabench.engine.core import Answer, Decision, GameEngine, Outcome, Player, derive_seed
from mafiabench.engine.events import Event
from mafiabench.engine.mini_mafia import MiniMafia, MiniMafiaRules

VARIANTS: dict[str, tuple[type[GameEngine], type[BaseModel]]] = {
    "mini-mafia": (MiniMafia, MiniMafiaRules),
    "classic": (Classic, ClassicRules),
    "async": (AsyncMafia, AsyncRules),
}


def rules_for(variant: str, options: Mapping[str, Any] | None = None) -> BaseModel:
    """Validate a variant's rule options (unknown keys and bad values raise pydantic's ValidationError)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[variant][1].model_validate(dict(options or {}))


def make_game(variant: str, rules: BaseModel | Mapping[str, Any] | None, seed: int) -> GameEngine:
    if not isinstance(rules, BaseModel):
        rules = rules_for(variant, rules)
    return VARIANTS[variant][0](rules, seed)


__all__ = [
    "VARIANTS",
    "Answer",
    "AsyncMafia",
    "AsyncRules",
    "Classic",
    "ClassicRules",
    "Decision",
    "Event",
    "GameEngine",
    "MiniMafia",
    "MiniMafiaRules",
    "Outcome",
    "Player",
    "derive_seed",
    "make_game",
    "rules_for",
]
