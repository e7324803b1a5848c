"""The leaderboard's ratings (transform/models/ratings.py): line-ups, a hand-solved fit, planted strengths recovered in
order with intervals that cover them at the nominal rate, what is left out and counted, mirror pairs from the experiment
file to the marts, and agreement with the published Mini-Mafia capability scores where both speak."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, special, stats

from mafiabench.study.design import expand_cells, game_seed
from mafiabench.study.spec import parse_experiment
from mafiabench.transform.models.ratings import (
    LINE_UP_COUNTS_SQL,
    fit,
    line_ups,
    model_sql,
    rating_tables,
    summarise,
)
from support.rating_warehouse import warehouse

PUBLISHED = Path(__file__).parents[1] / "fixtures" / "published_mini_mafia"


def test_line_ups_hold_seat_shares_and_counts() -> None:
    games = [(["A"], ["B", "B", "C"], True), (["A"], ["C", "B", "B"], False), (["B"], ["A", "A", "A"], True)]
    data = line_ups(games)
    assert data.models == ["A", "B", "C"]
    assert sorted(zip(data.games.tolist(), data.wins.tolist(), strict=True)) == [(1, 1), (2, 1)]
    row = int(np.argmax(data.games))
    assert data.mafia[row].tolist() == [1.0, 0.0, 0.0]
    assert data.town[row].tolist() == pytest.approx([0.0, 2 / 3, 1 / 3])


def test_a_mirror_pair_fit_solves_its_score_equation() -> None:
    """A as mafia wins 30 of 40 against B; B as mafia wins 10 of 40 against A. By symmetry h = 0, and with
    r_A = -r_B = z / sqrt(2) (the sum-to-zero basis, z ~ Normal(0, 1)) the posterior mode solves
    sqrt(2) (60 - 80 expit(sqrt(2) z)) = z: solved here by root-finding, not by the fit's code."""
    games = [(["A"], ["B"], True)] * 30 + [(["A"], ["B"], False)] * 10
    games += [(["B"], ["A"], True)] * 10 + [(["B"], ["A"], False)] * 30
    z = optimize.brentq(lambda z: math.sqrt(2) * (60 - 80 * special.expit(math.sqrt(2) * z)) - z, 0, 5)
    post = fit(line_ups(games), by_side=False)
    rows = {r["model"]: r for r in summarise("s", "overall", line_ups(games), post, "r")}
    assert post.converged
    assert rows["A"]["rating"] == pytest.approx(z / math.sqrt(2), abs=1e-7)
    assert rows["B"]["rating"] == pytest.approx(-z / math.sqrt(2), abs=1e-7)
    assert rows["A"]["side_advantage"] == pytest.approx(0.0, abs=1e-7)
    assert (rows["A"]["rank"], rows["B"]["rank"]) == (1, 2)
    assert rows["A"]["ci_low"] < rows["A"]["rating"] < rows["A"]["ci_high"]


