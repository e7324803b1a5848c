"""The Prefect flow, once, on the demo experiment: shard tasks, landing, the summary artifact.

The logic is tested without Prefect (test_study.py); this checks the wiring, on Prefect's test harness (the session's
`prefect_harness`, tests/conftest.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]

def _flow_module() -> Any:
    from mafiabench.commands.run import flow_module

    return flow_module()


@pytest.mark.slow
def test_demo_flow_lands_every_game_and_publishes_a_summary(prefect_harness: None, tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from mafiabench.study.design import expand
    from mafiabench.study.spec import load_experiment

    demo = ROOT / "experiments" / "demo.toml"
    warehouse = tmp_path / "w.duckdb"
    module = _flow_module()
    dashboards = tmp_path / "dashboards"
    summary = asyncio.run(
        module.study_flow(
            experiment_path=str(demo),
            warehouse=str(warehouse),
            progress=False,
            publish=True,
            dashboards=str(dashboards),
        )
    )

    planned = {g.game_id for g in expand(load_experiment(demo))}
    assert summary.orchestrator == "prefect" and summary.status == "completed-with-failures"
    assert summary.games_played == len(planned) and summary.games_failed > 0
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        ids = [r[0] for r in con.execute("select game_id from raw_games").fetchall()]
        (orchestrator,) = con.execute("select orchestrator from raw_runs").fetchone() or ("",)
        (published,) = con.execute("select published from build_runs").fetchone() or (False,)
    finally:
        con.close()
    assert sorted(ids) == sorted(planned) and orchestrator == "prefect"
    # the flow's last steps: marts built behind the quality gate, then the dashboards rendered from them
    assert published is True
    assert (dashboards / "index.html").is_file() and (dashboards / "capability-deceive.html").is_file()

    async def artifact() -> Any:
        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["mafiabench-run-demo"]))
            )
            return found[0] if found else None

    art = asyncio.run(artifact())
    assert art is not None and art.type == "markdown"
    assert summary.run_id in art.data and "games planned" in art.data and "## Per cell" in art.data
