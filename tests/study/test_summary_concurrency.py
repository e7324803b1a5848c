"""The run summary's achieved concurrency (issue 31 item 7): a run that played nothing (a re-run, everything
landed) printed "achieved concurrency 0.0 games", as if the run had been starved; now it says no game was played,
and a played run shows its measured figures."""

from __future__ import annotations

from datetime import UTC, datetime

from mafiabench.study.summary import RunSummary


def summary(**kw: object) -> RunSummary:
    return RunSummary(run_id="r", experiment="x", orchestrator="local", warehouse="w.duckdb",
                      started_at=datetime(2026, 1, 1, tzinfo=UTC), **kw)  # type: ignore[arg-type]


def line(text: str) -> str:
    (found,) = [ln for ln in text.splitlines() if "achieved concurrency" in ln]
    return found


def test_a_run_with_nothing_to_play_says_so() -> None:
    s = summary(games_planned=20, games_already_landed=20)
    assert "none: no game was played" in line(s.text()) and "0.0" not in line(s.text())
    assert "none: no game was played" in line(s.markdown())


def test_a_played_run_shows_games_and_calls_in_flight() -> None:
    s = summary(games_planned=8, games_played=8, games_done=8, play_wall_s=2.0, games_concurrency=3.25,
                calls_concurrency=7.5)
    assert line(s.text()).rstrip().endswith("3.2 games, 7.5 calls in flight")


def test_a_played_run_without_busy_time_is_not_reported_as_zero() -> None:
    s = summary(games_planned=8, games_played=8, games_done=8, play_wall_s=2.0)
    assert "not measured" in line(s.text()) and "0.0 games" not in s.text()
