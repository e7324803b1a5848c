"""The Statements page (issue 39 item 4), rendered from a real build of the hand-built game with a known lie (no
browser): every bar and point of its figures links to a list of statements on the page, every listed statement to
its line of the game's transcript, and that line shows the message's labels beside it, model text escaped."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.publish import build_warehouse
from mafiabench.warehouse.raw import connect, load_records
from support import statement_games as hand

EVIL = "<script>alert('label')</script> & <b>bold</b>"


@pytest.mark.slow
def test_figures_link_to_their_statements_and_the_transcript_shows_the_labels(tmp_path: Path) -> None:
    rec = hand.play()
    statements = rec.statements or []
    statements[2]["labels"][1] = {**statements[2]["labels"][1], "reasoning": EVIL}  # as a model might write it
    rec = dataclasses.replace(rec, statements=statements)
    db, out = tmp_path / "w.duckdb", tmp_path / "dashboards"
    con = connect(db)
    load_records(con, [rec])
    build_warehouse(con)
    con.execute("checkpoint")
    con.close()
    assert main(["dashboards", "--warehouse", str(db), "--out", str(out)]) == 0
    page = (out / "statements.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'id="([^"]+)"', page))
    hrefs = set(re.findall(r'"href":\s*"([^"]+)"', page))  # each bar's and point's link, in the figures' data
    assert hrefs and all(h.startswith("#") and h[1:] in anchors for h in hrefs), (hrefs, anchors)
    c = hand.cast()
    assert "speaker-hand-scripted-hand-mafioso" in anchors and "listener-hand-scripted-hand-town" in anchors
    links = set(re.findall(r'href="(transcripts/[^"#]+)#e(\d+)"', page))
    seqs = {(s["seq"]) for s in statements}
    assert {int(seq) for _, seq in links} == seqs  # each statement listed, linked to its own line
    (path,) = {p for p, _ in links}
    transcript = (out / path).read_text(encoding="utf-8")
    for s in statements:
        line = re.search(rf'<li[^>]*id="e{s["seq"]}">(.*?)</li>', transcript, re.S)
        assert line, s["seq"]
        shown = html.unescape(re.sub(r"<[^>]+>", " ", line.group(1)))
        assert "self: " + ("deceptive" if s["speaker"] == c["mafioso"] else "not deceptive") in shown
        for lb in s["labels"][1:]:
            assert f"{lb['assessor']}: " in shown
    assert "<script>alert('label')" not in transcript and "&lt;script&gt;alert(" in transcript  # escaped
    assert "I am the detective." in page
