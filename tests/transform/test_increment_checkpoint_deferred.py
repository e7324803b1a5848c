"""An incremental build keeps DuckDB's checkpoint threshold raised while its Python models and gate run
(`marts.deferred_checkpoints`), so the one checkpoint comes at the publish; the threshold the connection had is back
afterwards, after a refused build too, and a whole build's gate runs with it unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from mafiabench import publish
from mafiabench.transform.build.marts import BUILD_CHECKPOINT_THRESHOLD
from support.gate_increments import build, copy


def _threshold(con: duckdb.DuckDBPyConnection) -> str:
    return str(con.execute("select current_setting('checkpoint_threshold')").fetchall()[0][0])


def _heard_in_gate(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    heard: list[str] = []
    gate = publish._gate

    def spy(con: duckdb.DuckDBPyConnection, *args: Any, **kwargs: Any) -> Any:
        heard.append(_threshold(con))
        return gate(con, *args, **kwargs)

    monkeypatch.setattr(publish, "_gate", spy)
    return heard


@pytest.mark.parametrize("refused", [False, True], ids=["published", "refused"])
def test_the_increments_gate_runs_without_checkpoints_and_the_threshold_comes_back(
        landed_increment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused: bool) -> None:
    heard = _heard_in_gate(monkeypatch)
    con = copy(landed_increment, tmp_path)
    try:
        con.execute("set global checkpoint_threshold = '32MiB'")
        if refused:
            con.execute("update raw_players set role = 'wizard' where game_id = (select min(game_id) from raw_games "
                        "where game_id not in (select game_id from fct_games))")
        result = build(con)
        assert any(m.materialized == "incremental" for m in result.models)
        assert result.published is not refused
        expected = duckdb.connect().execute(f"set checkpoint_threshold = '{BUILD_CHECKPOINT_THRESHOLD}'; "
                                            "select current_setting('checkpoint_threshold')").fetchall()[0][0]
        assert heard == [expected]
        assert _threshold(con) == "32.0 MiB"  # the connection's own, back
    finally:
        con.close()


def test_a_whole_builds_gate_keeps_the_threshold(landed_increment: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    heard = _heard_in_gate(monkeypatch)
    con = copy(landed_increment, tmp_path)
    try:
        con.execute("set global checkpoint_threshold = '32MiB'")
        assert build(con, full_refresh=True).published
        assert heard == ["32.0 MiB"] and _threshold(con) == "32.0 MiB"
    finally:
        con.close()
