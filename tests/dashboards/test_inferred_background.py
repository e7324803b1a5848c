"""A background whose models an importer inferred is labelled an inference from the record to the page: the Mini-Mafia
web game records only a session's label, and the importer reads the models from it (`design.background_inferred`).
`raw_games.background_inferred` keeps it, `fct_games` and `mart_capability_win_rates` carry it, and the capability
pages mark such a background `(inferred)` with a note saying what that means; each background seat's
`raw_players.model_inferred` reaches `fct_player_games`, and the pages mark the model where they name it: the
leaderboard (ranking, charts, scatter table, head-to-head matrix), win-rate, failures and scores pages `(inferred)` or
`(inferred in some games)`, the games list and each game's page per seat. A cell's label names its models, so the
win-rate, exceptional-games and failures pages mark one whose games' background was inferred `(background inferred)`,
and the scores page a not-fitted reason's inferred models. A study whose backgrounds are recorded gets none of it,
and a warehouse built before the columns reads as recorded."""

from __future__ import annotations

import itertools
import json
import re

import duckdb
import pytest

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import Page, render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import capabilities, exceptional, failures, leaderboard, scores, transcripts, win_rates
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
    """The leaderboard, win-rate, failures, scores and exceptional-games pages, the games list and a game's page of a
    warehouse, rendered (charts included)."""
    m = Marts(con)
    games = [g["game_id"] for g in rows(con, "select game_id from fct_games order by game_id limit 1")]
    built = [leaderboard.build(Context(m, {})), win_rates.build(Context(m, {})), failures.build(Context(m, {})),
             scores.build(Context(m, {})), exceptional.build(Context(m, {})),
             transcripts.build_index(Context(m, {})), *transcripts.transcript_pages(m, games, rendered={})]
    return [render_page(page, nav=[]) for page in built]


RECORDED_MARTS = ["fct_games", "mart_ratings", "mart_win_rates", "mart_transcript_events", "mart_format_failures",
                  "mart_reasoning_failures", "mart_latent_fit"]


def _flag_every_game(con: duckdb.DuckDBPyConnection) -> None:
    """A `mart_exceptional_games` flagging every game (what flags a game does not matter here: its cell does)."""
    con.execute("create or replace table mart_exceptional_games as select game_id, variant, study, cell, "
                "'upset' as rule, 0.01 as probability, 4.6 as surprise, 'why' as reason, null as transcript_path, "
                "1 as rank_in_study, true as read_first from fct_games")


def _unmarked(html: str) -> bool:
    return not any(word in html for word in ("(inferred", "background inferred", "inferred-models", "inferred-cells"))


def test_recorded_backgrounds_get_no_note() -> None:
    con = landed(_games("batch", inferred=False), only=["mart_capability_win_rates"])
    html = render_page(capabilities.build(Context(Marts(con), {}), capability="deceive"), nav=[])
    assert "(inferred)" not in html
    assert "inferred-background" not in html
    con = landed(_games("batch", inferred=False), only=RECORDED_MARTS)
    _flag_every_game(con)
    for html in _recorded_pages(con):
        assert _unmarked(html)


def test_a_warehouse_built_before_the_column_marks_nothing() -> None:
    """A warehouse whose `fct_player_games` has no `model_inferred` and whose `fct_games` has no
    `background_inferred` (built before they existed) renders as before."""
    con = landed(_games("web", inferred=True), only=[*RECORDED_MARTS, "fct_player_games"])
    _flag_every_game(con)
    assert _recorded_pages(con)[-2].count("(inferred)") > 0  # the games list marks while the columns are there
    con.execute("create or replace table fct_player_games as select * exclude (model_inferred) from fct_player_games")
    con.execute("create or replace table fct_games as select * exclude (background_inferred) from fct_games")
    for html in _recorded_pages(con):
        assert _unmarked(html)


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


# How a page marks each of `_three_models`' models after its name: Y every seat inferred, X some, Z none.
MARKS = {"X": ' <em class="inferred">(inferred in some games)</em>', "Y": ' <em class="inferred">(inferred)</em>',
         "Z": ""}


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
    ranking = board.split("<h2>Ranking</h2>", 1)[1].split("<h2>", 1)[0]
    for model, mark in MARKS.items():
        n = len(rows(con, "select * from mart_ratings where model = ?", [model]))
        link = f'<a href="transcripts/index.html#study=web&amp;model={model}" class="games-link">{model}</a>'
        assert ranking.count(f"{link}{mark}</td>") == n > 0, model
    scatter = board.split("<h2>Deceiver against detector</h2>", 1)[1].split("<h2>", 1)[0]
    matrix = board.split("<h2>Head to head</h2>", 1)[1].split("<h2>", 1)[0]
    for model, mark in MARKS.items():
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


def _chart_rows(page: Page, key: str) -> list[dict]:
    return [r for block in page.charts if block.key == key for r in block.spec["datasets"]["rows"]]


