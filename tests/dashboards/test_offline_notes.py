"""The demo's pages say which troubles are expected of the offline fakes (issue 40 item 3): its Scores page showed
"converged: no" and hundreds of divergences, its Failures page the fakes' injected format failures, with no word
that both are by design. A study played by the built-in offline players only (fake/..., scripted/..., policy/...)
now gets a note beside its latent fit when the fit is troubled, and the Failures page one naming the offline
players that failed; a study with any other model gets none (no browser: the pages rendered from hand-made marts)."""

from __future__ import annotations

import duckdb
import polars as pl

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import failures, scores


def _ability(study: str, model: str) -> dict:
    return {"study": study, "prompt_version": "v1", "variant": "mini-mafia", "method": "nuts", "model": model,
            "ability": "deceive", "role": "mafioso", "parameter": "m", "estimate": 0.1, "se": 0.2, "ci_low": -0.3,
            "ci_high": 0.5, "n_games": 40, "identified": True, "r_hat": 1.2, "ess": 30.0, "converged": False,
            "note": "R-hat 1.2"}


def _fit(study: str, *, converged: bool, divergences: int) -> dict:
    return {"study": study, "prompt_version": "v1", "variant": "mini-mafia", "method": "nuts", "n_games": 540,
            "n_cells": 30, "log_likelihood": -300.0, "converged": converged, "divergences": divergences,
            "max_r_hat": 1.2, "min_ess": 30.0, "n_not_identified": 0, "brier_model": 0.24, "brier_constant": 0.25,
            "brier_gain": 0.01, "brier_skill": 0.04, "status": "fitted", "reason": None}


def _con(tables: dict[str, list[dict]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for name, rows in tables.items():
        con.register(f"{name}_frame", pl.DataFrame(rows).to_arrow())
        con.execute(f"create table {name} as select * from {name}_frame")
    return con


def test_a_troubled_fit_of_offline_players_says_it_is_expected() -> None:
    con = _con({
        "mart_latent_abilities": [_ability("demo", m) for m in ("fake/alpha", "scripted/naive", "policy/random")]
        + [_ability("real", m) for m in ("openai/gpt-4.1-mini", "fake/alpha")]
        + [{**_ability("calm", "fake/beta"), "converged": True, "r_hat": 1.0, "note": None}],
        "mart_latent_fit": [_fit("demo", converged=False, divergences=408), _fit("real", converged=False,
                                                                                 divergences=12),
                            _fit("calm", converged=True, divergences=0)],
    })
    html = render_page(scores.build(Context(Marts(con), {})), nav=[])
    notes = html.split('class="note offline-fit">')[1:]
    assert len(notes) == 1  # demo only: "real" has a real model, "calm" converged
    assert notes[0].startswith("Study demo is played by the built-in offline players only (fake/alpha, "
                               "policy/random, scripted/naive)")
    assert "expected of them" in notes[0]


def test_the_failures_page_names_the_offline_players_that_failed() -> None:
    rows = [{"variant": "mini-mafia", "model": m, "prompt_version": "v1", "role": "villager", "action": "vote",
             "n_decisions": 100, "n_format_failures": k, "rate": k / 100, "low": 0.0, "high": 0.1,
             "posterior_mean": k / 100}
            for m, k in (("fake/alpha", 3), ("scripted/naive", 0), ("openai/gpt-4.1-mini", 2))]
    html = render_page(failures.build(Context(Marts(_con({"mart_format_failures": rows})), {})), nav=[])
    note = html.split('class="note offline-failures">')[1].split("</p>")[0]
    assert note.startswith("Failures of the built-in offline players (fake/alpha) are\nexpected")
    assert "people-failures" not in html  # no person failed


def test_a_persons_format_failures_are_said_to_be_the_interfaces_too() -> None:
    """People imported from the Mini-Mafia web game (model `human`) fail the format where the interface read an
    unquoted message as a silence: the page says whose failure that is, wherever it shows a person's rows (a zero is
    the interface's reading too: the rows are marked, test_failures_people); a page without a person gets no note."""
    rows = [{"variant": "mini-mafia", "model": m, "prompt_version": None, "role": "villager", "action": "message",
             "n_decisions": 40, "n_format_failures": k, "rate": k / 40, "low": 0.0, "high": 0.1,
             "posterior_mean": k / 40} for m, k in (("human", 3), ("openai/gpt-4o-mini", 0))]
    html = render_page(failures.build(Context(Marts(_con({"mart_format_failures": rows})), {})), nav=[])
    note = html.split('class="note people-failures">')[1].split("</p>")[0]
    assert "how the game's\ninterface read what they typed" in note
    rows[0]["n_format_failures"] = 0
    html = render_page(failures.build(Context(Marts(_con({"mart_format_failures": rows})), {})), nav=[])
    assert html.count('class="note people-failures"') == 1
    html = render_page(failures.build(Context(Marts(_con({"mart_format_failures": rows[1:]})), {})), nav=[])
    assert "people-failures" not in html



def test_a_study_not_fitted_says_why_in_its_own_row_and_gets_no_note() -> None:
    """A fit the latent mart did not sample (status not_fitted, mart_latent_fit's reason) needs no note."""
    fit = {**_fit("demo", converged=False, divergences=0), "status": "not_fitted",
           "reason": "only scripted players (policy/...)"}
    html = render_page(scores.build(Context(Marts(_con({"mart_latent_abilities": [_ability("demo", "policy/random")],
                                                        "mart_latent_fit": [fit]})), {})), nav=[])
    assert "not fitted: only scripted players (policy/...)" in html and "offline-fit" not in html
