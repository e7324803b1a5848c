"""Strategema's tables: hand-checked table pivots, and the offline study of experiments/strategema_offline.toml
producing every table and its dashboard page (the browser test opens that page too)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from mafiabench.dashboards.pages.strategema import ABLATIONS, cross_checks, exports, table1, table2, table3
from support.records import rows
from support.strategema import UNIFORM, offline_study


def conf(n: int, m: int, configuration: str, k: int, games: int, main_arm: bool = True) -> dict[str, Any]:
    p = k / games
    return {"n_players": n, "n_mafia": m, "mafia_ratio": m / n, "configuration": configuration, "n": games, "k": k,
            "mafia_win_rate": p, "standard_error": math.sqrt(p * (1 - p) / games), "is_main_arm": main_arm,
            "town_win_rate": 1 - p}


def test_tables_pivot_the_configurations_as_the_paper_lays_them_out() -> None:
    rows_ = [conf(6, 2, "baseline", 3, 4), conf(8, 2, "baseline", 1, 4), conf(8, 2, "no_speaking", 3, 4),
             conf(8, 2, "argmax_voting", 2, 4), conf(8, 2, "limited_memory", 0, 4), conf(10, 3, "no_speaking", 1, 2),
             conf(6, 2, "baseline", 1, 2, main_arm=False), conf(8, 2, "no_speaking", 0, 2, main_arm=False)]
    assert [(r["n_players"], r["n_mafia"]) for r in table1(rows_)] == [(6, 2), (8, 2)]
    (t2,) = table2(rows_)  # only (8, 2) has both in the main arm; (10, 3) has no baseline
    # with: 1/4, se = sqrt(0.25 * 0.75 / 4) = 0.2165; without: 3/4, same se. The paper's sign: without - with.
    assert t2["reduction"] == pytest.approx(0.5)
    assert t2["reduction_se"] == pytest.approx(math.sqrt(2 * 0.25 * 0.75 / 4))
    setting, t3 = table3(rows_)
    assert setting == (8, 2)
    assert [r["configuration"] for r in t3] == ["baseline", "no_speaking", "argmax_voting", "limited_memory"]
    assert table3([]) == (None, [])
    assert table3([conf(6, 2, "baseline", 3, 4), conf(8, 2, "baseline", 1, 4)]) == (None, [])  # no ablation played
    (check,) = cross_checks(rows_)
    assert (check["mafia_win_rate"], check["main"]["mafia_win_rate"]) == (0.5, 0.75)


def test_the_paper_published_table_2_reductions_follow_its_sign() -> None:
    """Table 2 of the paper, (6, 2): 69.0% with, 80.0% without, reduction 11.0 (positive)."""
    (t2,) = table2([conf(6, 2, "baseline", 69, 100), conf(6, 2, "no_speaking", 80, 100)])
    assert t2["reduction"] == pytest.approx(0.11)
    tables = exports(table1([conf(6, 2, "baseline", 69, 100)]), [t2], [])
    # the binomial error sqrt(.69 * .31 / 100) = 4.62 points; the paper prints 2.1
    assert tables["table1"] == [{"players_n": 6, "mafia_m": 2, "ratio_r": 0.333, "mafia_win_rate_pct": 69.0,
                                 "std_error_pct": 4.62, "villager_win_rate_pct": 31.0, "games": 100}]
    # the reduction's se: sqrt(.69 * .31 + .8 * .2) / 10 = 6.11 points
    assert list(tables["table2"][0].values()) == [6, 2, 0.333, 69.0, 80.0, 11.0, 6.11, 100, 100]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, float]:
    return offline_study(tmp_path_factory)


def test_the_offline_study_produces_every_table(study: tuple[Path, Path, float]) -> None:
    import duckdb

    db, out, seconds = study
    con = duckdb.connect(str(db), read_only=True)
    configs = rows(con, "select model, n_players, n_mafia, configuration, n, is_main from mart_classic_configurations "
                        "where study = 'strategema-offline'")
    main = {(r["n_players"], r["n_mafia"], r["configuration"]) for r in configs if r["model"] == "fake/strategist"}
    assert main == {
        (6, 2, "baseline"), (8, 2, "baseline"), (10, 3, "baseline"), (12, 3, "baseline"),
        (6, 2, "no_speaking"), (8, 2, "no_speaking"), (10, 3, "no_speaking"), (12, 3, "no_speaking"),
        (8, 2, "argmax_voting"), (8, 2, "limited_memory")}
    cross = {(r["n_players"], r["n_mafia"]) for r in configs if r["model"] == "fake/cross-check"}
    assert cross == {(6, 2), (12, 3)}
    assert all(r["n"] == 2 for r in configs)
    assert {(r["n_players"], r["n_mafia"]) for r in configs if r["is_main"]} == {(6, 2), (8, 2), (10, 3), (12, 3)}
    tests = {(r["comparison"], r["unit"]): r
             for r in rows(con, "select * from mart_consistency_tests where study = 'strategema-offline'")}
    assert set(tests) == {("winners_vs_losers", "player"), ("winners_vs_losers", "game"), ("mafia_only", "player")}
    players = tests[("winners_vs_losers", "player")]
    assert players["n_winners"] > 1 and players["n_losers"] > 1
    assert players["df"] == players["n_winners"] + players["n_losers"] - 2  # pooled
    assert rows(con, "select sum(n_belief_answers) as n from mart_belief_fallbacks")[0]["n"] > 0
    page = (out / "strategema.html").read_text(encoding="utf-8")
    for heading in ("Table 1: Mafia win rates by game configuration", "Table 2: Mafia win rates with and without",
                    "Table 3: Ablations on the 8-player, 2-Mafia configuration", "Cross-check models",
                    "winners against losers", "Semantic coherence", "cut by their token cap",
                    "outside benchmarks", "This is not the paper's formula", "and then says nothing",
                    "Protocol card: strategema-offline against Strategema (multi-night belief protocol)"):
        assert heading in page, heading
    # Beside the paper's standard error, which is 0 at a rate of 0% or 100% whatever the games, a Wilson interval:
    # two games a configuration leave each one wide.
    table1_html = page.split("Table 1: Mafia win rates by game configuration", 1)[1].split("</table>", 1)[0]
    wilson = re.findall(r"\[(\d+\.\d)%, (\d+\.\d)%\]", table1_html)
    assert len(wilson) == 4 and all(float(hi) - float(lo) > 30 for lo, hi in wilson), wilson
    for table in ("Table 3: Ablations", "Cross-check models"):
        assert "Wilson 95%" in page.split(table, 1)[1].split("</table>", 1)[0], table
    # Classic games hold several villagers in a final discussion: the biases page sets the sd with the game as the
    # unit beside the players' Beta sd, for the rows whose games hold several of their players. Hand-computed here
    # from the players: p = K / N, sd = sqrt(G / (G - 1) * sum_g (k_g - p m_g)^2) / N.
    per_game: dict[str, list[int]] = {}
    for game_id, won in con.execute(
        "select game_id, won::int from fct_player_games where study = 'strategema-offline' and is_scored and "
        "had_discussion and active_in_final_discussion and role = 'villager' and not spoke_last"
    ).fetchall():
        per_game.setdefault(game_id, []).append(won)
    n, k = sum(len(v) for v in per_game.values()), sum(sum(v) for v in per_game.values())
    g = len(per_game)
    sd = math.sqrt(g / (g - 1) * sum((sum(v) - k / n * len(v)) ** 2 for v in per_game.values())) / n
    assert n > g  # several villagers a game
    biases = (out / "biases.html").read_text(encoding="utf-8")
    unit = biases.split("Study strategema-offline", 1)[1].split('class="last-speaker-unit"', 1)[1].split("</table>")[0]
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", unit, re.S) if "villager" in r and "did not speak" in r)
    assert f"<td class=num>{n}</td><td class=num>{g}</td>" in row and f"{100 * sd:.1f}%" in row, row
    table2 = (out / "strategema.strategema-offline.table2.csv").read_text().splitlines()
    assert len(table2) == 1 + 4  # a header and the four configurations, as the paper's Table 2
    table1 = (out / "strategema.strategema-offline.table1.csv").read_text().splitlines()
    assert [line.split(",")[:2] for line in table1[1:]] == [["6", "2"], ["8", "2"], ["10", "3"], ["12", "3"]]
    table3 = (out / "strategema.strategema-offline.table3.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in table3[1:]] == list(ABLATIONS)
    print(f"offline Strategema study ({sum(r['n'] for r in configs)} games) played, built, gated and rendered in "
          f"{seconds:.1f} s")


def test_deception_comes_from_the_vote_distributions_on_the_offline_study(study: tuple[Path, Path, float]) -> None:
    """classic/v4 asks what the appendix asks, the vote distribution only; D_i is computed from it (section 3.2),
    and the P(mafia) extension's D is empty (issue 35 item 3)."""
    import duckdb

    con = duckdb.connect(str(study[0]), read_only=True)
    got = rows(con, """select count(*) as n, min(deception_score) as lo, max(deception_score) as hi,
                              count(deception_score_mafia_probability) as suspected
                       from mart_deception_scores where study = 'strategema-offline'""")[0]
    assert got["n"] > 20 and 0 <= got["lo"] < got["hi"] <= 1 and got["suspected"] == 0
    asked = rows(con, """select count(*) as n from stg_beliefs as b inner join mart_classic_games as g using (game_id)
                         where g.study = 'strategema-offline' and b.mafia_probability is not null""")[0]
    assert asked["n"] == 0  # no prompt of the study asked P(mafia)


