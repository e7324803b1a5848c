"""The data-quality page says when an expectation passed having checked nothing: a per-row expectation (GX's column
expectations) over an empty table is shown as "no rows", counted in the page's first line and its chart, not as
"passed"; a table-level rule over an empty table of violations is a pass; a dbt test's count is of failing rows
(dbt does not report the rows a test read), so it is not shown as "0 / 0"."""

from __future__ import annotations

import re

import duckdb
import pytest

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import Page, render_page
from mafiabench.dashboards.page_registry import Context
from mafiabench.dashboards.pages import quality

# suite, expectation, success, element_count, unexpected_count
RESULTS = [
    ("beliefs", "expect_column_values_to_be_between", True, 0, 0),  # no belief games: nothing checked
    ("statements", "expect_column_values_to_be_in_set", True, 0, 0),
    ("raw_games", "expect_column_values_to_not_be_null", True, 540, 0),  # checked 540 rows
    ("copied_games", "expect_table_row_count_to_equal", True, 0, 0),  # no violation: a pass
    ("dbt_tests", "unique_fct_games_game_id", True, 0, 0),
    ("dbt_tests", "not_null_fct_games_study", False, 3, 3),
    ("raw_players", "expect_column_values_to_be_in_set", False, 0, 0),  # failed is failed, whatever the rows
]


def _built() -> Page:
    con = duckdb.connect()
    con.execute("create table validation_results (build_id varchar, suite varchar, expectation varchar, rule varchar, "
                "kwargs_json varchar, success boolean, element_count bigint, unexpected_count bigint, "
                "failing_rows_json varchar, run_at timestamp)")
    for suite, expectation, success, rows, unexpected in RESULTS:
        con.execute("insert into validation_results values ('b1', ?, ?, ?, '{}', ?, ?, ?, '[]', "
                    "timestamp '2026-11-30 10:00:00')", [suite, expectation, f"rule of {suite}", success, rows,
                                                        unexpected])
    return quality.build(Context(Marts(con), {"build_id": "b1"}))


def _page() -> str:
    return render_page(_built(), nav=[])


def _cells() -> dict[tuple[str, str], list[str]]:
    html = _page()
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html.split('class="quality"', 1)[1].split("</table>", 1)[0], re.S)
    out = {}
    for row in rows:
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if cells:
            out[(cells[1], cells[2])] = cells
    return out


@pytest.mark.parametrize(("suite", "expectation", "badge", "count"), [
    ("beliefs", "expect_column_values_to_be_between", "no rows", "0 / 0"),
    ("statements", "expect_column_values_to_be_in_set", "no rows", "0 / 0"),
    ("raw_games", "expect_column_values_to_not_be_null", "passed", "0 / 540"),
    ("copied_games", "expect_table_row_count_to_equal", "passed", "0 / 0"),
    ("dbt_tests", "unique_fct_games_game_id", "passed", "0 failing"),
    ("dbt_tests", "not_null_fct_games_study", "FAILED", "3 failing"),
    ("raw_players", "expect_column_values_to_be_in_set", "FAILED", "0 / 0"),
])
def test_each_result_says_what_it_checked(suite: str, expectation: str, badge: str, count: str) -> None:
    cells = _cells()[(suite, expectation)]
    assert cells[0] == badge and cells[5] == count, cells


def test_the_first_line_and_the_chart_count_the_expectations_that_checked_nothing() -> None:
    html = _page()
    lead = re.sub(r"<[^>]+>", "", html.split('class="lead"', 1)[1].split("</p>", 1)[0])
    assert "5 of 7 expectations passed, 2 of them with no rows to check" in " ".join(lead.split())
    assert "beliefs, statements" in lead
    [chart] = _built().charts
    data = chart.spec["datasets"][chart.spec["data"]["name"]]
    charted = {(d["suite"], d["outcome"]): d["expectations"] for d in data}
    assert charted[("beliefs", "no rows")] == 1 and charted[("raw_games", "passed")] == 1
    assert "no rows" in chart.spec["encoding"]["color"]["scale"]["domain"]
