"""Preview: what an experiment will play and spend (calls, tokens, cost) before anything is spent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from mafiabench.backends.registry import EndpointConfig
from mafiabench.play.runner import BackendPool, play_game
from mafiabench.prices import PriceTable, Usage, free_providers_of, game_usage, load_prices
from mafiabench.study.design import Cell, PlannedGame, expand_cells, iter_games
from mafiabench.study.spec import Experiment
from mafiabench.warehouse import landing


@dataclass
class CellEstimate:
    cell: Cell
    games: int
    to_play: int
    calls_per_game: float
    usage_per_game: Usage
    per_model_per_game: dict[str, Usage]

    def scaled(self, n: int) -> Usage:
        u = Usage()
        p = self.usage_per_game
        u.calls = round(p.calls * n)
        u.input_tokens = round(p.input_tokens * n)
        u.output_tokens = round(p.output_tokens * n)
        u.cost_usd = p.cost_usd * n
        u.unpriced = set(p.unpriced)
        u.games = n
        return u


@dataclass
class Estimate:
    """What a run would play and spend, before anything is spent."""

    experiment: Experiment
    cells: list[CellEstimate]
    samples: int
    price_version: str
    landed: int | None  # games already landed, None when the warehouse could not be read

    @property
    def games(self) -> int:
        return sum(c.games for c in self.cells)

    @property
    def to_play(self) -> int:
        return sum(c.to_play for c in self.cells)

    def total(self, *, remaining: bool = True) -> Usage:
        t = Usage()
        for c in self.cells:
            t.add(c.scaled(c.to_play if remaining else c.games))
        return t

    def per_model(self, *, remaining: bool = True) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        for c in self.cells:
            n = c.to_play if remaining else c.games
            for spec, u in c.per_model_per_game.items():
                agg = out.setdefault(spec, Usage())
                agg.calls += round(u.calls * n)
                agg.input_tokens += round(u.input_tokens * n)
                agg.output_tokens += round(u.output_tokens * n)
                agg.cost_usd += u.cost_usd * n
                agg.unpriced |= u.unpriced
        return out


def _scale(u: Usage, k: float) -> Usage:
    return Usage(
        calls=round(u.calls * k),
        input_tokens=round(u.input_tokens * k),
        output_tokens=round(u.output_tokens * k),
        cost_usd=u.cost_usd * k,
        unpriced=set(u.unpriced),
    )


def estimate_plan(
    experiment: Experiment,
    *,
    warehouse: str | Path | None = None,
    samples: int = 3,
    prices: PriceTable | None = None,
) -> Estimate:
    """Calls, tokens and cost per cell, from a few sample games per cell played against an in-process fake of
    every model (no key, no network, no money). Input tokens are the fake's estimate of the real prompts (about
    four characters per token); output tokens count each call at its token cap when one is set (what a reply may
    cost at most), else the fake's reply length; cached tokens are taken as zero. So the figure is an upper bound
    for capped models and a rough guide for uncapped (reasoning) ones."""
    exp = experiment
    endpoints = exp.endpoint_configs()
    table = (prices or load_prices()).with_overrides(exp.prices, free_providers_of(endpoints))
    cells = expand_cells(exp)
    plan = list(iter_games(exp, cells))
    landed = _landed_ids_readonly(exp.warehouse_path(warehouse), [g.game_id for g in plan])
    by_cell: dict[str, list[PlannedGame]] = {}
    for g in plan:
        by_cell.setdefault(g.cell.name, []).append(g)
    providers = {s.split("/", 1)[0] for s in exp.agent_specs() if not s.startswith(("policy/", "human/"))}
    fake_endpoints = {p: EndpointConfig(p, "fake") for p in providers}
    models = exp.model_settings()

    async def sample() -> list[CellEstimate]:
        pool = BackendPool(endpoints=fake_endpoints)
        out: list[CellEstimate] = []
        for cell in cells:
            games = by_cell[cell.name]
            picked = games[: max(1, samples)]
            recs = await asyncio.gather(*(play_game(g.spec(exp, models), pool) for g in picked))
            per_game = Usage()
            per_model: dict[str, Usage] = {}
            for rec in recs:
                for call in rec.calls:
                    cap = ((call.get("request") or {}).get("settings") or {}).get("max_tokens")
                    if cap is not None:
                        call["output_tokens"] = int(cap)
                    call["cached_tokens"] = 0
                total, pm = game_usage(rec, table)
                per_game.add(total)
                for spec, u in pm.items():
                    per_model.setdefault(spec, Usage()).add(u)
            k = 1.0 / len(recs)
            to_play = len(games) if landed is None else sum(1 for g in games if g.game_id not in landed)
            out.append(
                CellEstimate(
                    cell=cell,
                    games=len(games),
                    to_play=to_play,
                    calls_per_game=per_game.calls * k,
                    usage_per_game=_scale(per_game, k),
                    per_model_per_game={s: _scale(u, k) for s, u in per_model.items()},
                )
            )
        return out

    return Estimate(exp, asyncio.run(sample()), samples, table.version, None if landed is None else len(landed))


def _landed_ids_readonly(warehouse: Path, ids: list[str]) -> set[str] | None:
    """Finished games already in the warehouse, read-only; None if there is none or a run holds it."""
    if not warehouse.exists():
        return set()
    try:
        import duckdb

        con = duckdb.connect(str(warehouse), read_only=True)
    except Exception:
        return None
    try:
        if not con.execute("select count(*) from information_schema.tables where table_name = 'raw_games'").fetchall()[
            0
        ][0]:
            return set()
        return landing.landing_state(con, ids).finished
    finally:
        con.close()
