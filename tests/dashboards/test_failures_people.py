"""A person's format failures are the interface's reading of what they typed, not a model's failure to follow a
format: the Mini-Mafia web game reads a person's message not in quotes as a silence, which lands as a format failure
of the model `human` (`mart_format_failures`). The failures page marks a person's rows `(a person: the interface's
reading)`, in its table and in its chart's data, and says why in its `people-failures` note, whether or not the
person failed; a model's rows are not so marked, and a page without a person has neither."""

from __future__ import annotations

import re

from markupsafe import escape

from mafiabench.dashboards.data import PERSON_FORMAT_MARK, Marts
from mafiabench.dashboards.html import render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import failures
from support.records import cell_records, design, landed, rows

PERSON_MARK = f' <em class="person">({escape(PERSON_FORMAT_MARK)})</em>'


def _games(mafioso: str, *, silent: bool) -> list:
    """A person or a model (`mafioso`) as the mafioso against the model Y, the mafioso's first message read as a
    silence (a format failure) when `silent`."""
    cell = design(f"deceive|{mafioso}|Y", "deceive", mafioso, "Y", "web")
    messages = [("Alice", None if silent else "I trust Bob"), ("Bob", "Alice is the mafioso")]
    return cell_records(f"web-{mafioso}", n=3, mafia_wins=1, design=cell, messages=messages,
                        models={"mafioso": mafioso, "detective": "Y", "villager": "Y"})


def _format_rows(html: str) -> dict[str, str]:
    """Each format-failure row's model cell by its role and action."""
    table = html.split("<h2>Format failures</h2>", 1)[1].split("<h2>", 1)[0]
    return {f"{role} {action}": model for model, role, action in re.findall(
        r"<tr><td>[^<]*</td><td>(.*?)</td><td>([^<]*)</td><td>([^<]*)</td>", table)}


def test_a_persons_rows_are_marked_as_the_interfaces_reading() -> None:
    con = landed(_games("human", silent=True), only=["mart_format_failures"])
    assert rows(con, "select model, role, action, n_format_failures from mart_format_failures "
                     "where n_format_failures > 0") == [
        {"model": "human", "role": "mafioso", "action": "message", "n_format_failures": 3}]
    page = failures.build(Context(Marts(con), {}))
    labels = {r["model_label"] for block in page.charts if block.key == "format"
              for r in block.spec["datasets"]["rows"]}
    assert labels == {"human (a person: the interface's reading)", "Y"}
    html = render_page(page, nav=[])
    shown = _format_rows(html)
    assert {shown["mafioso message"], shown["mafioso vote"]} == {f"human{PERSON_MARK}"}
    assert {shown["detective message"], shown["villager vote"]} == {"Y"}
    assert html.count('class="note people-failures"') == 1
    assert "transcripts/index.html#mafioso=human&amp;flag=format%20failure" in html  # the link: the model itself


def test_a_person_who_never_failed_is_marked_and_noted_too() -> None:
    """The mark and the note say what a person's row measures, failed or not: a zero is the interface's reading
    too."""
    html = render_page(failures.build(Context(Marts(landed(_games("human", silent=False),
                                                           only=["mart_format_failures"])), {})), nav=[])
    assert _format_rows(html)["mafioso message"] == f"human{PERSON_MARK}"
    assert html.count('class="note people-failures"') == 1


def test_models_alone_get_no_persons_mark_or_note() -> None:
    html = render_page(failures.build(Context(Marts(landed(_games("X", silent=True),
                                                           only=["mart_format_failures"])), {})), nav=[])
    assert _format_rows(html)["mafioso message"] == "X"
    assert "a person" not in html and "people-failures" not in html
