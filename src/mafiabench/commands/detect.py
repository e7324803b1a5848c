"""`mafiabench detect [EXPERIMENT]`: run the Mafia Detector over the warehouse's games and land its answers.

With an experiment file, its `[detector]` section says which detector reads which games (and its `[[imports]]`
are imported first); without one, `--model` and `--source` say it. Through the Prefect flow
`mafiabench.flows.detect` on Prefect's temporary local server, or `--no-prefect`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from mafiabench.commands import command

HINT = "interrupted: the detections landed so far are kept; run the same command again to resume"


def register(app: typer.Typer) -> None:
    command(
        app,
        "detect",
        short_help="run the Mafia Detector on landed games (each day cut) and land its answers",
        help="For each finished game and each day cut 1..last day, build the cleansed transcript (public day "
        "messages, votes and eliminations; roles redacted; night chat and private events dropped), ask each "
        "detector to name the k mafiosos, and land the answers in raw_detections, once per (game, cut, detector, "
        "prompt hash): re-running asks only what is missing. Detectors: provider/model (an LLM, temperature "
        "recorded) or the offline policy/most-voted and policy/random. Exits 1 when a detection failed for good "
        "(it is asked again next run).",
    )(main)


def main(
    experiment: Annotated[
        Path | None,
        typer.Argument(help="experiment file with a [detector] section (and optional [[imports]])", show_default=False),
    ] = None,
    warehouse: Annotated[
        Path | None, typer.Option(help="DuckDB file (default: the experiment's, else warehouse/mafiabench.duckdb)",
                                  show_default=False),
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="a detector (repeatable): provider/model, policy/most-voted or policy/random; "
                     "overrides the experiment's [detector]", show_default=False),
    ] = None,
    source: Annotated[
        list[str] | None,
        typer.Option("--source", help="only games of this source (repeatable): simulation, ibraheem2022-human, "
                     "llmafia, ... (default: all)", show_default=False),
    ] = None,
    prompt_version: Annotated[str, typer.Option(help="detector prompt version (with --model)")] = "v1",
    prompt_file: Annotated[
        Path | None,
        typer.Option(help="your own detector prompt ($players $k $cut $transcript; with --model)", show_default=False),
    ] = None,
    temperature: Annotated[float, typer.Option(help="detector temperature (with --model)")] = 0.0,
    max_cut: Annotated[
        int | None, typer.Option(help="cut after at most this many days (default: every day)", show_default=False)
    ] = None,
    include_invalid: Annotated[
        bool, typer.Option("--include-invalid", help="also games flagged invalid (with --model)")
    ] = False,
    no_prefect: Annotated[bool, typer.Option("--no-prefect", help="run without Prefect (same steps)")] = False,
    publish: Annotated[
        bool, typer.Option("--publish", help="then rebuild the marts behind the quality gate and render dashboards")
    ] = False,
    dashboards: Annotated[
        Path | None,
        typer.Option(help="dashboards folder (with --publish; default: the warehouse's own)", show_default=False),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="replace a dashboards folder that shows another warehouse's pages")
    ] = False,
    json_: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> int:
    from mafiabench.detect.detection_runs import DetectorSpec, DetectReport, make_detectors
    from mafiabench.errors import UserError
    from mafiabench.redact import install_log_scrubber

    install_log_scrubber()
    spec: DetectorSpec | None = None
    if model:
        try:
            spec = DetectorSpec(models=tuple(model), prompt_version=prompt_version, temperature=temperature,
                                prompt_file=None if prompt_file is None else str(prompt_file),
                                sources=tuple(source) if source else None, max_cut=max_cut,
                                valid_only=not include_invalid)
        except ValueError as exc:
            raise UserError(f"mafiabench detect: {exc}") from None
    elif experiment is None:
        raise UserError("mafiabench detect: give an experiment file with a [detector] section, or --model")
    elif source or max_cut is not None or prompt_file is not None:
        raise UserError("mafiabench detect: --source, --max-cut and --prompt-file go with --model; with an experiment "
                        "file, set them in its [detector] section (imported = [...], max_cut = N, prompt_file = ...)")
    from mafiabench.flows.pipeline import after_landing, detect, import_sources
    from mafiabench.study.spec import load_experiment

    exp = load_experiment(experiment) if experiment is not None else None
    if exp is not None and spec is None and exp.detector is None:
        raise UserError(f"{experiment}: no [detector] section; add one (models = [...], simulated = true, "
                        "imported = [...]) or give --model")
    wh = warehouse or (exp.warehouse_path() if exp is not None else None)
    from mafiabench.warehouse.raw import DEFAULT_WAREHOUSE

    wh = Path(wh or DEFAULT_WAREHOUSE)
    endpoints = exp.endpoint_configs() if exp is not None else None
    make_detectors(spec or exp.detector_spec(), endpoints)  # type: ignore[union-attr]  # unknown provider, key
    if not wh.is_file() and not (exp is not None and exp.imports):
        raise UserError(f"warehouse {wh} not found: run an experiment or import games first (or give --warehouse)")
    lines: list[str] = []
    from mafiabench.detect.detection_runs import listening
    from mafiabench.study.progress import CountProgress

    bar = CountProgress("detect", "detections")
    if no_prefect:
        with bar, listening(bar):
            if spec is None:
                lines, rep = asyncio.run(after_landing(exp, wh))
                assert rep is not None
            else:
                lines = import_sources(exp, wh) if exp is not None else []
                rep = asyncio.run(detect(spec, wh, endpoints=endpoints,
                                         cache_dir=exp.cache_dir if exp is not None else None))
                lines.append("detect: " + rep.to_text())
        report: dict[str, Any] = rep.to_dict()
        if publish:
            from mafiabench import publish as publishing

            lines.append(publishing.build(wh).summary())
            lines.append(publishing.render(wh, dashboards, force=force).summary())
    else:
        from mafiabench.commands import Interrupt
        from mafiabench.commands.run import prefect_settings, quiet_prefect
        from mafiabench.warehouse.landing import warehouse_lock

        quiet_prefect(verbose=False)
        try:
            with Interrupt(HINT) as interrupt, warehouse_lock(wh, what="mafiabench detect", share=True), bar, \
                    listening(bar):
                prefect_settings()
                from mafiabench.flows.detect import detect_flow

                report = interrupt.run(detect_flow(experiment_path=None if experiment is None else str(experiment),
                                                   warehouse=str(wh), spec=spec, publish=publish,
                                                   dashboards=None if dashboards is None else str(dashboards),
                                                   force=force))
        except KeyboardInterrupt:  # the hint is printed
            return 130
        lines = [*report.pop("imports", []), "detect: " + DetectReport(**report).to_text()]
    if json_:
        print(json.dumps(report, indent=1, default=str))
    else:
        print("\n".join(lines))
    return 1 if report["failed"] else 0
