"""The games list is one static page, capped (MAX_INDEX_ROWS): beyond the cap it lists the first games of every study
and cell in turn, so a chart's bar for any cell opens some of its games (it listed the first games by study and
cell: at a million games of two cells, only the first cell's, and every bar of the second opened an empty list)."""

from __future__ import annotations

import re

import duckdb
import pytest

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import transcripts

CELLS = {("s", "a"): 6, ("s", "b"): 3, ("t", "a"): 1}  # 10 games in three cells


def _listed(cap: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], str]:
    monkeypatch.setattr(transcripts, "MAX_INDEX_ROWS", cap)
    con = duckdb.connect()
    con.execute("create table fct_games (game_id varchar, study varchar, cell varchar, variant varchar, "
                "status varchar, winner varchar, valid boolean, invalid_reason varchar, tie_decided boolean, "
                "fallback_decided boolean, n_format_failures bigint, game_index bigint)")
    for (study, cell), n in CELLS.items():
        for i in range(n):
            con.execute("insert into fct_games values (?, ?, ?, 'mini-mafia', 'finished', 'town', true, null, "
                        "false, false, 0, ?)", [f"{study}.{cell}.{i}", study, cell, i])
    html = render_page(transcripts.build_index(Context(Marts(con), {})), nav=[])
    return re.findall(r'<td data-col="game">([^<]+)</td>', html), html


def test_a_capped_list_takes_every_cell_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, html = _listed(5, monkeypatch)
    # Turn 1: s.a.0, s.b.0, t.a.0; turn 2: s.a.1, s.b.1 (t.a has one game); listed by study, cell and index.
    assert ids == ["s.a.0", "s.a.1", "s.b.0", "s.b.1", "t.a.0"]
    assert "10 games: the list shows 5 of them" in html and "(3 cells listed)" in html
    # A figure's link filters the listed games only: the filter line says so.
    assert "(among the 5 games listed, not all 10: query the warehouse for the rest)" in html


def test_an_uncapped_list_is_every_game_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, html = _listed(10, monkeypatch)
    assert len(ids) == 10 and ids[:6] == [f"s.a.{i}" for i in range(6)] and "the list shows" not in html
    assert "games listed, not all" not in html
