"""The index's game counts add up (issue 31 item 7): on an imported warehouse failed + unfinished + invalid + scored
made 23 of 20 games, because an invalid game was also counted failed or unfinished. Each game is now in exactly one
class. Warehouse: the Mini-Mafia fixtures (tests/fixtures/datasets: batch folders, some games invalid, and the
SQLite database, one game invalid) and the async ones (LLMafia and Dallinger: aborted games, both invalid and
unfinished, the overlap that was counted twice), imported and built as a user would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.pages.index import GAME_OUTCOME_COUNTS, outcome_counts_text
from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import connect


def test_outcome_classes_add_up_to_the_games(tmp_path: Path, import_fixtures: Callable[..., None]) -> None:
    con = connect(tmp_path / "w.duckdb")
    try:
        import_fixtures(con, "mini-mafia", "mini-mafia-sqlite", "llmafia", "dallinger")
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
