"""Rated only where the data rate: each rating's data share of its precision (hand-computed), the design's rank and
its unidentified directions, and no rank for a model with no games there, alone there, not identified or set mostly
by the prior."""

from __future__ import annotations

import math

import pytest
from scipy import optimize, special

from mafiabench.transform.models.ratings import fit, line_ups, summarise, unidentified_directions


def test_the_data_share_of_a_mirror_pair_rating_is_hand_computed() -> None:
    """A wins 30 of 40 as mafia against B, B 10 of 40 against A. By symmetry h = 0 and r_A = z / sqrt(2) with z
    the one sum-to-zero coordinate, prior Normal(0, 1): each line-up's design row is +-sqrt(2) in z, so the
    posterior precision of z is 1 + 80 * 2 * p (1 - p), p = expit(sqrt(2) z), and r_A's prior variance 1/2.
    The data's share of r_A's precision is then 160 p (1 - p) / (1 + 160 p (1 - p))."""
    games = [(["A"], ["B"], True)] * 30 + [(["A"], ["B"], False)] * 10
    games += [(["B"], ["A"], True)] * 10 + [(["B"], ["A"], False)] * 30
    z = optimize.brentq(lambda z: math.sqrt(2) * (60 - 80 * special.expit(math.sqrt(2) * z)) - z, 0, 5)
    p = special.expit(math.sqrt(2) * z)
    info = 160 * p * (1 - p)
    data = line_ups(games)
    post = fit(data, kind="overall", interval="model")
    rows = {r["model"]: r for r in summarise("s", "overall", data, post, "overall")}
    assert rows["A"]["data_share"] == pytest.approx(info / (1 + info), abs=1e-9)
    assert rows["A"]["sd"] == pytest.approx(math.sqrt(0.5 / (1 + info)), abs=1e-9)
    assert rows["A"]["rated"] and rows["A"]["rank"] == 1 and rows["A"]["reason"] is None
    assert (post.rank, len(post.theta)) == (2, 2) and unidentified_directions(post, data.models) == []


def test_a_design_that_sets_only_a_difference_leaves_the_ratings_unrated() -> None:
    """A plays mafia against B's town, C against D's, never crossed: the games set h + a_A - b_B and
    h + a_C - b_D, so of (h, a_A - a_C, b_B - b_D) only h and a_A - a_C - (b_B - b_D) are set: design rank 2 of 3,
    one unidentified direction (a_A - a_C together with b_B - b_D), and no side rating is identified."""
    games = [(["A"], ["B"], i % 3 == 0) for i in range(60)] + [(["C"], ["D"], i % 2 == 0) for i in range(60)]
    data = line_ups(games)
    post = fit(data, kind="sides")
    assert (post.rank, len(post.theta)) == (2, 3)
    [direction] = unidentified_directions(post, data.models)
    assert "mafia:" in direction and "town:" in direction
    assert all(model in direction for model in "ABCD"), direction
    for side in ("mafia", "town"):
        for r in summarise("s", side, data, post, side):
            assert not r["rated"] and r["rank"] is None and r["rank_low"] is None, r
            assert r["reason"] in ("no games as " + side, "not identified: 50% of it lies in directions the design "
                                   "does not set"), r
    # Each model plays one side: the other side's row says so.
    a_town = next(r for r in summarise("s", "town", data, post, "town") if r["model"] == "A")
    assert a_town["n_games"] == 0 and a_town["reason"] == "no games as town"
    # No games there: no rating at all, not 0 +- 0 (an interval of width 0 would claim it known exactly).
    assert _no_rating(a_town) and a_town["data_share"] == 0.0


def test_a_rating_set_mostly_by_the_prior_is_not_ranked() -> None:
    """A mirror pair of one game each way, A winning both: the design identifies r_A (two line-ups for h and z),
    but the games' information about z is 2 * 2 p (1 - p) < 1 against the prior's 1 (p = expit(sqrt(2) z) > 1/2),
    so the data set less than half of each rating's precision."""
    games = [(["A"], ["B"], True), (["B"], ["A"], False)]
    data = line_ups(games)
    post = fit(data, kind="overall")
    rows = summarise("s", "overall", data, post, "overall")
    assert post.rank == 2 and all(0.3 < r["data_share"] < 0.5 for r in rows)
    assert all(not r["rated"] and r["rank"] is None and r["reason"].startswith("mostly prior") for r in rows)


def test_the_only_model_in_a_side_is_not_ranked() -> None:
    games = [(["A"], ["B", "B", "C"], i % 2 == 0) for i in range(40)] + [(["A"], ["C", "C", "B"], i % 3 == 0)
                                                                          for i in range(40)]
    data = line_ups(games)
    post = fit(data, kind="sides")
    mafia = {r["model"]: r for r in summarise("s", "mafia", data, post, "mafia")}
    assert mafia["A"]["reason"] == "the only model as mafia: nothing to compare it with" and mafia["A"]["rank"] is None
    assert mafia["B"]["reason"] == "no games as mafia"
    # Alone as mafia, A's strength there is no parameter (the centring fixes it): no rating, as for no games.
    assert _no_rating(mafia["A"]) and _no_rating(mafia["B"]) and mafia["A"]["n_games"] == 80
    town = {r["model"]: r for r in summarise("s", "town", data, post, "town")}
    assert town["A"]["reason"] == "no games as town"
    assert town["B"]["rated"] and town["C"]["rated"] and {town["B"]["rank"], town["C"]["rank"]} == {1, 2}


def test_a_model_on_both_sides_alike_has_no_overall_rating_and_says_why() -> None:
    """A holds one of two mafia seats and two of four town seats in each of its 200 games: it adds as much to each
    side, so its overall strength cancels from every game it played and no game sets it. Its row keeps its games
    and says so (it read "no games" beside 200 games); B and C, who played against each other, are rated."""
    games = [(["A", "B"], ["A", "A", "C", "B"], i % 2 == 0) for i in range(200)]
    games += [(["B", "C"], ["B", "C", "C", "B"], i % 3 == 0) for i in range(200)]
    games += [(["C", "C"], ["B", "B", "B", "B"], i % 5 == 0) for i in range(200)]
    data = line_ups(games)
    post = fit(data, kind="overall")
    rows = {r["model"]: r for r in summarise("s", "overall", data, post, "overall")}
    assert rows["A"]["n_games"] == 200 and _no_rating(rows["A"])
    assert rows["A"]["reason"] == ("the same share of both sides in every game it played: nothing sets its overall "
                                   "strength")
    assert rows["B"]["rated"] and rows["C"]["rated"]
    # By side, A's seats do set something: a row with a rating (here not identified, so not ranked).
    mafia = {r["model"]: r for r in summarise("s", "mafia", data, fit(data, kind="sides"), "mafia")}
    assert mafia["A"]["rating"] is not None and mafia["A"]["n_games"] == 200


def _no_rating(row: dict[str, object]) -> bool:
    return all(row[c] is None for c in ("rating", "sd", "ci_low", "ci_high", "model_low", "model_high", "robust_low",
                                        "robust_high", "rank")) and not row["rated"]
