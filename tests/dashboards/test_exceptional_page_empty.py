"""The exceptional-games page when no game was flagged (bench_landing's million of policy games: no outcome, pattern
or failure as rare as the threshold): it says so once, with what "flagged" needed, not twice (the rules' table and the
games' table each said "No game was flagged."); with flags, both tables show."""

from __future__ import annotations

import duckdb

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import exceptional

COLUMNS = ("game_id varchar, variant varchar, study varchar, cell varchar, rule varchar, probability double, "
           "surprise double, reason varchar, transcript_path varchar, rank_in_study bigint, read_first boolean")


def _page(*flags: tuple[str, str, float]) -> str:
    con = duckdb.connect()
    con.execute(f"create table mart_exceptional_games ({COLUMNS})")
    for game_id, rule, p in flags:
        con.execute("insert into mart_exceptional_games values (?, 'mini-mafia', 's', 'c1', ?, ?, -ln(?), 'why', "
                    "null, 1, true)", [game_id, rule, p, p])
    return render_page(exceptional.build(Context(Marts(con), {"build_id": "b1"})), nav=[])


def test_no_flag_is_said_once_with_what_a_flag_needs() -> None:
    html = _page()
    assert html.count("No game was flagged") == 1
    assert "--upset-threshold" in html and 'class="exceptional"' not in html


def test_flags_show_the_rules_and_the_games() -> None:
    html = _page(("g1", "upset", 0.01), ("g2", "upset", 0.03))
    assert "No game was flagged" not in html and 'class="exceptional"' in html
    assert html.index("g1") < html.index("g2")  # the rarer first
