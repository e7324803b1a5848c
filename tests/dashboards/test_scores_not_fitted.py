"""The Scores page says why the latent model was not fitted (issue 37 item 1) where a study's games cannot inform
it, in place of a bare "converged: no"; a fitted study still shows whether its sampling converged."""

from __future__ import annotations

from mafiabench.dashboards.html import Page, render_page

FIT = {"study": "s", "method": "nuts", "n_games": 60, "n_cells": 2, "max_r_hat": None, "min_ess": None,
       "divergences": None, "log_likelihood": None, "brier_model": None, "brier_constant": None, "brier_gain": None,
       "brier_skill": None}


def _render(fits: list[dict]) -> str:
    page = Page("capability-scores.html", "Aggregate capability scores", "scores.html.j2")
    page.data.update(scores=None, latent=[], fits=fits, cards=[])
    return render_page(page, nav=[], data_status=None)


def _fit_cells(fits: list[dict]) -> list[str]:
    table = _render(fits).split("<h3>Fit and predictive gain", 1)[1]
    return [row.split("</td>")[4].removeprefix("<td>") for row in table.split("<tr>")[2:]]


def test_a_study_not_fitted_shows_why_and_a_fitted_one_whether_it_converged() -> None:
    reason = "only scripted players (policy/informed, policy/random): their play is a fixed rule, <not> an ability"
    cells = _fit_cells([
        {**FIT, "status": "not_fitted", "reason": reason, "converged": None},
        {**FIT, "study": "t", "status": "fitted", "reason": None, "converged": False},
    ])
    assert cells == [
        "not fitted: only scripted players (policy/informed, policy/random): their play is a fixed rule, &lt;not&gt; "
        "an ability",
        "no",
    ]


def test_no_abilities_because_nothing_was_fitted_points_to_the_reason() -> None:
    not_fitted = {**FIT, "status": "not_fitted", "reason": "one model in every role", "converged": None}
    assert "could inform the latent model: the fit table below says why." in _render([not_fitted])
    assert "No study had enough Mini-Mafia games to fit the latent model." in _render([])
