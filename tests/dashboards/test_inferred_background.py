"""A background whose models an importer inferred is labelled an inference from the record to the page: the Mini-Mafia
web game records only a session's label, and the importer reads the models from it (`design.background_inferred`).
`raw_games.background_inferred` keeps it, `fct_games` and `mart_capability_win_rates` carry it, and the capability
pages mark such a background `(inferred)` with a note saying what that means; each background seat's
`raw_players.model_inferred` reaches `fct_player_games`, and the leaderboard and win-rate pages mark the model where
they name it. A study whose backgrounds are recorded gets neither."""

from __future__ import annotations

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import capabilities, leaderboard, win_rates
from support.records import cell_records, design, landed, rows

MODELS = {"mafioso": "X", "detective": "Y", "villager": "Y"}


def _games(experiment: str, *, inferred: bool) -> list:
    cell = design("deceive|X|Y", "deceive", "X", "Y", experiment)
    if inferred:  # as the web importer writes it: the players whose models it read from a label (Y's seats)
        cell.update(background_inferred=True, inferred_players=["Bob", "Charlie", "Diana"])
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


def test_an_inferred_seat_is_labelled_where_its_model_is_named() -> None:
    con = landed([*_games("web", inferred=True), *_games("batch", inferred=False)],
                 only=["fct_player_games", "mart_ratings", "mart_win_rates"])
    assert rows(con, "select study, role, model, bool_and(model_inferred) as inferred, "
                     "bool_or(model_inferred) as some from fct_player_games group by all order by all") == [
        {"study": "batch", "role": "detective", "model": "Y", "inferred": False, "some": False},
        {"study": "batch", "role": "mafioso", "model": "X", "inferred": False, "some": False},
        {"study": "batch", "role": "villager", "model": "Y", "inferred": False, "some": False},
        {"study": "web", "role": "detective", "model": "Y", "inferred": True, "some": True},
        {"study": "web", "role": "mafioso", "model": "X", "inferred": False, "some": False},  # the target's seat
        {"study": "web", "role": "villager", "model": "Y", "inferred": True, "some": True}]
    board = render_page(leaderboard.build(Context(Marts(con), {})), nav=[])
    ranked = {(r["study"], r["model"]) for r in rows(con, "select study, model from mart_ratings")}
    assert ("web", "Y") in ranked and ("batch", "Y") in ranked
    marked = board.count('<em class="inferred">(inferred)</em>')
    assert marked == len(rows(con, "select * from mart_ratings where study = 'web' and model = 'Y'")) > 0
    assert board.count('class="note inferred-models"') == 1
    assert "Y in web)" in board
    rates = render_page(win_rates.build(Context(Marts(con), {})), nav=[])
    assert "Y (inferred in some games)" in rates and "X (inferred" not in rates  # Y's batch seats are recorded
    web_only = landed(_games("web", inferred=True), only=["fct_player_games", "mart_win_rates"])
    rates = render_page(win_rates.build(Context(Marts(web_only), {})), nav=[])
    assert "Y (inferred)" in rates and "X (inferred" not in rates and "Y (inferred in some games)" not in rates
    assert rates.count('class="note inferred-models"') == 1


def test_recorded_backgrounds_get_no_note() -> None:
    con = landed(_games("batch", inferred=False), only=["mart_capability_win_rates"])
    html = render_page(capabilities.build(Context(Marts(con), {}), capability="deceive"), nav=[])
    assert "(inferred)" not in html
    assert "inferred-background" not in html
    con = landed(_games("batch", inferred=False), only=["mart_ratings", "mart_win_rates"])
    for page in (leaderboard, win_rates):
        html = render_page(page.build(Context(Marts(con), {})), nav=[])
        assert "(inferred" not in html and "inferred-models" not in html
