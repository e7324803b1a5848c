"""The latent model is not sampled on games that cannot inform it (issue 37 item 1): one model in every role, only
scripted players, or fewer cells than free parameters. The fit row says why (`status`, `reason`), the study has no
ability rows, and NUTS never runs; a design it can learn from is still sampled."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from mafiabench.transform.models import latent


def _games(cells: list[tuple[str, str, str, int, int]]) -> duckdb.DuckDBPyConnection:
    """fct_games with the columns the latent mart reads: per (mafioso, detective, villager, games, mafia wins)."""
    rows = [
        {"study": "s", "prompt_version": "v1", "game_id": f"{i}-{g}", "variant": "mini-mafia", "is_scored": True,
         "night_mode": "scripted", "mafioso_model": m, "detective_model": d, "villager_model": v,
         "mafia_won": g < w}
        for i, (m, d, v, n, w) in enumerate(cells) for g in range(n)
    ]
    frame = pl.DataFrame(rows)  # noqa: F841 (read by DuckDB by name)
    con = duckdb.connect()
    con.execute("create table fct_games as select * from frame")
    return con


@pytest.fixture
def no_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    def sampled(*args: object, **kwargs: object) -> None:
        raise AssertionError("NUTS sampled games that cannot inform it")

    monkeypatch.setattr(latent, "fit_latent_nuts", sampled)


@pytest.mark.usefixtures("no_sampling")
@pytest.mark.parametrize(
    ("cells", "reason"),
    [
        ([("A", "D", "V", 10, 7)],
         "one model in every role (mafioso A, detective D, villager V): nothing to compare; the mafia won 7 of 10 "
         "games"),
        ([("policy/random", "policy/random", "policy/random", 30, 20),
          ("policy/random", "policy/informed", "policy/random", 30, 9)],
         "only scripted players (policy/informed, policy/random): their play is a fixed rule, not an ability to "
         "estimate (mart_baselines gives the exact win rates of the policies it knows)"),
        ([("A", "D", "V", 20, 12), ("B", "E", "W", 20, 9), ("C", "F", "X", 20, 11)],
         "3 cells of games for 7 free parameters (3 mafioso, 3 detective and 3 villager models, less the shift and "
         "the scale): the design cannot place them"),
    ],
    ids=["one-model", "scripted-players", "too-few-cells"],
)
def test_games_that_cannot_inform_the_model_are_not_sampled_and_say_why(cells: list, reason: str) -> None:
    tables = latent.latent_tables(_games(cells), method="nuts")
    assert tables["mart_latent_abilities"].height == 0
    (fit,) = tables["mart_latent_fit"].to_dicts()
    assert (fit["status"], fit["reason"]) == ("not_fitted", reason)
    assert fit["n_games"] == sum(c[3] for c in cells) and fit["n_cells"] == len(cells)
    assert fit["converged"] is None and fit["chains"] is None and fit["n_not_identified"] is None


def test_a_design_the_model_can_learn_from_is_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two mafiosos against one detective and one villager: two cells for two free parameters (the smallest
    design the reference's model places), so NUTS runs; the point estimate is never checked."""

    class Sampled(Exception):
        pass

    def sampled(*args: object, **kwargs: object) -> None:
        raise Sampled

    monkeypatch.setattr(latent, "fit_latent_nuts", sampled)
    con = _games([("A", "D", "V", 20, 12), ("B", "D", "V", 20, 7)])
    with pytest.raises(Sampled):
        latent.latent_tables(con, method="nuts")
    fit = latent.latent_tables(_games([("A", "D", "V", 20, 12), ("B", "D", "V", 20, 7)]), method="map")
    assert fit["mart_latent_fit"]["status"].to_list() == ["fitted"]
    assert fit["mart_latent_fit"]["reason"].to_list() == [None]
