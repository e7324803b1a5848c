"""The gate's `mart_latent_abilities` rule on each kind of row: a placed ability shows the interval its fit names
(`mart_latent_fit.interval`: the model's own, or the one widened where the cells scatter beyond the model), which
holds its estimate, the widened one holding the model's; an unplaced ability shows none and names none. Any other
row fails: the page would show an interval its fit does not stand behind."""

from __future__ import annotations

import duckdb
import pytest

from support.gate import declared_suites

FIT = "study varchar, prompt_version varchar, method varchar, status varchar, interval varchar"
ABILITIES = ("study varchar, prompt_version varchar, method varchar, model varchar, ability varchar, "
             "estimate double, ci_low double, ci_high double, interval varchar, model_low double, model_high double, "
             "robust_low double, robust_high double, identified boolean")
# Study r: cells that scatter beyond the model (robust shown); study m: cells that fit (the model's shown).
FITS = [("r", "v1", "nuts", "fitted", "robust"), ("m", None, "map", "fitted", "model")]
ROBUST = ("r", "v1", "nuts", "A", "deceive", 0.2, -0.4, 0.8, "robust", -0.2, 0.6, -0.4, 0.8, True)
MODEL = ("m", None, "map", "A", "deceive", 0.2, -0.2, 0.6, "model", -0.2, 0.6, -0.2, 0.6, True)
MODEL_NO_DF = ("m", None, "map", "B", "deceive", 0.2, -0.2, 0.6, "model", -0.2, 0.6, None, None, True)
UNPLACED = ("r", "v1", "nuts", "P", "detect", 1.0, None, None, None, None, None, None, None, False)


def _fails(row: tuple[object, ...]) -> int:
    [suite] = [s for s in declared_suites() if s.name == "mart_latent_abilities"]
    con = duckdb.connect()
    con.execute(f"create table mart_latent_fit ({FIT})")
    con.execute(f"create table mart_latent_abilities ({ABILITIES})")
    con.executemany("insert into mart_latent_fit values (?, ?, ?, ?, ?)", FITS)
    con.execute(f"insert into mart_latent_abilities values ({', '.join('?' * len(row))})", list(row))
    [(found,)] = con.execute(f"select interval_not_its_fits from ({suite.query})").fetchall()
    return int(found)


@pytest.mark.parametrize("row", [ROBUST, MODEL, MODEL_NO_DF, UNPLACED],
                         ids=["robust", "model", "model-no-degrees-of-freedom", "unplaced"])
def test_the_interval_its_fit_names_or_none_where_unplaced_passes(row: tuple) -> None:
    assert _fails(row) == 0


@pytest.mark.parametrize("row", [
    (*ROBUST[:6], -0.2, 0.6, "model", *ROBUST[9:]),  # the model's shown where the fit widens
    (*MODEL[:6], -0.4, 0.8, "robust", *MODEL[9:]),  # widened where the fit says the cells fit
    (*ROBUST[:5], 0.9, *ROBUST[6:]),  # the estimate outside its intervals
    (*ROBUST[:11], -0.1, 0.5, True),  # the "widened" interval narrower than the model's
    (*ROBUST[:6], -0.4, 0.8, "robust", *ROBUST[9:11], None, None, True),  # robust named, none computed
    (*UNPLACED[:6], -1.0, 3.0, *UNPLACED[8:]),  # an unplaced ability with an interval
    (*ROBUST[:13], False),  # an interval on a row that says it is not placed
    ("x", "v1", "nuts", *ROBUST[3:]),  # a row of no fitted study
], ids=["model-where-robust", "robust-where-model", "estimate-outside", "narrower", "robust-missing",
        "unplaced-interval", "not-identified-interval", "no-fit"])
def test_any_other_row_fails(row: tuple) -> None:
    assert _fails(row) == 1
