"""The two marts the ratings read (fct_games, fct_player_games), with the columns they read, from games written
as {"study", "id", "mafia": seats, "town": seats, "mafia_won", ...}: a seat is a model, or (role, model) where the
test is about roles. Shared by the ratings' tests and the leaderboard page's."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl


def seat_of(seat: str | tuple[str, str]) -> tuple[str | None, str]:
    """A seat given as a model (no role recorded) or as (role, model)."""
    return (None, seat) if isinstance(seat, str) else seat


def warehouse(games: list[dict[str, Any]], *, variant: str | None = None) -> duckdb.DuckDBPyConnection:
    """fct_games and fct_player_games holding `games` (with a `variant` column when one is given)."""
    fct_games = pl.DataFrame(
        [{"study": g["study"], "game_id": g["id"], "status": g.get("status", "finished"),
          "valid": g.get("valid", True), "is_scored": g.get("scored", True), "mafia_won": g.get("mafia_won", False)}
         for g in games],
        schema={"study": pl.Utf8, "game_id": pl.Utf8, "status": pl.Utf8, "valid": pl.Boolean,
                "is_scored": pl.Boolean, "mafia_won": pl.Boolean},
    )
    players = []
    for g in games:
        seats = [("mafia", *seat_of(m)) for m in g["mafia"]] + [("town", *seat_of(m)) for m in g["town"]]
        players += [{"game_id": g["id"], "seat": i, "team": team, "role": role, "model": model}
                    for i, (team, role, model) in enumerate(seats)]
    fct_player_games = pl.DataFrame(players, schema={"game_id": pl.Utf8, "seat": pl.Int32, "team": pl.Utf8,
                                                     "role": pl.Utf8, "model": pl.Utf8})
    if variant:
        fct_player_games = fct_player_games.with_columns(variant=pl.lit(variant))
    con = duckdb.connect()
    for name, frame in (("fct_games", fct_games), ("fct_player_games", fct_player_games)):
        con.register(f"{name}_frame", frame.to_arrow())
        con.execute(f"create table {name} as select * from {name}_frame")
        con.unregister(f"{name}_frame")
    return con
