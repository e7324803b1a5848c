"""The leaderboard's counts in an increment that only adds games: `int_line_up_counts` (a summed model) is the
published counts plus the new games' own, not every seat counted again, and it and the leaderboard's marts equal a
full rebuild's, row for row, when new games add to a published line-up, open a new one and a new head-to-head cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, published
from support.records import cell_records, design, fresh_con, rows


def _cell(prefix: str, n: int, wins: int, mafia: str, town: str, villager: str | None = None) -> list[Any]:
    """`n` games of the mafioso's model `mafia` against a town of `town` (its villagers `villager` where given)."""
    models = {"mafioso": mafia, "detective": town, "villager": villager or town, "bystander": villager or town}
    return cell_records(prefix, n=n, mafia_wins=wins, models=models, rotate_seats=True,
                        design=design(f"{mafia}|{town}|{villager}", None, mafia, town))


def _counts(con: Any) -> dict[tuple[str, str], tuple[int, int]]:
    return {(r["line_up"].replace("\x1f", ":").replace("\x1e", " "), r["category"]): (r["games"], r["wins"])
            for r in rows(con, "select * from int_line_up_counts")}


def test_added_games_add_their_line_up_counts(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, [*_cell("ab", 6, 2, "A", "B"), *_cell("ba", 5, 3, "B", "A"), *_cell("aa", 3, 1, "A", "A")])
    assert build_warehouse(con).published
    a_b = "mafia:mafioso:A town:detective:B town:villager:B town:villager:B"
    assert _counts(con)[(a_b, "rated")] == (6, 2)

    # More games of a published line-up, a line-up of two town models, and a new head-to-head cell.
    load_records(con, [*_cell("ab2", 4, 3, "A", "B"), *_cell("mixed", 2, 1, "A", "B", "C"),
                       *_cell("ac", 3, 0, "A", "C")])
    result = build_warehouse(con)
    assert result.published
    assert {m.name: m.materialized for m in result.models}["int_line_up_counts"] == "summed"  # not counted whole
    counts = _counts(con)
    assert counts[(a_b, "rated")] == (10, 5)
    assert counts[("mafia:mafioso:A town:detective:B town:villager:C town:villager:C", "rated")] == (2, 1)
    assert counts[("mafia:mafioso:A town:detective:A town:villager:A town:villager:A", "self_play")] == (3, 1)
    cells = {(r["mafia_model"], r["town_model"]): r["games"] for r in rows(con, "select * from mart_head_to_head")}
    assert cells == {("A", "B"): 10, ("B", "A"): 5, ("A", "C"): 3}
    assert_same(published(con), full_rebuild(con, tmp_path))
