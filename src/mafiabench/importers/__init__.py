"""Importers: other tools' game datasets → canonical game records, landed like simulated games.

Each format has a reader, `read_<format>(path) -> Iterator[GameRecord | UnreadableGame]`, that never drops a game
silently (invalid games become records with a validity flag; games that cannot become records are yielded with
the reason), and `run_import` lands a dataset in the warehouse idempotently and reports what it did.
May import engine, agents (the prompts' line shapes), record, warehouse and errors.
"""

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
