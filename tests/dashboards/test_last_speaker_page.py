"""The last-speaker table on the Biases page shows both contrasts (issue 35 item 5): ours (the last speaker against
the role's other players) and the Mini-Mafia paper's (against all games, last speakers included), captioned so."""

from __future__ import annotations

from pathlib import Path

from mafiabench.cli import main
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
    # hand-computed for the mafioso's spoke-last row: ours 3/5 - 1/4 = 35.0% ± sqrt(0.04 + 0.0375) = 27.8%; the
    # paper's 3/5 - 3/7 = 17.1% ± (2/5) 27.8% = 11.1%
    assert "<td class=num>35.0% ± 27.8%</td><td class=num>17.1% ± 11.1%</td>" in page
    # Mini-Mafia's final discussion holds one player of each role: of its rows only role all's hold several players
    # a game (the two who did not speak last), and only its rows stand in the table set by game (the classic
    # villagers are checked on the offline Strategema study, tests/dashboards/test_strategema.py).
    unit = page.split('<table class="last-speaker-unit', 1)[1].split("</table>", 1)[0]
    body = unit.split("<tbody>", 1)[1]
    assert body.count("<tr>") == 2 and body.count("<td>all</td>") == 2, body
