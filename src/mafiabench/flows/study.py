"""The study flow: a table of contents over `mafiabench.study`, where all the logic lives (and is tested).

    expand → skip landed → fan out shard tasks → land each shard → summary artifact
    → [[imports]] datasets → [detector] (the Mafia Detector)
    → (publish=True) build marts + quality gate → render dashboards

Run once (on the local Prefect server the runs share, `mafiabench.prefect_server`), or serve on a schedule (a real
Prefect server: PREFECT_API_URL's, or one `serve` starts for as long as it serves); the commands are the entry points:

    mafiabench run experiments/demo.toml
    mafiabench serve experiments/demo.toml --cron "0 3 * * *" --timezone Europe/Berlin --publish
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from prefect import Flow, flow, get_run_logger, task
from prefect.artifacts import acreate_markdown_artifact
from prefect.cache_policies import NO_CACHE

from mafiabench.detect.detection_runs import DetectReport
from mafiabench.flows.tasks import build_marts, detect_games, import_dataset, render_dashboards
from mafiabench.redact import install_log_scrubber
from mafiabench.study.plan import Shard, ShardResult, is_infrastructure_fault
from mafiabench.study.run import Study
from mafiabench.study.spec import load_experiment
from mafiabench.study.summary import RunSummary


class StudyIncomplete(RuntimeError):
    """Some shards failed for good (after their retries): the flow run fails, the summary still says what landed."""

    def __init__(self, summary: RunSummary) -> None:
        super().__init__(f"{len(summary.shard_errors)} shard(s) failed: {summary.shard_errors[0]}")
        self.summary = summary


async def _retry_infrastructure_only(task: Any, task_run: Any, state: Any) -> bool:
    """Model failures are inside game records; only I/O and connection faults are worth replaying a shard."""
    exc = state.data if isinstance(state.data, BaseException) else await state.aresult(raise_on_failure=False)
    return isinstance(exc, BaseException) and is_infrastructure_fault(exc)


@task(
    name="play-shard",
    task_run_name="shard-{shard.index}",
    retries=2,
    retry_delay_seconds=[1, 5],
    retry_condition_fn=_retry_infrastructure_only,
    cache_policy=NO_CACHE,
)
async def play_shard(study: Study, shard: Shard) -> ShardResult:
    """Play a shard's games concurrently; each record is written to the raw folder as it finishes."""
    return await study.play_shard(shard)


@task(name="land-shard", task_run_name="land-{result.index}", cache_policy=NO_CACHE)
async def land_shard(study: Study, result: ShardResult) -> dict[str, int]:
    """Load a shard's records into DuckDB (the run's one writer)."""
    r = await study.land_shard(result)
    return {"inserted": r.inserted, "replaced": r.replaced, "skipped": r.skipped}


def _play(study: Study) -> Callable[[Shard], Awaitable[ShardResult]]:
    async def play(shard: Shard) -> ShardResult:
        return await play_shard(study, shard)

    return play


def _land(study: Study) -> Callable[[ShardResult], Awaitable[Any]]:
    async def land(result: ShardResult) -> Any:
        return await land_shard(study, result)

    return land


class _JsonParameterFlow(Flow[Any, Any]):
    """A flow whose parameters are JSON values already (paths, flags, numbers): recorded as they are. Prefect's own
    `serialize_parameters` passes each through FastAPI's `jsonable_encoder`, and importing FastAPI costs a run 0.2 s
    of CPU, a tenth of its fixed cost (BENCHMARKS.md); any other value still goes Prefect's way."""

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        named = {k: f"<Study {v.exp.name}>" if isinstance(v, Study) else v for k, v in parameters.items()}
        if all(isinstance(v, str | int | float | bool | None) for v in named.values()):
            return named
        return super().serialize_parameters(parameters)


# persist_result=False: the summary is returned to the caller and recorded in raw_runs and as an artifact; without
# it Prefect asks the server for a default result storage at every flow run, one request more before the first game.
@flow(name="mafiabench-study", log_prints=False, persist_result=False)
async def study_flow(
    experiment_path: str,
    warehouse: str | None = None,
    progress: bool | None = None,
    publish: bool = False,
    dashboards: str | None = None,
    dask: str | None = None,
    started: float | None = None,
    force: bool = False,
    study: Study | None = None,
    figures: str | None = None,
) -> RunSummary:
    """Play an experiment's missing games and land them; the run summary becomes a markdown artifact. With
    `publish`, then rebuild the marts behind the quality gate and render the dashboards. `started`: when the command
    began (epoch seconds), so the summary's wall time is the whole command's. `study`: the command's own, made from
    the experiment it loaded (and planned already when it plays in worker processes); a scheduled run has none and
    loads the experiment here."""
    install_log_scrubber()  # no known secret in a log line (Prefect stores them in its database)
    logger = get_run_logger()
    if study is None:
        study = Study(load_experiment(experiment_path), warehouse=warehouse, orchestrator="prefect",
                      progress=progress, dask=dask, started=started)
    experiment = study.exp
    with study:
        # expand the design, load landed raw files, skip landed games (done already for a study planned early)
        shards = study.shards if study.planned else study.prepare()
        s = study.summary
        logger.info(
            "%s: %s games planned, %s already landed, %s loaded from the raw folder, %s to play in %s shard(s)",
            experiment.name,
            f"{s.games_planned:,}",
            f"{s.games_already_landed:,}",
            f"{s.games_loaded_from_raw:,}",
            f"{s.games_to_play:,}",
            f"{len(shards):,}",
        )
        await study.fan_out(play=_play(study), land=_land(study))  # shard tasks, a bounded number at a time
        summary = study.finish()  # ledger row in raw_runs
    await acreate_markdown_artifact(
        key=study.artifact_key(), markdown=summary.markdown(), description=f"mafiabench run {summary.run_id}"
    )
    logger.info(
        "%s: %s — %s played (%s failed), %s model calls, %s tokens, $%s, %.1f s",
        experiment.name,
        summary.status,
        f"{summary.games_played:,}",
        f"{summary.games_failed:,}",
        f"{summary.usage.calls:,}",
        f"{summary.usage.tokens:,}",
        f"{summary.usage.cost_usd:,.4f}",
        summary.wall_s,
    )
    if summary.shard_errors:
        raise StudyIncomplete(summary)
    # The experiment's datasets, then its Mafia Detector, on what just landed (both idempotent).
    for source in experiment.imports:
        summary.after.append(import_dataset(source.format, source.path, summary.warehouse, source.study))
    spec = experiment.detector_spec()
    if spec is not None:
        report = await detect_games(spec, summary.warehouse, experiment.endpoint_configs(), experiment.cache_dir)
        summary.after.append("detect: " + DetectReport(**report).to_text())
    for line in summary.after:
        logger.info(line)
    if publish:  # in the printed summary too: the terminal shows Prefect's INFO lines only with --verbose
        for text in (build_marts(summary.warehouse), render_dashboards(summary.warehouse, dashboards, force, figures)):
            logger.info(text)
            summary.after += text.splitlines()
    return summary


study_flow.__class__ = _JsonParameterFlow  # the same flow object (its entrypoint, options), a cheaper method
