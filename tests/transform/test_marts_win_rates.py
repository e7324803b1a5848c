"""mart_win_rates and fct_games on hand-built games with known counts."""

from __future__ import annotations

import math

import pytest

from support.records import MAFIA_WIN_VOTES, TIE_VOTES, cell_records, landed, mini_record, one, rows


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


@pytest.fixture(scope="module")
def con():
    models = {"mafioso": "M", "detective": "D", "villager": "V"}
    recs = cell_records("a", n=10, mafia_wins=7, tie_wins=2, models=models)
    # An invalid game and one with a random fallback vote deciding it: excluded / counted separately.
    recs.append(mini_record("bad", models=models, valid=False, invalid_reason="technical failure"))
    recs.append(
        mini_record("fb", models={"mafioso": "M2", "detective": "D", "villager": "V"}, votes=MAFIA_WIN_VOTES,
                    fallback_voters=["Charlie"])
    )
    return landed(recs, only=["mart_win_rates", "fct_games"])


def test_overall_mafia_win_rate_with_laplace_beta_wilson_and_tie_split(con) -> None:
    r = one(con, "select * from mart_win_rates where dimension = 'cell' and value like '%mafioso=M |%'")
    assert (r["team"], r["n"], r["k"], r["k_tie"], r["k_clean"]) == ("mafia", 10, 7, 2, 5)
    assert r["laplace_mean"] == pytest.approx(8 / 12)
    assert r["beta_sd"] == pytest.approx(math.sqrt(8 * 4 / (12**2 * 13)))
    lo, hi = wilson(7, 10)
    assert (r["wilson_low"], r["wilson_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert r["rate_tie"] == pytest.approx(0.2) and r["rate_clean"] == pytest.approx(0.5)
    assert r["n_tie_decided"] == 2


def test_invalid_games_are_not_scored_but_counted(con) -> None:
    r = one(con, "select * from mart_win_rates where dimension = 'all'")
    assert r["n"] == 11 and r["n_invalid"] == 1
    assert r["k"] == 8
    # A model's seats count the invalid game too (validity is the game's: a player's row does not carry it).
    v = one(con, "select * from mart_win_rates where dimension = 'model_as_villager' and value = 'V'")
    assert (v["n_invalid"], v["n_unfinished"]) == (1, 0)


def test_model_per_role_counts_each_game_once(con) -> None:
    # Both villagers are V: the game counts once for V-as-villager, and the town's wins are V's wins.
    r = one(con, "select * from mart_win_rates where dimension = 'model_as_villager' and value = 'V'")
    assert (r["team"], r["n"], r["k"]) == ("town", 11, 3)
    m = one(con, "select * from mart_win_rates where dimension = 'model_as_mafioso' and value = 'M2'")
    assert (m["n"], m["k"], m["n_fallback_decided"]) == (1, 1, 1)


def test_fallback_decided_flag(con) -> None:
    flags = {r["game_id"]: r["fallback_decided"] for r in rows(con, "select game_id, fallback_decided from fct_games")}
    assert flags["fb"] is True
    assert not any(v for k, v in flags.items() if k != "fb")


def test_tie_decided_game_facts(con) -> None:
    g = one(con, "select * from fct_games where game_id = 'a-0'")
    assert g["tie_decided"] and g["mafia_won"] and g["last_eliminated"] == "Charlie"
    assert g["mafioso_model"] == "M" and g["villager_model"] == "V" and not g["is_homogeneous"]


def test_empty_group_gets_uninformative_interval() -> None:
    c = landed([mini_record("x", valid=False, votes=TIE_VOTES, eliminated="Alice")], only=["mart_win_rates"])
    r = one(c, "select * from mart_win_rates where dimension = 'all'")
    assert (r["n"], r["k"], r["laplace_mean"], r["wilson_low"], r["wilson_high"]) == (0, 0, 0.5, 0.0, 1.0)
    assert r["rate"] is None