def test_the_failures_page_marks_an_inferred_model_in_its_charts_and_tables() -> None:
    """The failures page names a model per variant in its reasoning- and format-failure charts (the label is their
    data) and tables: Y, all of whose seats were inferred, `(inferred)`; X, inferred in its games against Y only,
    `(inferred in some games)`; Z, recorded, neither. The rows' links filter by the model itself."""
    con = landed(_three_models(), only=["fct_player_games", "mart_reasoning_failures", "mart_format_failures"])
    page = failures.build(Context(Marts(con), {}))
    named = {"X (inferred in some games)", "Y (inferred)", "Z"}
    for key in ("reasoning", "format"):
        assert {r["model_label"] for r in _chart_rows(page, key)} == named, key
        assert {r["link"].split("=", 1)[1].split("&", 1)[0] for r in _chart_rows(page, key)} == {"X", "Y", "Z"}
    html = render_page(page, nav=[])
    reasoning = html.split("<h2>Reasoning failures</h2>", 1)[1].split("<h2>", 1)[0]
    formats = html.split("<h2>Format failures</h2>", 1)[1].split("<h2>", 1)[0]
    for model, mark in MARKS.items():
        assert reasoning.count(f"<td>{model}{mark}</td>") == 1, model  # Level 1: the detective
        n = len(rows(con, "select * from mart_format_failures where model = ?", [model]))
        assert formats.count(f"<td>{model}{mark}</td>") == n > 0, model
    assert html.count('class="note inferred-models"') == 1
    assert "people-failures" not in html and "a person" not in html


def _cells() -> list:
    """Cells of a person (H) against models: `web|H|Y` (study web) and `<i>odd</i>|H|Y` (study odd) with every
    game's background inferred, `rec|H|Z` (study batch) recorded, and `mix|H|Y` inferred in its web2 games and
    recorded in its batch2 games (one variant)."""
    def cell(name: str, study: str, *, inferred: bool, n: int = 4) -> list:
        spec = design(name, "deceive", "H", "Y" if "Z" not in name else "Z", study)
        if inferred:
            spec.update(background_inferred=True, inferred_players=["Bob", "Charlie", "Diana"])
        town = "Z" if "Z" in name else "Y"
        return cell_records(f"{study}-{len(name)}", n=n, mafia_wins=1, design=spec, fallback_voters=["Bob"],
                            models={"mafioso": "H", "detective": town, "villager": town})
    return [*cell("web|H|Y", "web", inferred=True), *cell("<i>odd</i>|H|Y", "odd", inferred=True),
            *cell("rec|H|Z", "batch", inferred=False), *cell("mix|H|Y", "web2", inferred=True, n=2),
            *cell("mix|H|Y", "batch2", inferred=False, n=2)]


def test_a_cell_whose_background_was_inferred_is_marked_where_its_label_is_shown() -> None:
    """A cell's label names its models: the win-rate page (per variant: its `cell` grouping), the failures page's
    random-fallback chart (per variant) and the exceptional-games page (per study: chart and table) mark it
    `(background inferred)` when every game's background was inferred (`fct_games.background_inferred`),
    `(background inferred in some games)` when some were, and a recorded cell not at all; each with the
    `inferred-cells` note. Links keep the cell itself, and a cell's text stays escaped."""
    con = landed(_cells(), only=["fct_games", "fct_player_games", "mart_win_rates"])
    assert rows(con, "select study, cell, bool_and(background_inferred) as every from fct_games group by all "
                     "order by all") == [
        {"study": "batch", "cell": "rec|H|Z", "every": False}, {"study": "batch2", "cell": "mix|H|Y", "every": False},
        {"study": "odd", "cell": "<i>odd</i>|H|Y", "every": True}, {"study": "web", "cell": "web|H|Y", "every": True},
        {"study": "web2", "cell": "mix|H|Y", "every": True}]
    _flag_every_game(con)
    m = Marts(con)
    by_variant = {"web|H|Y (background inferred)", "<i>odd</i>|H|Y (background inferred)", "rec|H|Z",
                  "mix|H|Y (background inferred in some games)"}
    page = win_rates.build(Context(m, {}))
    assert {r["value"] for r in _chart_rows(page, "win-rates") if r["dimension"] == "cell"} == by_variant
    html = render_page(page, nav=[])
    assert html.count('class="note inferred-cells"') == 1 and "<i>odd" not in html
    page = failures.build(Context(m, {}))
    assert {r["value"] for r in _chart_rows(page, "fallback")} == by_variant
    assert render_page(page, nav=[]).count('class="note inferred-cells"') == 1
    page = exceptional.build(Context(m, {}))
    assert {(r["study"], r["cell"]) for r in _chart_rows(page, "flagged")} == {
        ("web", "web|H|Y (background inferred)"), ("odd", "<i>odd</i>|H|Y (background inferred)"),
        ("batch", "rec|H|Z"), ("web2", "mix|H|Y (background inferred)"), ("batch2", "mix|H|Y")}
    assert {r["link"] for r in _chart_rows(page, "flagged") if r["study"] == "web"} == {
        "transcripts/index.html#study=web&cell=web%7CH%7CY&rule=upset"}
    html = render_page(page, nav=[])
    mark = ' <em class="inferred">(background inferred)</em>'
    table = html.split('class="exceptional"', 1)[1]
    assert table.count(f"<td>web|H|Y{mark}</td>") == 4 and table.count(f"<td>mix|H|Y{mark}</td>") == 2
    assert table.count("<td>rec|H|Z</td>") == 4 and table.count("<td>mix|H|Y</td>") == 2
    assert table.count(f"<td>&lt;i&gt;odd&lt;/i&gt;|H|Y{mark}</td>") == 4 and "<i>odd" not in html
    assert html.count('class="note inferred-cells"') == 1


