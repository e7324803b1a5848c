"""The suite's own setting (tests/conftest.py `_machine_records`): builds in tests/transform and tests/quality, and
the commands their tests start, keep and replay the session's machine records, but in a test marked
`dbt_runs_each_build`."""

from __future__ import annotations

import pytest

from mafiabench.transform.build import replay
from support.processes import cli_env


def test_a_build_here_keeps_the_machines_records() -> None:
    assert replay._cache_on()
    assert cli_env()["MAFIABENCH_REPLAY_CACHE"] == "1"


@pytest.mark.dbt_runs_each_build
def test_a_marked_test_keeps_none() -> None:
    assert not replay._cache_on()
    assert cli_env()["MAFIABENCH_REPLAY_CACHE"] == "0"
