"""The gate's `mart_ratings` rule on each kind of row: a rating inside its interval where the model played beside
another model, and no rating (null rating, sd and bounds) where it has no games there or is the only model with
games there, as the games say (the rows' `n_games`), whatever the reason's words. Overall, a model on both sides in
every game it played may have either (it may hold the same share of each and cancel). A null anywhere else fails, as
a rating outside its interval does.

Each row is checked in a study beside the rows a fit gives with it: models Y and Z, rated as mafia, as town and
overall, and for an overall row the model's side rows (the games the rule compares)."""

from __future__ import annotations

import duckdb
import pytest

from support.gate import declared_suites

COLUMNS = ("study varchar, side varchar, model varchar, rating double, sd double, ci_low double, ci_high double, "
           "rank bigint, rank_low bigint, rank_high bigint, n_games bigint, converged boolean, rated boolean, "
           "reason varchar")


def _rated(side: str, model: str, n: int = 30) -> tuple[object, ...]:
    return ("s", side, model, 0.4, 0.2, 0.0, 0.8, 1, 1, 2, n, True, True, None)


def _none(side: str, model: str, n: int, reason: str) -> tuple[object, ...]:
    return ("s", side, model, None, None, None, None, None, None, None, n, True, False, reason)


# Y and Z played both sides beside each other and the model under test; neither was a detective.
CONTEXT = [row for m in "YZ" for row in (_rated("mafia", m), _rated("town", m), _rated("overall", m, 60),
                                         _none("detective", m, 0, "no games as detective"))]
RATED = _rated("mafia", "A")
NO_GAMES = _none("town", "A", 0, "no games as town")
ALONE = _none("detective", "B", 40, "the only model as detective: nothing to compare it with")
PRIOR = ("s", "overall", "C", 0.1, 0.9, -1.7, 1.9, None, None, None, 2, True, False,
         "mostly prior: the games set 20% of its precision")
# D sat on both sides in each of its 50 games: overall, its games may set nothing of it, or something.
BOTH_SIDES = [_rated("mafia", "D", 50), _rated("town", "D", 50)]
BALANCED = _none("overall", "D", 50, "the same share of both sides in every game it played: nothing sets its "
                 "overall strength")


def _outside(row: tuple[object, ...], *, context: list[tuple[object, ...]] = CONTEXT) -> int:
    [suite] = [s for s in declared_suites() if s.name == "mart_ratings"]
    con = duckdb.connect()
    con.execute(f"create table mart_ratings ({COLUMNS})")
    for r in [row, *context]:
        con.execute(f"insert into mart_ratings values ({', '.join('?' * len(r))})", list(r))
    found = con.execute(f"select outside_interval from ({suite.query}) where side = ? and model = ?",
                        [row[1], row[2]]).fetchall()
    context_fails = con.execute(f"select count(*) from ({suite.query}) where outside_interval = 1 "
                                "and not (side = ? and model = ?)", [row[1], row[2]]).fetchall()[0][0]
    assert context_fails == 0
    return int(found[0][0])


@pytest.mark.parametrize("row", [RATED, NO_GAMES, ALONE, PRIOR], ids=["rated", "no-games", "alone", "prior"])
def test_a_rating_in_its_interval_or_none_where_the_model_has_no_strength_there_passes(row: tuple) -> None:
    assert _outside(row) == 0


@pytest.mark.parametrize("row", [BALANCED, (*BALANCED[:3], *_rated("overall", "D", 50)[3:])], ids=["none", "rated"])
def test_overall_a_model_on_both_sides_in_every_game_may_have_a_rating_or_none(row: tuple) -> None:
    assert _outside(row, context=CONTEXT + BOTH_SIDES) == 0


@pytest.mark.parametrize("row", [
    (*RATED[:3], 0.9, *RATED[4:]),  # outside its interval
    (*RATED[:3], None, *RATED[4:]),  # a rated row without a rating
    (*PRIOR[:3], None, None, None, None, *PRIOR[7:]),  # games, not alone: the fit has its strength
    (*PRIOR[:3], None, None, None, None, *PRIOR[7:13], "the only model as overall"),  # Y and Z played: the words lie
    (*NO_GAMES[:3], 0.0, 0.0, 0.0, 0.0, *NO_GAMES[7:]),  # no games, yet a rating known exactly
    (*NO_GAMES[:3], None, None, -1.0, 1.0, *NO_GAMES[7:]),  # an interval about no rating
    (*ALONE[:3], 0.0, 0.0, 0.0, 0.0, *ALONE[7:]),  # alone there: 0 +- 0 is the centring, not a rating
], ids=["outside", "rated-null", "played-null", "played-null-said-alone", "no-games-zero", "no-games-interval",
        "alone-zero"])
def test_any_other_row_fails(row: tuple) -> None:
    assert _outside(row) == 1


def test_a_model_that_missed_a_side_in_some_game_needs_its_overall_rating() -> None:
    """D's overall games (60) are more than its mafia games (50): in ten games it sat on one side only, so the
    fit has its overall strength, and a null there fails."""
    assert _outside((*BALANCED[:10], 60, *BALANCED[11:]), context=CONTEXT + BOTH_SIDES) == 1