def test_uniform_beliefs_give_the_value_the_definition_implies_at_every_size(
    study: tuple[Path, Path, float]
) -> None:
    """The P(mafia) extension's D: villagers who ignore all evidence, P(mafia) = M / (N - 1) for every other player on
    every day, give every mafioso 1 - M / (N - 1): 0.6, 0.714, 0.667, 0.727 for (6, 2) (8, 2) (10, 3) (12, 3). It
    follows the mafia ratio, not N: at (10, 3) it is lower than at (8, 2). The published D_i, from the vote
    distribution's uniform answer, is 1 - 1/(alive - 1) on each day: it rises with N by construction."""
    import duckdb

    con = duckdb.connect(str(study[0]), read_only=True)
    got = rows(con, """select g.n_players, g.n_mafia, min(d.deception_score_mafia_probability) as lo,
                              max(d.deception_score_mafia_probability) as hi, count(*) as mafiosos,
                              min(d.deception_score) as vote_lo
                       from mart_deception_scores as d inner join mart_classic_games as g on g.game_id = d.game_id
                       where d.study = ? group by all order by g.n_players""", [UNIFORM])
    assert [(r["n_players"], r["n_mafia"]) for r in got] == [(6, 2), (8, 2), (10, 3), (12, 3)]
    for r in got:
        expected = 1 - r["n_mafia"] / (r["n_players"] - 1)
        assert r["lo"] == pytest.approx(expected, abs=1e-6) and r["hi"] == pytest.approx(expected, abs=1e-6), r
    values = [r["lo"] for r in got]
    assert values[2] < values[1]  # not monotone in N
    # the published D_i, from the vote distributions, is there beside it, and is what the configuration table averages
    assert all(0 < r["vote_lo"] < 1 for r in got)
    tables = {r["n_players"]: r["mean_deception_score"] for r in rows(
        con, "select n_players, mean_deception_score from mart_classic_configurations where study = ?", [UNIFORM])}
    means = {r["n_players"]: r["d"] for r in rows(
        con, """select g.n_players, avg(d.deception_score) as d from mart_deception_scores as d
                inner join mart_classic_games as g on g.game_id = d.game_id where d.study = ? group by all""",
        [UNIFORM])}
    assert tables == {n: pytest.approx(d) for n, d in means.items()}