def _planted(seed: int, n_models: int = 10, n_games: int = 6000) -> tuple[list, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b, h = rng.normal(0, 1, n_models), rng.normal(0, 1, n_models), -0.4
    names = [f"m{i:02d}" for i in range(n_models)]
    games = []
    for _ in range(n_games):  # Mini-Mafia seats: one mafioso; a detective and two villagers of two models
        i, j, k = rng.choice(n_models, 3, replace=False)
        p = special.expit(h + a[i] - (b[j] + 2 * b[k]) / 3)
        games.append(([names[i]], [names[j], names[k], names[k]], bool(rng.random() < p)))
    return games, a - a.mean(), b - b.mean()


def test_planted_strengths_are_ordered_and_covered_at_the_nominal_rate() -> None:
    """Twenty studies of ten models with strengths drawn from the prior: the ratings order the models as planted
    (Spearman >= 0.75 in every study and side, >= 0.9 on average), and the 95% intervals cover the planted (centred)
    strengths 95% of the time over the 400 intervals (a binomial sd of 1.1 points: 92-98% accepted)."""
    covered, total, rhos = 0, 0, []
    for seed in range(20):
        games, a, b = _planted(seed)
        data = line_ups(games)
        post = fit(data, by_side=True)
        assert post.converged
        for side, parameter, truth in (("mafia", "a", a), ("town", "b", b)):
            rows = summarise("s", side, data, post, parameter)
            planted = [truth[int(r["model"][1:])] for r in rows]
            rhos.append(stats.spearmanr([r["rating"] for r in rows], planted).statistic)
            covered += sum(r["ci_low"] <= t <= r["ci_high"] for r, t in zip(rows, planted, strict=True))
            total += len(rows)
    assert total == 400
    assert min(rhos) >= 0.75 and np.mean(rhos) >= 0.9, rhos
    assert 0.92 <= covered / total <= 0.98, covered / total


def test_left_out_games_are_counted_and_self_play_is_shown_apart() -> None:
    games = [
        {"study": "s", "id": f"g{i}", "mafia": ["A"], "town": ["B", "B", "B"], "mafia_won": i % 3 == 0}
        for i in range(12)
    ] + [
        {"study": "s", "id": f"h{i}", "mafia": ["B"], "town": ["A", "A", "A"], "mafia_won": i % 2 == 0}
        for i in range(12)
    ] + [
        {"study": "s", "id": "self1", "mafia": ["A"], "town": ["A", "A", "A"], "mafia_won": True},
        {"study": "s", "id": "self2", "mafia": ["A"], "town": ["A", "A", "A"], "mafia_won": False},
        {"study": "s", "id": "failed", "mafia": ["A"], "town": ["B"] * 3, "status": "failed", "scored": False},
        {"study": "s", "id": "invalid", "mafia": ["A"], "town": ["B"] * 3, "valid": False, "scored": False},
        {"study": "t", "id": "other", "mafia": ["C"], "town": ["D"] * 3, "mafia_won": True},
    ]
    tables = rating_tables(warehouse(games))
    coverage = {(r["study"], r["category"]): r["games"] for r in tables["mart_rating_coverage"].to_dicts()}
    assert coverage == {("s", "rated"): 24, ("s", "self_play"): 2, ("s", "failed"): 1, ("s", "invalid"): 1,
                        ("t", "rated"): 1}
    assert tables["mart_self_play"].to_dicts() == [
        {"study": "s", "model": "A", "games": 2, "mafia_wins": 1, "mafia_win_rate": 0.5}
    ]
    ratings = tables["mart_ratings"].filter(tables["mart_ratings"]["study"] == "s").to_dicts()
    assert {(r["side"], r["model"]) for r in ratings} == {(s, m) for s in ("overall", "mafia", "town") for m in "AB"}
    a_mafia = next(r for r in ratings if r["side"] == "mafia" and r["model"] == "A")
    assert (a_mafia["n_games"], a_mafia["wins"]) == (12, 4)  # self-play, failed and invalid games not counted
    a_town = next(r for r in ratings if r["side"] == "town" and r["model"] == "A")
    assert (a_town["n_games"], a_town["wins"]) == (12, 6)
    pairs = {(r["mafia_model"], r["town_model"]): r for r in tables["mart_head_to_head"].to_dicts()}
    assert pairs[("A", "B")]["games"] == 12 and pairs[("A", "B")]["mafia_wins"] == 4
    assert pairs[("A", "B")]["mirrored"] and pairs[("B", "A")]["mirrored"] and not pairs[("C", "D")]["mirrored"]
    assert pairs[("A", "B")]["game_ids"] == sorted(f"g{i}" for i in range(12))  # in game-id order


def test_an_empty_warehouse_gives_empty_marts_with_their_columns() -> None:
    tables = rating_tables(warehouse([]))
    assert all(t.height == 0 for t in tables.values())
    assert "rank_high" in tables["mart_ratings"].columns and "game_ids" in tables["mart_head_to_head"].columns


MIRROR = """
name = "m"
variant = "mini-mafia"
games_per_cell = 3
[mirror]
models = ["policy/random", "policy/informed", "fake/alpha"]
games_per_pair = 4
"""


def test_mirror_pairs_play_both_ways_round_with_the_same_seeds() -> None:
    import tomllib

    exp = parse_experiment(tomllib.loads(MIRROR))
    cells = {c.name: c for c in expand_cells(exp)}
    assert set(cells) == {
        "mirror|policy/random|policy/informed", "mirror|policy/informed|policy/random",
        "mirror|policy/random|fake/alpha", "mirror|fake/alpha|policy/random",
        "mirror|policy/informed|fake/alpha", "mirror|fake/alpha|policy/informed",
    }
    assert exp.planned_games() == 24 == sum(c.games for c in cells.values())
    there, back = cells["mirror|policy/random|fake/alpha"], cells["mirror|fake/alpha|policy/random"]
    assert there.agents == {"default": "fake/alpha", "mafioso": "policy/random"}
    assert back.agents == {"default": "policy/random", "mafioso": "fake/alpha"}
    assert [game_seed(exp, there, i) for i in range(4)] == [game_seed(exp, back, i) for i in range(4)]
    assert game_seed(exp, there, 0) != game_seed(exp, cells["mirror|policy/random|policy/informed"], 0)


def test_a_mirror_model_listed_twice_is_refused() -> None:
    import tomllib

    with pytest.raises(Exception, match="distinct"):
        parse_experiment(tomllib.loads(MIRROR.replace('"fake/alpha"]', '"policy/random"]')))


def _published_games(capabilities: tuple[str, ...]) -> list[tuple[list[str], list[str], bool]]:
    """The published design's games from its win counts: a target against each background, 100 games a cell; the
    background model holds every seat the target does not (Mini-Mafia: a mafioso, a detective, two villagers)."""
    rows = list(csv.DictReader((PUBLISHED / "win_counts.csv").open()))
    backgrounds = [k for k in rows[0] if k not in ("capability", "model")]
    games: list[tuple[list[str], list[str], bool]] = []
    for r in rows:
        if r["capability"] not in capabilities:
            continue
        target = r["model"]
        for bg in backgrounds:
            won = int(float(r[bg]))
            if r["capability"] == "Deceive":
                mafia, town, mafia_wins = [target], [bg, bg, bg], won
            elif r["capability"] == "Detect":
                mafia, town, mafia_wins = [bg], [bg, target, bg], 100 - won
            else:
                mafia, town, mafia_wins = [bg], [target, bg, bg], 100 - won
            games += [(mafia, town, True)] * mafia_wins + [(mafia, town, False)] * (100 - mafia_wins)
    return games


@pytest.mark.parametrize(
    ("capabilities", "side", "parameter", "published", "at_least"),
    [
        (("Deceive", "Detect", "Disclose"), "mafia", "a", "Deceive", 0.75),
        (("Detect",), "town", "b", "Detect", 0.9),
        (("Disclose",), "town", "b", "Disclose", 0.8),
    ],
)
def test_ratings_order_the_published_models_as_the_published_scores_do(
    capabilities: tuple[str, ...], side: str, parameter: str, published: str, at_least: float
) -> None:
    """Where both speak (the mafia side and deceive; the town side and detect or disclose on their own games), the
    ratings of the ten published models rank-correlate with the published top-down scores. They are not the same
    number: the published model is multiplicative (a villager's detect ability scales the mafioso-detective gap),
    the rating additive, and the town rating pools detect and disclose seats."""
    games = _published_games(capabilities)
    assert len(games) == 100 * 5 * 10 * len(capabilities)
    data = line_ups(games)
    rows = {r["model"]: r["rating"] for r in summarise("pub", side, data, fit(data, by_side=True), parameter)}
    scores = {r["Model"]: float(r[published]) for r in csv.DictReader((PUBLISHED / "scores_theoretical.csv").open())}
    assert len(scores) == 10
    rho = stats.spearmanr([rows[m] for m in scores], list(scores.values())).statistic
    assert rho >= at_least, rho
    top = max(scores, key=lambda m: scores[m])
    assert max(scores, key=lambda m: rows[m]) == top or rows[top] >= sorted(rows[m] for m in scores)[-2]


def test_a_page_export_is_csv_with_formula_text_defused(tmp_path: Path) -> None:
    """`Page.add_export` tables are written beside the page; text a spreadsheet would run is not a formula."""
    from mafiabench.dashboards.html import Page
    from mafiabench.dashboards.render import write_csv

    page = Page("leaderboard.html", "t", "leaderboard.html.j2")
    name = page.add_export("ratings", [{"model": "=cmd()", "rating": -0.5, "ids": ["a", "b"], "sd": None}])
    assert name == "leaderboard.ratings.csv"
    write_csv(tmp_path / name, page.exports["ratings"])
    written = list(csv.reader((tmp_path / name).open()))
    assert written == [["model", "rating", "ids", "sd"], ["'=cmd()", "-0.5", "a;b", ""]]


def test_the_gate_requires_a_rating_for_every_model_with_enough_games() -> None:
    """The GX suites declared beside mart_ratings (transform/models/ratings.yml): pass on the marts the ratings wrote,
    fail when a model with 20 or more rated games has no rating (the row removed), and pass on a warehouse with no
    games."""
    from mafiabench.quality.gate import gate_suites, run_suites
    from mafiabench.transform.build.catalogue import model_docs

    suites = [s for s in gate_suites(model_docs()) if s.name.startswith("mart_ratings")]
    assert {s.name for s in suites} == {"mart_ratings", "mart_ratings_complete"}
    games = [{"study": "s", "id": f"g{i}", "mafia": [m], "town": [t] * 3, "mafia_won": i % 3 == 0}
             for i, (m, t) in enumerate([("A", "B"), ("B", "A"), ("A", "C"), ("C", "B")] * 12)]
    con = warehouse(games)
    for name, frame in rating_tables(con).items():
        con.register(f"{name}_frame", frame.to_arrow())
        con.execute(f"create table {name} as select * from {name}_frame")
    # The build's line-up counts (the completeness rule counts rated games there), as the ratings make them.
    refs = {"fct_games": "fct_games", "fct_player_games": "(select *, null::varchar as variant from fct_player_games)"}
    con.execute(f"create table int_line_up_counts as {model_sql(LINE_UP_COUNTS_SQL, refs)}")

    def failed() -> list[str]:
        return sorted({r.rule for r in run_suites(con, suites=suites) if not r.success})

    assert failed() == []
    con.execute("delete from mart_ratings where model = 'C' and side = 'overall'")
    assert failed() == ["ratings: every model with 20 or more rated games in a study has a rating"]
