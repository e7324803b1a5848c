"""Importers: other tools' game datasets → canonical game records, landed like simulated games.

Each format has a reader, `read_<format>(path) -> Iterator[GameRecord | UnreadableGame]`, that never drops a game
silently (invalid games become records with a validity flag; games that cannot become records are yielded with
the reason), and `run_import` lands a dataset in the warehouse idempotently and reports what it did.
May import engine, agents (the prompts' line shapes), record, warehouse and errors.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mafiabench.importers.common import (
        FORMATS,
        ImportedGame,
        ImportReport,
        UnreadableGame,
        mini_mafia_design,
        normalise_model,
        reader_for,
        run_import,
    )
    from mafiabench.importers.dallinger import read_dallinger
    from mafiabench.importers.llmafia import read_llmafia
    from mafiabench.importers.mini_mafia_batch import read_mini_mafia, to_batch_game

# Each name from its module on first use: the CLI lists the formats and a study flow imports `run_import` without
# loading every reader (about 0.1 s; issue 31 item 2).
_HOMES = {
    "read_dallinger": "dallinger",
    "read_llmafia": "llmafia",
    "read_mini_mafia": "mini_mafia_batch",
    "to_batch_game": "mini_mafia_batch",
}

__all__ = [
    "FORMATS",
    "ImportReport",
    "ImportedGame",
    "UnreadableGame",
    "mini_mafia_design",
    "normalise_model",
    "read_dallinger",
    "read_llmafia",
    "read_mini_mafia",
    "reader_for",
    "run_import",
    "to_batch_game",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES.get(name, 'common')}"), name)
    globals()[name] = value
    return value
