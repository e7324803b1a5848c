"""The Leaderboard page from the ratings' marts (no browser): no row with 0 games or a rating the prior sets carries
a rank; each study's fit, dispersion, held-out scores beside the baselines and calibration plot are on the page; the
head-to-head cells carry their interval and the random-play rate; the scatter's figures are in a table."""

from __future__ import annotations

import re

import numpy as np
from scipy import special

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import leaderboard
from mafiabench.transform.models.ratings import rating_tables
from support.rating_warehouse import warehouse


def _games() -> list[dict]:
    """Mini-Mafia games of four models in random roles, plus policy/informed only ever as detective (no mafia
    games) and policy/once, who played one game (its ratings are the prior's)."""
    rng = np.random.default_rng(3)
    names = ["m1", "m2", "m3", "m4"]
    games = []
    for g in range(600):
        i, j, k = rng.choice(4, 3, replace=False)
        detective = "policy/informed" if g % 5 == 0 else names[j]
        games.append({"study": "mm", "id": f"g{g:04d}", "mafia": [("mafioso", names[i])],
                      "town": [("detective", detective), ("villager", names[k]), ("villager", names[k])],
                      "mafia_won": bool(rng.random() < special.expit(0.3 * i - 0.2 * k))})
    games.append({"study": "mm", "id": "once", "mafia": [("mafioso", "policy/once")],
                  "town": [("detective", "m1"), ("villager", "m2"), ("villager", "m2")], "mafia_won": True})
    for g in range(30):  # a pure head-to-head cell: m1 holds the mafia seat, m2 every town seat
        games.append({"study": "mm", "id": f"h{g:03d}", "mafia": [("mafioso", "m1")],
                      "town": [("detective", "m2"), ("villager", "m2"), ("villager", "m2")], "mafia_won": g % 3 > 0})
    return games


def _page() -> tuple[str, list[dict]]:
    con = warehouse(_games(), variant="mini-mafia")
    for name, frame in rating_tables(con).items():
        con.register(f"{name}_frame", frame.to_arrow())
        con.execute(f"create table {name} as select * from {name}_frame")
    page = leaderboard.build(Context(Marts(con), {}))
    rows = con.sql("select * from mart_ratings").pl().to_dicts()
    return render_page(page, nav=[]), rows


def _ranking_rows(html: str) -> list[list[str]]:
    """The cells (as text) of the ranking table's rows."""
    section = html.split("<h2>Ranking</h2>", 1)[1].split("<h2>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section, flags=re.S)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, flags=re.S)]
            for r in rows if "<td" in r]


def test_no_row_with_no_games_or_a_prior_set_rating_carries_a_rank() -> None:
    html, rows = _page()
    informed_mafia = next(r for r in rows if r["model"] == "policy/informed" and r["side"] == "mafia")
    assert informed_mafia["n_games"] == 0 and informed_mafia["rank"] is None
    once = [r for r in rows if r["model"] == "policy/once"]
    assert once and all(r["rank"] is None for r in once), once
    unrated = {(r["side"], r["model"]) for r in rows if r["n_games"] == 0 or r["data_share"] < 0.5}
    assert unrated and all(not r["rated"] for r in rows if (r["side"], r["model"]) in unrated)
    table = _ranking_rows(html)
    assert len(table) == len(rows)
    for cells in table:
        _study, side, rank, rank_range, model, *_ = cells
        games = int(cells[9].replace(",", ""))
        if games == 0 or (side, model) in unrated:
            assert rank == "not rated" and not re.fullmatch(r"\d+–\d+", rank_range), cells
        else:
            assert rank.isdigit(), cells
        # No games there: no rating and no interval, not "0.00" and "0.00 to 0.00"; a rating elsewhere.
        assert (cells[5:7] == ["–", "–"]) == (games == 0), cells
    assert "no games as mafia" in html and "mostly prior" in html


def test_the_page_shows_fit_prediction_calibration_and_head_to_head() -> None:
    html, _ = _page()
    fit = html.split("<h2>Fit and prediction</h2>", 1)[1].split("<h3>Calibration</h3>", 1)[0]
    for fit_name in ("overall", "sides", "roles"):
        assert f"<td>{fit_name}</td>" in fit
    assert "latent" in fit and "dispersion" in fit
    assert "chart-calibration" in re.findall(r'id="([^"]+)"', html)
    h2h = html.split("<h2>Head to head</h2>", 1)[1]
    assert "random play: mafia wins 66.7%" in h2h
    assert re.search(r'title="mafia win rate 66\.7% \(95% [\d.]+% to [\d.]+%\); random play 66\.7%"', h2h)
    assert ">20/30<" in h2h
    scatter = html.split("<h2>Deceiver against detector</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<td>m1</td>" in scatter


def test_the_zero_the_page_names_is_the_mean_of_the_models_that_played_there() -> None:
    """The strengths of the models that played a side or role sum to zero (rated or not): the page's words and the
    chart's axis name that mean, not the rated models' (which, with policy/once unrated, is not zero here)."""
    html, rows = _page()
    by_side: dict[str, list[dict]] = {}
    for r in rows:
        if r["rating"] is not None:
            by_side.setdefault(r["side"], []).append(r)
    for side, played in by_side.items():
        assert abs(sum(r["rating"] for r in played)) < 1e-6, side
    rated = [r["rating"] for r in by_side["overall"] if r["rated"]]
    assert abs(sum(rated) / len(rated)) > 1e-3
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "relative to the mean of the models that played there" in text and "rated there" not in text
    assert "0 = the mean of the models that played there" in html
