"""The index's game counts add up (issue 31 item 7): on an imported warehouse failed + unfinished + invalid + scored
made 23 of 20 games, because an invalid game was also counted failed or unfinished. Each game is now in exactly one
class. Warehouse: the Mini-Mafia fixtures (tests/fixtures/datasets: batch folders, some games invalid, and the
SQLite database, one game invalid) and the async ones (LLMafia and Dallinger: aborted games, both invalid and
unfinished, the overlap that was counted twice), imported and built as a user would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.pages.index import GAME_OUTCOME_COUNTS, outcome_counts_text
from mafiabench.importers import run_import
from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import connect

FIXTURES = Path(__file__).parents[1] / "fixtures" / "datasets"


def test_outcome_classes_add_up_to_the_games(tmp_path: Path) -> None:
    db = tmp_path / "round.db"
    sqlite3.connect(db).executescript((FIXTURES / "mini_mafia_sqlite" / "mini_mafia.sql").read_text())
    con = connect(tmp_path / "w.duckdb")
    try:
        run_import("mini-mafia", FIXTURES / "mini_mafia", con)
        run_import("mini-mafia-sqlite", db, con)
        run_import("llmafia", FIXTURES / "llmafia", con)
        run_import("dallinger", FIXTURES / "dallinger", con)
        build_warehouse(con, raise_on_failure=False)
        g = Marts(con).one(f"select count(*) as games, {GAME_OUTCOME_COUNTS} from fct_games")
        invalid = con.execute("select count(*) from fct_games where not valid").fetchone()[0]  # type: ignore[index]
        both = con.execute("select count(*) from fct_games where not valid "  # counted twice by the old page
                           "and status in ('failed', 'unfinished')").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert g["games"] == 21 and invalid >= 1 and both >= 1 and g["invalid"] == invalid
    assert g["scored"] + g["invalid"] + g["failed"] + g["unfinished"] == g["games"]
    assert outcome_counts_text(g).endswith(f"= {g['games']}")
