"""`mafiabench preview <experiment.toml>`: what a run needs (keys, servers, models), the protocol card (every deviation
from the reference the experiment names), cells, games, model calls, tokens and cost, before anything is spent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mafiabench.commands import command


def register(app: typer.Typer) -> None:
    command(
        app,
        "preview",
        short_help="show an experiment's cells, games, calls and a token/cost estimate (no key, no spending)",
        help=(
            "List what a run needs: each API key (set or not), each endpoint (answers, refused, or silent, probed for "
            "a second), each model (priced, deprecated, or unknown, with the closest known names). Refuse in one "
            "line what the run would refuse. Then expand the experiment into cells and games and estimate model "
            "calls, tokens and cost from a few sample games per cell played against an in-process fake of every "
            "model. No model is called and nothing is written."
        ),
    )(main)


def main(
    experiment: Annotated[Path, typer.Argument(help="experiment file (TOML)")],
    warehouse: Annotated[
        Path | None, typer.Option(help="count games already landed in this DuckDB file", show_default=False)
    ] = None,
    samples: Annotated[int, typer.Option(help="sample games per cell for the estimate")] = 3,
    max_cells: Annotated[int, typer.Option(help="cells listed (totals always cover all)")] = 60,
    no_probe: Annotated[
        bool, typer.Option("--no-probe", help="do not probe the endpoints (no network at all)")
    ] = False,
    rating_width: Annotated[
        float, typer.Option(help="the 95% interval width of a rating (logit scale) to say the games needed for")
    ] = 0.5,
) -> int:
    from mafiabench.errors import UserError
    from mafiabench.protocols import render_text
    from mafiabench.study.estimate import estimate_plan, study_needs
    from mafiabench.study.protocol import protocol_card
    from mafiabench.study.spec import load_experiment

    exp = load_experiment(experiment)
    needs = study_needs(exp, probe=not no_probe)
    print(render_needs(needs) + "\n", flush=True)  # first: what to fix before anything else
    if needs.refusals:  # what the run would refuse, whatever the machine: refused now, in one line each
        raise UserError(f"{experiment}: `mafiabench run` would refuse this experiment: " + "; ".join(needs.refusals))
    card = protocol_card(exp)
    if card is not None:  # first: the deviations are what to read before the cost
        print(render_text(card) + "\n")
    est = estimate_plan(exp, warehouse=warehouse, samples=max(1, samples))
    print(render(est, max_cells=max_cells))
    print("\n" + render_ratings(exp, width=rating_width))
    return 0


def render_needs(needs: Any) -> str:
    """Keys, endpoints and models, one line each, then one line of what to do before `mafiabench run`."""
    lines = ["What a run needs on this machine:"]
    w = max([len(k.env) for k in needs.keys] + [len(e.name) for e in needs.endpoints] + [10])
    for k in needs.keys:
        lines.append(f"  key       {k.env:<{w}}  {'set' if k.set else 'MISSING'} (endpoint {', '.join(k.endpoints)})")
    for e in needs.endpoints:
        status = e.status.upper() if e.status in _BAD else e.status
        lines.append(f"  endpoint  {e.name:<{w}}  {status}" + (f" at {e.url}" if e.url else "") + f": {e.detail}")
    for m in needs.models:
        status = m.status.upper() if m.status in ("retired", "unknown") else m.status
        lines.append(f"  model     {m.spec}  {status}{' ' if m.detail.startswith('on ') else ': '}{m.detail}")
    todo = []
    if needs.missing_keys:
        todo.append(f"set {len(needs.missing_keys)} key(s): {', '.join(k.env for k in needs.missing_keys)}")
    local = [e.name for e in needs.silent_endpoints if e.local]
    hosted = [e.name for e in needs.silent_endpoints if not e.local]
    if local:
        todo.append(f"start {len(local)} local server(s) that do not answer: {', '.join(local)}")
    if hosted:
        todo.append(f"reach {len(hosted)} hosted endpoint(s) that do not answer: {', '.join(hosted)}")
    gone = [m.spec for m in needs.models if m.status == "retired"]
    if gone:
        todo.append(f"replace {len(gone)} retired model(s): {', '.join(gone)}")
    lines.append(f"Before `mafiabench run`: {'; '.join(todo)}" if todo else "Everything a run needs is here.")
    return "\n".join(lines)


_BAD = ("refused", "no answer", "unknown host", "unreachable")


def _usd(value: float, unpriced: set[str]) -> str:
    return "unpriced" if unpriced and value == 0 else f"${value:,.2f}" + ("+?" if unpriced else "")


def _usage_line(spec: str, u: Any) -> str:
    """One model's calls, tokens and cost, in the columns of the per-model and detector tables."""
    return (f"  {spec:<50} {u.calls:>9,} calls {u.input_tokens:>13,} in {u.output_tokens:>11,} out "
            f"{_usd(u.cost_usd, u.unpriced):>12}")


