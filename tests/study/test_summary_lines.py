"""The run summary's lines a person reads while waiting or stopping (issue 40 item 3): Ctrl-C's line counts the
games kept and those left to play, and a run of the offline fakes says its failures are injected on purpose."""

from __future__ import annotations

from datetime import UTC, datetime

from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.study.summary import RunSummary, injected_faults, latest


def summary(**counts: int) -> RunSummary:
    return RunSummary(run_id="r", experiment="e", orchestrator="none", warehouse="w.duckdb",
                      started_at=datetime(2026, 1, 1, tzinfo=UTC), **counts)


def test_ctrl_c_says_how_many_games_are_kept_and_how_many_remain() -> None:
    # 1,380 planned, 200 landed before this run, 591 finished by it, 3 failed (replayed next time): 791 kept.
    s = summary(games_planned=1380, games_to_play=1180, games_done=591, games_failed=3, games_played=594)
    assert latest() is s
    assert s.interrupted_line() == ("interrupted: 791 of 1,380 planned games kept (landed), 589 to play; run the "
                                    "same command again to resume")


def test_the_fakes_faults_are_said_to_be_expected() -> None:
    faulty = {"fake": EndpointConfig("fake", "fake", options={"p_rate_limit": 0.06, "latency_ms": 5})}
    assert "the fake endpoint(s) fake inject faults on purpose" in injected_faults(faulty)
    assert injected_faults({"fake": EndpointConfig("fake", "fake", options={"latency_ms": 5})}) == ""
    s = summary(games_planned=10, games_to_play=10, games_played=10, games_done=9, games_failed=1)
    s.finished_at = datetime(2026, 1, 1, tzinfo=UTC)
    s.expected = injected_faults(faulty)
    assert "  expected" in s.text() and "inject faults on purpose" in s.text()
    assert "  expected" not in summary().text()
