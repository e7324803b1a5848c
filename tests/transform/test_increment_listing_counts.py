"""The listing-order leak check's counts in an incremental build: `int_listing_counts` (a summed model) is the
published counts plus the new games' own, not every seat counted again, for games ranked by their seat masks
(simulated, seated) and games ranked one player at a time (an import without seats); mart_listing_leaks equals a
full rebuild's, row for row, and the leaks the import report finds in the raw tables. A build that replaces or
removes published games also takes their published counts away (a seated game reseated, an unseated one removed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mafiabench.publish import build_warehouse
from mafiabench.warehouse.listing_leaks import listing_leaks
from mafiabench.warehouse.raw import load_records
from support.increments import assert_same, full_rebuild, published, remove_game
from support.records import cell_records, design, fresh_con, mini_record, rows

CELL = design("homogeneous|X", None, "X", "X")


def _seated(prefix: str, n: int) -> list[Any]:
    """Simulated games, their seats turned a place a game (no leak)."""
    return cell_records(prefix, n=n, mafia_wins=n // 3, models="X", design=CELL, rotate_seats=True)


def _unseated(prefix: str, n: int) -> list[Any]:
    """Imported games without seats (listed by name: the mafioso, Alice in the first seat order, listed first)."""
    return [dataclasses.replace(rec, players=[dataclasses.replace(p, seat=None) for p in rec.players])
            for rec in (mini_record(f"{prefix}-{i}", models="X", source="minimafia") for i in range(n))]


def _mart(con: Any) -> list[tuple[Any, ...]]:
    return sorted(con.execute("select source, listing, position, games, mafia, p_holm, verdict "
                              "from mart_listing_leaks").fetchall())


def _summed(result: Any) -> bool:
    return {m.name: m.materialized for m in result.models}["int_listing_counts"] == "summed"


def _reported(con: Any) -> list[tuple[Any, ...]]:
    """What the import report reads: the same counts from the raw tables."""
    return sorted((r.source, r.listing, r.position, r.n, r.mafia, r.p_holm, r.verdict) for r in listing_leaks(con))


def test_added_games_add_their_listing_counts(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, [*_seated("a", 12), *_unseated("u", 12)])
    assert build_warehouse(con).published
    load_records(con, [*_seated("b", 6), *_unseated("v", 6)])
    result = build_warehouse(con)
    assert result.published and _summed(result)  # not counted whole
    assert_same(published(con), full_rebuild(con, tmp_path))
    leaks = rows(con, "select source, position, games, mafia, verdict from mart_listing_leaks order by all")
    assert [(r["position"], r["games"], r["mafia"]) for r in leaks if r["source"] == "minimafia"] == [
        (1, 18, 18), (2, 18, 0), (3, 18, 0), (4, 18, 0)]  # every game of the import lists its mafioso first
    assert [r["verdict"] for r in leaks if r["source"] == "simulation:exp"] == ["no leak"] * 4
    assert _reported(con) == _mart(con)


def test_replaced_or_removed_games_take_their_counts_away(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, [*_seated("a", 12), *_unseated("u", 12)])
    assert build_warehouse(con).published
    load_records(con, [mini_record("a-0", models="X", design=CELL, seats=(("Bob", "villager"), ("Alice", "mafioso"),
                                   ("Charlie", "detective"), ("Diana", "villager")))], replace=True)
    remove_game(con, "u-3")
    load_records(con, _unseated("v", 2))
    result = build_warehouse(con)
    assert result.published and _summed(result)
    assert_same(published(con), full_rebuild(con, tmp_path))
    assert _reported(con) == _mart(con)
