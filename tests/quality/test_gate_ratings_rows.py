"""The gate's `mart_ratings` rule on each kind of row: a rating inside its interval, and no rating (null rating, sd
and bounds) only on a row not rated because the model did not play there or played there alone; a null anywhere
else fails, as a rating outside its interval does."""

from __future__ import annotations

import duckdb
import pytest

from support.gate import declared_suites

COLUMNS = ("study varchar, side varchar, model varchar, rating double, sd double, ci_low double, ci_high double, "
           "rank bigint, rank_low bigint, rank_high bigint, n_games bigint, converged boolean, rated boolean, "
           "reason varchar")
RATED = ("s", "mafia", "A", 0.4, 0.2, 0.0, 0.8, 1, 1, 2, 30, True, True, None)
NO_GAMES = ("s", "town", "A", None, None, None, None, None, None, None, 0, True, False, "no games as town")
ALONE = ("s", "mafia", "B", None, None, None, None, None, None, None, 40, True, False,
         "the only model as mafia: nothing to compare it with")
PRIOR = ("s", "overall", "C", 0.1, 0.9, -1.7, 1.9, None, None, None, 2, True, False,
         "mostly prior: the games set 20% of its precision")


def _outside(row: tuple[object, ...]) -> int:
    [suite] = [s for s in declared_suites() if s.name == "mart_ratings"]
    con = duckdb.connect()
    con.execute(f"create table mart_ratings ({COLUMNS})")
    con.execute(f"insert into mart_ratings values ({', '.join('?' * len(row))})", list(row))
    return int(con.execute(f"select outside_interval from ({suite.query})").fetchall()[0][0])


@pytest.mark.parametrize("row", [RATED, NO_GAMES, ALONE, PRIOR], ids=["rated", "no-games", "alone", "prior"])
def test_a_rating_in_its_interval_or_none_where_the_model_has_no_strength_there_passes(row: tuple) -> None:
    assert _outside(row) == 0


@pytest.mark.parametrize("row", [
    (*RATED[:3], 0.9, *RATED[4:]),  # outside its interval
    (*RATED[:3], None, *RATED[4:]),  # a rated row without a rating
    (*PRIOR[:3], None, None, None, None, *PRIOR[7:]),  # games, not alone: the fit has its strength
    (*NO_GAMES[:3], 0.0, 0.0, 0.0, 0.0, *NO_GAMES[7:]),  # no games, yet a rating known exactly
    (*NO_GAMES[:3], None, None, -1.0, 1.0, *NO_GAMES[7:]),  # an interval about no rating
], ids=["outside", "rated-null", "played-null", "no-games-zero", "no-games-interval"])
def test_any_other_row_fails(row: tuple) -> None:
    assert _outside(row) == 1
