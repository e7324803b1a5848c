"""dim_models: one row per model, its seats counted per role and its games each once, whatever roles and spellings
it played under."""

from __future__ import annotations

from dataclasses import replace

from mafiabench.record import GameRecord, PlayerRecord
from support.records import landed, mini_record, rows

SEATS = (("Alice", "mafioso"), ("Bob", "detective"), ("Charlie", "villager"), ("Diana", "bystander"))


def _spelled(record: GameRecord, spellings: dict[str, tuple[str, str | None]]) -> GameRecord:
    """The record with some seats' agent and raw model name replaced (name -> (agent, model_raw))."""
    players = [
        PlayerRecord(seat=p.seat, name=p.name, role=p.role, agent=spellings[p.name][0], model=p.model,
                     model_raw=spellings[p.name][1]) if p.name in spellings else p
        for p in record.players
    ]
    return replace(record, players=players)


def test_seats_per_role_and_games_once() -> None:
    # g1: A holds three seats of one game (mafioso, villager, bystander) under two providers and three spellings;
    # B only the detective's. g2: A in every seat. g3: A in every seat of another variant.
    g1 = _spelled(mini_record("g1", models={"mafioso": "A", "detective": "B", "villager": "A", "bystander": "A"},
                              seats=SEATS),
                  {"Alice": ("openai/A", "A-2025-01-01"), "Diana": ("fake/A", "a")})
    g2 = mini_record("g2", models="A")
    g3 = replace(mini_record("g3", models="A"), variant="classic")
    con = landed([g1, g2, g3], only=["dim_models"])
    got = {r["model"]: r for r in rows(con, "select * from dim_models")}
    assert sorted(got) == ["A", "B"]
    assert got["A"] == {
        "model": "A", "providers": "fake, openai", "raw_names": "A, A-2025-01-01, a",
        "n_games": 3, "n_seats": 3 + 4 + 4,
        "n_as_mafioso": 3, "n_as_detective": 2, "n_as_villager": 2 + 2 + 2,
        "variants": "classic, mini-mafia",
    }
    # A role the model never played counts 0, not null.
    assert got["B"] == {
        "model": "B", "providers": "fake", "raw_names": "B", "n_games": 1, "n_seats": 1,
        "n_as_mafioso": 0, "n_as_detective": 1, "n_as_villager": 0, "variants": "mini-mafia",
    }
