"""The last-speaker table on the Biases page shows both contrasts (issue 35 item 5): ours (the last speaker against
the role's other players) and the Mini-Mafia paper's (against all games, last speakers included), captioned so."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.dashboards.pages.bias import wider
from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import connect, load_records
from support.records import MAFIA_WIN_VOTES, TOWN_WIN_VOTES, mini_record

LAST = [("Bob", "a"), ("Charlie", "b"), ("Alice", "c")]
FIRST = [("Alice", "a"), ("Charlie", "b"), ("Bob", "c")]


def test_both_contrasts_are_shown_and_captioned(tmp_path: Path) -> None:
    # Alice (mafioso) speaks last in 3 games and wins 2, not last in 2 games and wins 0
    records = [mini_record(f"last{i}", votes=MAFIA_WIN_VOTES if won else TOWN_WIN_VOTES, messages=LAST)
               for i, won in enumerate([True, True, False])]
    records += [mini_record(f"first{i}", votes=TOWN_WIN_VOTES, messages=FIRST) for i in range(2)]
    db, out = tmp_path / "w.duckdb", tmp_path / "dashboards"
    con = connect(db)
    load_records(con, records)
    assert build_warehouse(con).published
    con.close()
    assert main(["dashboards", "--warehouse", str(db), "--out", str(out)]) == 0
    page = (out / "biases.html").read_text(encoding="utf-8")
    assert "advantage vs the others ± sd (ours)" in page and "advantage vs all games ± sd (the paper&#39;s)" in page
    assert "is the Mini-Mafia paper's published contrast" in page
    # hand-computed for the mafioso's spoke-last row: ours 3/5 - 1/4 = 35.0% ± the wider of the players' sd,
    # sqrt(0.04 + 0.0375) = 27.8%, and the game's, sqrt(5/4 * (6/9) / 3^2) = 30.4% (test_last_speaker_by_game.py);
    # the paper's 3/5 - 3/7 = 17.1% ± (2/5) 27.8% = 11.1%, the players' as the paper counts
    assert "<td class=num>35.0% ± 30.4%</td><td class=num>17.1% ± 11.1%</td>" in page
    # Mini-Mafia's final discussion holds one player of each role: of its rows only role all's hold several players
    # a game (the two who did not speak last), and only its rows stand in the table set by game (the classic
    # villagers are checked on the offline Strategema study, tests/dashboards/test_strategema.py).
    unit = page.split('<table class="last-speaker-unit', 1)[1].split("</table>", 1)[0]
    body = unit.split("<tbody>", 1)[1]
    assert body.count("<tr>") == 2 and body.count("<td>all</td>") == 2, body


@pytest.mark.parametrize(("players", "by_game", "shown"), [
    (0.278, 0.304, 0.304),   # several players a game, or a few games: the game's
    (0.030, 0.0, 0.030),     # every game went one way: the cluster-robust sd is 0, the Beta sd is not
    (0.026, None, 0.026),    # a warehouse built before the by-game columns
    (None, None, None),      # no contrast (the role never or always spoke last)
])
def test_our_contrast_shows_the_wider_sd(players: float | None, by_game: float | None, shown: float | None) -> None:
    assert wider(players, by_game) == shown