def test_two_studies_in_one_warehouse_give_two_sets_of_tables(study: tuple[Path, Path, float]) -> None:
    import duckdb

    db, out, _ = study
    con = duckdb.connect(str(db), read_only=True)
    games = {r["study"]: r["n"] for r in rows(
        con, "select study, sum(n) as n from mart_classic_configurations group by study")}
    assert games == {"strategema-offline": 24, UNIFORM: 4}
    assert {r["study"] for r in rows(con, "select study from mart_consistency_tests")} <= set(games)
    page = (out / "strategema.html").read_text(encoding="utf-8")
    assert page.count("<h2>Study ") == 2 and 'href="#study-strategema-uniform"' in page
    uniform = (out / f"strategema.{UNIFORM}.table1.csv").read_text().splitlines()
    assert [line.split(",")[-1] for line in uniform[1:]] == ["1", "1", "1", "1"]  # its own games, not pooled
    offline = (out / "strategema.strategema-offline.table1.csv").read_text().splitlines()
    assert [line.split(",")[-1] for line in offline[1:]] == ["2", "2", "2", "2"]
    # the uniform study played neither the no-speaking condition nor an ablation: no Table 2 or 3 to export
    assert not any((out / f"strategema.{UNIFORM}.table{n}.csv").exists() for n in (2, 3))
