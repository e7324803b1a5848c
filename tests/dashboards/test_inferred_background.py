"""A background whose models an importer inferred is labelled an inference from the record to the page: the Mini-Mafia
web game records only a session's label, and the importer reads the models from it (`design.background_inferred`).
`raw_games.background_inferred` keeps it, `fct_games` and `mart_capability_win_rates` carry it, and the capability
pages mark such a background `(inferred)` with a note saying what that means; each background seat's
`raw_players.model_inferred` reaches `fct_player_games`, and the pages mark the model where they name it: the
leaderboard (ranking, charts, scatter table, head-to-head matrix) and win-rate page `(inferred)` or `(inferred in some
games)`, the games list and each game's page per seat. A study whose backgrounds are recorded gets neither, and a
warehouse built before the column reads as recorded."""

from __future__ import annotations

import itertools
import json
import re

import duckdb

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import Page, render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import capabilities, leaderboard, transcripts, win_rates
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
    ranking = board.split("<h2>Ranking</h2>", 1)[1].split("<h2>", 1)[0]
    marked = ranking.count('<em class="inferred">(inferred)</em>')
    assert marked == len(rows(con, "select * from mart_ratings where study = 'web' and model = 'Y'")) > 0
    assert board.count('class="note inferred-models"') == 1
    assert "Y in web)" in board
    rates = render_page(win_rates.build(Context(Marts(con), {})), nav=[])
    assert "Y (inferred in some games)" in rates and "X (inferred" not in rates  # Y's batch seats are recorded
    web_only = landed(_games("web", inferred=True), only=["fct_player_games", "mart_win_rates"])
    rates = render_page(win_rates.build(Context(Marts(web_only), {})), nav=[])
    assert "Y (inferred)" in rates and "X (inferred" not in rates and "Y (inferred in some games)" not in rates
    assert rates.count('class="note inferred-models"') == 1


