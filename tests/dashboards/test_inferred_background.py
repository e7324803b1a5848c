"""A background whose models an importer inferred is labelled an inference from the record to the page: the Mini-Mafia
web game records only a session's label, and the importer reads the models from it (`design.background_inferred`).
`raw_games.background_inferred` keeps it, `fct_games` and `mart_capability_win_rates` carry it, and the capability
pages mark such a background `(inferred)` with a note saying what that means; a study whose backgrounds are recorded
gets neither."""

from __future__ import annotations

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import capabilities
from support.records import cell_records, design, landed, rows

MODELS = {"mafioso": "X", "detective": "Y", "villager": "Y"}


def _games(experiment: str, *, inferred: bool) -> list:
    cell = design("deceive|X|Y", "deceive", "X", "Y", experiment)
    if inferred:
        cell["background_inferred"] = True
    return cell_records(experiment, n=4, mafia_wins=1, models=MODELS, design=cell)


def test_an_inferred_background_is_labelled_from_the_record_to_the_page() -> None:
    con = landed([*_games("web", inferred=True), *_games("batch", inferred=False)],
                 only=["fct_games", "mart_capability_win_rates"])
    assert rows(con, "select experiment, bool_and(background_inferred) as inferred from raw_games "
                     "group by experiment order by experiment") == [
        {"experiment": "batch", "inferred": False}, {"experiment": "web", "inferred": True}]
    assert rows(con, "select study, bool_and(background_inferred) as inferred from fct_games "
                     "group by study order by study") == [
        {"study": "batch", "inferred": False}, {"study": "web", "inferred": True}]
    assert rows(con, "select study, background, background_inferred from mart_capability_win_rates "
                     "order by study") == [
        {"study": "batch", "background": "Y", "background_inferred": False},
        {"study": "web", "background": "Y", "background_inferred": True}]
    html = render_page(capabilities.build(Context(Marts(con), {}), capability="deceive"), nav=[])
    assert html.count("<td>Y (inferred)</td>") == 1  # the web study's row; the batch study's reads Y
    assert html.count("<td>Y</td>") == 1
    assert html.count('class="note inferred-background"') == 1


def test_recorded_backgrounds_get_no_note() -> None:
    con = landed(_games("batch", inferred=False), only=["mart_capability_win_rates"])
    html = render_page(capabilities.build(Context(Marts(con), {}), capability="deceive"), nav=[])
    assert "(inferred)" not in html
    assert "inferred-background" not in html