def test_a_not_fitted_reason_marks_the_inferred_models_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scores page's "not fitted: one model in every role (mafioso X, detective Y, villager Y)" marks the models
    an importer inferred in that study (`(inferred)`), not the recorded ones nor another study's. (The NUTS fit says
    why it was not fitted, and samples nothing for such a study.)"""
    monkeypatch.setenv("MAFIABENCH_LATENT_METHOD", "nuts")
    con = landed([*_games("web", inferred=True), *_games("batch", inferred=False)],
                 only=["fct_player_games", "mart_latent_fit"])
    html = render_page(scores.build(Context(Marts(con), {})), nav=[])
    assert ("not fitted: one model in every role (mafioso X, detective Y (inferred), villager Y (inferred)): nothing "
            "to compare; the mafia won 1 of 4 games") in html
    assert "not fitted: one model in every role (mafioso X, detective Y, villager Y): nothing" in html  # batch
    assert html.count('class="note inferred-models"') == 1
    reason = "one model in every role (mafioso human, detective openai/gpt-4o-mini, villager openai/gpt-4o): x"
    assert scores.mark_reason(reason, {"openai/gpt-4o": "inferred"}) == reason.replace(
        "villager openai/gpt-4o)", "villager openai/gpt-4o (inferred))")
    assert scores.mark_reason(reason, {"openai/gpt-4o-mini": "inferred in some games", "human": "inferred"}) == (
        "one model in every role (mafioso human (inferred), detective openai/gpt-4o-mini (inferred in some games), "
        "villager openai/gpt-4o): x")


def test_the_directions_a_fit_does_not_set_mark_the_inferred_models_they_weigh() -> None:
    """The leaderboard's note on a fit's unidentified directions ("the games do not set overall: +0.41 X -0.41 Y")
    names models by their weights: one an importer inferred in that study is marked there too, a recorded one (X
    here, another study's Y) is not."""
    con = landed([*_games("web", inferred=True), *_games("batch", inferred=False)],
                 only=["fct_player_games", "mart_ratings", "mart_rating_fit"])
    assert rows(con, "select study, unidentified_directions from mart_rating_fit where unidentified > 0 "
                     "order by study") == [
        {"study": "batch", "unidentified_directions": "overall: +0.41 X -0.41 Y; h: -0.82"},
        {"study": "web", "unidentified_directions": "overall: +0.41 X -0.41 Y; h: -0.82"}]
    html = render_page(leaderboard.build(Context(Marts(con), {})), nav=[])
    notes = re.findall(r"the games do not set ([^<]*); ratings along them", html)
    assert sorted(notes) == ["overall: +0.41 X -0.41 Y (inferred); h: -0.82", "overall: +0.41 X -0.41 Y; h: -0.82"]


def test_the_scores_page_marks_an_inferred_model_in_its_charts_and_tables() -> None:
    """The scores page names a model per study in its bottom-up and latent charts (as data) and tables: Y
    `(inferred)`, X `(inferred in some games)`, Z neither, with the note."""
    con = landed(_three_models(), only=["fct_player_games", "mart_capability_scores", "mart_latent_abilities"])
    page = scores.build(Context(Marts(con), {}))
    named = {"X (inferred in some games)", "Y (inferred)", "Z"}
    assert {r["target_model"] for r in _chart_rows(page, "bottom-up")} == named
    assert {r["model"] for r in _chart_rows(page, "top-down")} == named
    html = render_page(page, nav=[])
    bottom_up = html.split("<h2>Bottom-up scores</h2>", 1)[1].split("<h2>", 1)[0]
    latent = html.split("<h2>Top-down latent ability model</h2>", 1)[1].split("<h3>", 1)[0]
    for model, mark in MARKS.items():
        assert bottom_up.count(f"<td>{model}{mark}</td>") == 1, model
        assert latent.count(f"<td>{model}{mark}</td>") == 3, model  # deceive, disclose, detect
    assert html.count('class="note inferred-models"') == 1