def _recorded_pages(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The leaderboard, win-rate page, games list and a game's page of a warehouse, rendered (charts included)."""
    m = Marts(con)
    games = [g["game_id"] for g in rows(con, "select game_id from fct_games order by game_id limit 1")]
    built = [leaderboard.build(Context(m, {})), win_rates.build(Context(m, {})),
             transcripts.build_index(Context(m, {})), *transcripts.transcript_pages(m, games, rendered={})]
    return [render_page(page, nav=[]) for page in built]


def test_recorded_backgrounds_get_no_note() -> None:
    con = landed(_games("batch", inferred=False), only=["mart_capability_win_rates"])
    html = render_page(capabilities.build(Context(Marts(con), {}), capability="deceive"), nav=[])
    assert "(inferred)" not in html
    assert "inferred-background" not in html
    con = landed(_games("batch", inferred=False), only=["fct_games", "mart_ratings", "mart_win_rates",
                                                        "mart_transcript_events"])
    for html in _recorded_pages(con):
        assert "(inferred" not in html and "inferred-models" not in html


def test_a_warehouse_built_before_the_column_marks_nothing() -> None:
    """A warehouse whose `fct_player_games` has no `model_inferred` (built before it existed) renders as before."""
    con = landed(_games("web", inferred=True), only=["fct_games", "fct_player_games", "mart_ratings",
                                                     "mart_win_rates", "mart_transcript_events"])
    con.execute("create or replace table fct_player_games as select * exclude (model_inferred) from fct_player_games")
    for html in _recorded_pages(con):
        assert "(inferred" not in html and "inferred-models" not in html


def _three_models() -> list:
    """A web study of X, Y and Z in every pairing (mafioso against a town of one model): Y's seats are all inferred,
    X's in its games against Y only (there the importer inferred every seat), Z's never."""
    out = []
    for i, (mafia, town) in enumerate(itertools.permutations("XYZ", 2)):
        cell = design(f"web|{mafia}|{town}", "deceive", mafia, town, "web")
        seats = {"Alice": mafia, "Bob": town, "Charlie": town, "Diana": town}
        cell.update(background_inferred=True, inferred_players=[
            n for n, model in seats.items() if model == "Y" or (mafia, town) == ("X", "Y")])
        out += cell_records(f"web-{mafia}{town}", n=10, mafia_wins=3 + i % 4, design=cell,
                            models={"mafioso": mafia, "detective": town, "villager": town})
    return out


def _chart_models(page: Page, key: str) -> set[str]:
    return {r["model"] for block in page.charts if block.key == key for r in block.spec["datasets"]["rows"]}


def test_the_leaderboard_marks_an_inferred_model_in_its_charts_tables_and_matrix() -> None:
    """Every place the leaderboard names Y (all of its seats inferred) says `(inferred)`, X (inferred in its games
    against Y only) `(inferred in some games)`, and Z (recorded) neither: the ratings and deceiver-against-detector
    charts (the name is their data: axis and tooltip), the ranking and scatter tables and the head-to-head matrix's
    row and column heads. Links and the filters behind them keep the model itself."""
    con = landed(_three_models(), only=["fct_player_games", "mart_ratings", "mart_head_to_head"])
    assert rows(con, "select model, bool_and(model_inferred) as every, bool_or(model_inferred) as some "
                     "from fct_player_games group by all order by all") == [
        {"model": "X", "every": False, "some": True}, {"model": "Y", "every": True, "some": True},
        {"model": "Z", "every": False, "some": False}]
    page = leaderboard.build(Context(Marts(con), {}))
    named = {"X (inferred in some games)", "Y (inferred)", "Z"}
    assert _chart_models(page, "ratings") == named and _chart_models(page, "scatter") == named
    board = render_page(page, nav=[])
    marks = {"X": ' <em class="inferred">(inferred in some games)</em>', "Y": ' <em class="inferred">(inferred)</em>',
             "Z": ""}
    ranking = board.split("<h2>Ranking</h2>", 1)[1].split("<h2>", 1)[0]
    for model, mark in marks.items():
        n = len(rows(con, "select * from mart_ratings where model = ?", [model]))
        link = f'<a href="transcripts/index.html#study=web&amp;model={model}" class="games-link">{model}</a>'
        assert ranking.count(f"{link}{mark}</td>") == n > 0, model
    scatter = board.split("<h2>Deceiver against detector</h2>", 1)[1].split("<h2>", 1)[0]
    matrix = board.split("<h2>Head to head</h2>", 1)[1].split("<h2>", 1)[0]
    for model, mark in marks.items():
        assert scatter.count(f"<td>{model}{mark}</td>") == 1, model
        assert matrix.count(f"<th>{model}{mark}</th>") == 2, model  # its row's head and its column's
    assert 'href="transcripts/index.html#study=web&amp;bar=h2h%7CX%7CY"' in matrix
    assert board.count('class="note inferred-models"') == 1
    assert "X in web; Y in web)" in board


def test_the_games_list_and_a_game_page_mark_each_inferred_seat() -> None:
    """The games list names each game's models by role: a seat whose model was inferred reads `Y (inferred)`, a
    recorded one `X`; a role whose two seats share a model, one inferred and one recorded, names it once each way.
    The filters' data keep the model itself. A game's page marks the same seats."""
    mixed = design("deceive|X|Y", "deceive", "X", "Y", "web")
    mixed.update(background_inferred=True, inferred_players=["Bob", "Charlie"])  # Diana, a villager, recorded
    evil = "<b>Y</b>"
    odd = design("deceive|X|evil", "deceive", "X", evil, "web")
    odd.update(background_inferred=True, inferred_players=["Bob", "Charlie", "Diana"])
    con = landed([*_games("web", inferred=True), *_games("batch", inferred=False),
                  *cell_records("mixed", n=1, mafia_wins=0, models=MODELS, design=mixed),
                  *cell_records("odd", n=1, mafia_wins=0, models={**MODELS, "detective": evil, "villager": evil},
                                design=odd)],
                 only=["fct_games", "fct_player_games", "mart_transcript_events"])
    m = Marts(con)
    html = render_page(transcripts.build_index(Context(m, {})), nav=[])
    listed = dict(re.findall(r'<td data-col="game">(?:<a [^>]*>)?([^<]+)(?:</a>)?</td>.*?'
                             r'<td data-col="models">(.*?)</td>', html, flags=re.S))
    mark = ' <em class="inferred">(inferred)</em>'
    web = ('<span class="role-models" data-role="detective">detective: Y{0}</span><br>'
           '<span class="role-models" data-role="mafioso">mafioso: X</span><br>'
           '<span class="role-models" data-role="villager">villager: Y{0}</span>')
    assert {listed[f"web-{i}"] for i in range(4)} == {web.format(mark)}
    assert {listed[f"batch-{i}"] for i in range(4)} == {web.format("")}
    assert listed["mixed-0"].endswith(f"villager: Y, Y{mark}</span>")
    assert f"detective: &lt;b&gt;Y&lt;/b&gt;{mark}</span>" in listed["odd-0"] and "<b>Y" not in html
    metas = [json.loads(t) for t in re.findall(r'<script type="application/json" class="game-meta">(.*?)</script>',
                                                html, flags=re.S)]
    assert {json.dumps(meta["roles"]["villager"]) for meta in metas} == {'["Y"]', json.dumps([evil])}
    assert all("inferred" not in model for meta in metas for model in meta["models"])
    assert html.count('class="note inferred-models"') == 1
    (web_game, mixed_game, batch_game) = (render_page(p, nav=[]) for p in transcripts.transcript_pages(
        m, ["web-0", "mixed-0", "batch-0"], rendered={}))
    assert web_game.count(f"<td>Y{mark}</td>") == 3 and web_game.count("<td>X</td>") == 1
    assert mixed_game.count(f"<td>Y{mark}</td>") == 2 and mixed_game.count("<td>Y</td>") == 1
    assert 'title="detective · Y (inferred) · seat' in web_game and 'title="mafioso · X · seat' in web_game
    assert web_game.count('class="note inferred-models"') == 1
    assert "(inferred" not in batch_game and "inferred-models" not in batch_game