def _labels_lines(exp: Any, labels: dict[str, Any], total: Any) -> list[str]:
    """The statement labels' share of the games' calls and cost: the speaker's own label is one call a message,
    the listeners' one a living listener, so they multiply with the players."""
    calls = sum(u.calls for u in labels.values())
    cost = sum(u.cost_usd for u in labels.values())
    unpriced = set().union(*(u.unpriced for u in labels.values()))
    share = (f"{cost / total.cost_usd:.0%} of the cost" if total.cost_usd
             else f"{calls / max(1, total.calls):.0%} of the calls")
    s = exp.statements
    memory = ("; added to the assessors' memories (a deviation: the labels can change the game)" if s.memory
              else "; never in any memory")
    out = [f"Statement labels ([statements]: speaker {'on' if s.speaker else 'off'}, listeners "
           f"{'on' if s.listeners else 'off'}, {s.max_tokens} tokens a label{memory}): {calls:,} calls, "
           f"{_usd(cost, unpriced)}, {share} (included above):"]
    out += [_usage_line(f"labels by the {who}", u) for who, u in sorted(labels.items())]
    return out


def duration(seconds: float) -> str:
    """`45 s`, `12 min`, `3 h 05 min`, `2 d 04 h`: as precise as an estimate deserves."""
    s = round(seconds)
    if s < 1:
        return "under a second of model calls (CPU time not counted)"
    if s < 90:
        return f"about {s} s"
    if s < 5400:
        return f"about {round(s / 60)} min"
    if s < 2 * 86400:
        return f"about {s // 3600} h {round(s % 3600 / 60):02d} min"
    return f"about {s // 86400} d {round(s % 86400 / 3600):02d} h"


def render(est: Any, *, max_cells: int = 60) -> str:
    exp = est.experiment
    landed = "warehouse busy: landed games unknown" if est.landed is None else f"{est.landed:,} already landed"
    lines = [
        f"Experiment {exp.name} — variant {exp.variant}, prompt {exp.prompt_label()}, seed {exp.seed}",
        f"{len(est.cells)} cells, {est.games:,} games ({landed}, {est.to_play:,} to play); "
        f"shards of {exp.shard_size}, {exp.concurrency.games} games in flight",
    ]
    if est.landed is not None and est.games and not est.to_play:
        lines.append(f"Nothing to play: all {est.games:,} games are already landed in {est.warehouse}, so "
                     "`mafiabench run` would play none (raise games_per_cell or add cells to play more)")
    lines += [
        "",
        f"  {'cell':<58} {'capabilities':<24} {'games':>6} {'to play':>8} {'calls/game':>10} "
        f"{'tokens/game':>11} {'est. cost':>10}",
    ]
    for c in est.cells[:max_cells]:
        u = c.usage_per_game
        caps = "+".join(c.cell.capabilities) or "-"
        name = c.cell.name
        if len(name) > 58:  # the full name on its own line, never cut: cells differ at the end of their names
            lines.append(f"  {name}")
            name = ""
        lines.append(
            f"  {name:<58} {caps:<24} {c.games:>6,} {c.to_play:>8,} {c.calls_per_game:>10.1f} "
            f"{u.tokens:>11,} {_usd(c.scaled(c.to_play).cost_usd, u.unpriced):>10}"
        )
    if len(est.cells) > max_cells:
        lines.append(f"  ... and {len(est.cells) - max_cells} more cells (--max-cells)")
    mirrored = [c for c in est.cells if c.cell.mirror_pair]
    if mirrored:
        pairs = len({c.cell.mirror_pair for c in mirrored})
        lines.append(
            f"Mirror pairs: {pairs:,} ({len(mirrored):,} cells, {sum(c.games for c in mirrored):,} games): each pair "
            "of models plays both ways round, game i with the same seed, so the game's asymmetry cancels"
        )
    total = est.total()
    lines += [
        "",
        f"To play: {est.to_play:,} games, about {total.calls:,} model calls, {total.input_tokens:,} input + "
        f"{total.output_tokens:,} output tokens, about {_usd(total.cost_usd, total.unpriced)} "
        f"[prices {est.price_version}]",
    ]
    if exp.stopping is not None:
        rule = exp.stopping.rule()
        worst = rule.worst_case_games()
        lines.append(
            f"Stopping: {rule.describe()}. Each cell plays {rule.min_games:,} to {rule.max_games:,} games; a cell "
            f"whose rate is 1/2 (the widest interval) needs {worst:,}, any other rate fewer, so to play, calls, "
            f"tokens, cost and time above count {worst:,} a cell: an upper bound (a cell at rate 0.1 or 0.9 needs "
            f"about 40% of it)."
        )
    wall = est.wall_time()
    if est.to_play:
        lat = ", ".join(f"{p} {s:g} s ({est.latency_source[p]})"
                        for p, s in sorted(est.latency.items()) if s > 0) or "none: every player is in-process"
        lines.append(f"Wall time: {duration(wall.seconds)}, bound by {wall.limit}; per-call latency: {lat} "
                     "(set concurrency.latency_s to measured latencies)")
    per_model = est.per_model()
    if per_model:
        lines.append("Per model:")
        lines += [_usage_line(spec, u) for spec, u in sorted(per_model.items())]
    labels = est.labels()
    if labels:
        lines += _labels_lines(exp, labels, total)
    detection = est.detection()
    if detection:
        lines.append("Detector, on the games to play (one call per day cut; imported games it reads not counted):")
        lines += [_usage_line(spec, u) for spec, u in sorted(detection.items())]
    if total.unpriced:
        lines.append(f"Unpriced (no row in the price table): {', '.join(sorted(total.unpriced))}")
    b = exp.budget
    if b.active:
        cap = ", ".join(
            x
            for x in (
                f"{b.max_tokens:,} tokens" if b.max_tokens is not None else "",
                f"${b.max_usd:,.2f}" if b.max_usd is not None else "",
            )
            if x
        )
        lines.append(f"Budget cap: {cap} (the run stops starting games when it is reached)")
    lines.append(
        "Estimate: sample games against an in-process fake; output counted at each call's token cap; no cache hits."
    )
    return "\n".join(lines)


RATING_FITS = {"overall": "overall", "sides": "by side", "roles": "by role"}


def planned_line_ups(exp: Any) -> Any:
    """The plan's line-ups: each cell's seats by role (its agent for the role, else its default) and its games;
    None when a cell's seats cannot be named (a variant without a fixed composition, an agent per player name)."""
    from collections import defaultdict

    import numpy as np

    from mafiabench.engine import rules_for
    from mafiabench.engine.core import ROLE_TEAM
    from mafiabench.study.design import expand_cells
    from mafiabench.transform.models.ratings import from_counts

    keys: dict[tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], int] = defaultdict(int)
    for cell in expand_cells(exp):
        composition = getattr(rules_for(exp.variant, cell.rules), "composition", None)
        if not composition:
            return None
        seats: dict[str, list[tuple[str, str]]] = {"mafia": [], "town": []}
        for role, count in composition.items():
            model = cell.agents.get(role, cell.agents.get("default"))
            if model is None:
                return None
            seats[ROLE_TEAM.get(role, "town")] += [(role, model)] * count
        if len({m for side in seats.values() for _, m in side}) > 1:  # self-play is not rated
            keys[(tuple(sorted(seats["mafia"])), tuple(sorted(seats["town"])))] += cell.games
    if not keys:
        return None
    games = np.array(list(keys.values()))
    return from_counts(list(keys), games, np.zeros_like(games))


def render_ratings(exp: Any, *, width: float = 0.5) -> str:
    """What the leaderboard of this plan will rate: the expected 95% interval width of each rating from the design's
    Fisher information at zero strengths (transform.models.ratings.design_widths), narrowest and widest model per fit
    and side or role, the games needed for `width`, and a warning per fit that leaves directions unidentified (the
    prior alone would set them)."""
    from collections import defaultdict

    from mafiabench.transform.models.ratings import design_widths

    data = planned_line_ups(exp)
    if data is None:
        return "Ratings: no line-up of two or more models to rate (or the variant's seats are not fixed)."
    rows, unidentified = design_widths(data, width=width)
    lines = [f"Ratings: expected 95% interval width at zero strengths (logit scale), and the games the design needs "
             f"for a width of {width:g}:"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["fit"], r["side"])].append(r)
    for (kind, side), part in groups.items():
        ok = [r for r in part if r["identified"]]
        if not ok:
            lines.append(f"  {RATING_FITS[kind]:<9} {side:<10} not identified for any of its {len(part)} models")
            continue
        narrow, wide = min(ok, key=lambda r: r["width"]), max(ok, key=lambda r: r["width"])
        need = max(r["games_for_width"] for r in ok)
        lines.append(f"  {RATING_FITS[kind]:<9} {side:<10} {narrow['width']:.2f} ({narrow['model']}) to "
                     f"{wide['width']:.2f} ({wide['model']}); {need:,} games for {width:g}"
                     + (f"; {len(part) - len(ok)} not identified" if len(ok) < len(part) else ""))
    for kind, directions in unidentified.items():
        if directions:
            lines.append(f"warning: the design leaves {len(directions)} direction(s) of the {RATING_FITS[kind]} "
                         "ratings unidentified (the prior alone sets them; those models are not ranked): "
                         + " | ".join(directions))
    return "\n".join(lines)
