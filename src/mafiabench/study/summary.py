"""The run summary: games, calls, tokens, cost, wall time and concurrency, as text, markdown and a `raw_runs` row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mafiabench.prices import Usage

MAX_FAILURES_SHOWN = 50  # failed games kept with their reason in the summary (the rest are only counted)


@dataclass
class RunSummary:
    run_id: str
    experiment: str
    orchestrator: str
    warehouse: str
    started_at: datetime
    finished_at: datetime | None = None
    wall_s: float = 0.0
    play_wall_s: float = 0.0
    games_planned: int = 0
    games_already_landed: int = 0
    games_loaded_from_raw: int = 0
    games_to_play: int = 0
    games_played: int = 0
    games_done: int = 0
    games_failed: int = 0
    games_not_started: int = 0
    budget_stopped: bool = False
    shard_errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    per_cell: dict[str, Usage] = field(default_factory=dict)
    per_model: dict[str, Usage] = field(default_factory=dict)
    budget_spent: Usage = field(default_factory=Usage)
    budget: dict[str, Any] = field(default_factory=dict)
    games_concurrency: float = 0.0
    calls_concurrency: float = 0.0
    price_version: str = ""
    failures: list[tuple[str, str]] = field(default_factory=list)
    description: str = ""
    # Failures the run's own endpoints inject on purpose (the offline fakes' faults), said beside the status.
    expected: str = ""
    # What ran after the games landed (imports, the Mafia Detector), one line each, for the printed summary.
    after: list[str] = field(default_factory=list)
    # With [stopping]: the rule and where each cell stands at its last look (study.stopping.CellLook.to_dict()).
    stopping: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        global _latest
        _latest = self  # what Ctrl-C's line counts (commands.run): the run of this process

    def interrupted_line(self) -> str:
        """Ctrl-C's line: how many planned games are kept (landed finished) and how many remain to play."""
        kept = self.games_planned - self.games_to_play + self.games_done
        if self.stopping or not self.games_planned:  # played in waves: the total is not known in advance
            return (f"interrupted: {kept:,} games kept (landed); run the same command again to resume")
        return (f"interrupted: {kept:,} of {self.games_planned:,} planned games kept (landed), "
                f"{self.games_planned - kept:,} to play; run the same command again to resume")

    def add_game(self, game_id: str, cell: str, usage: Usage, *, failed: bool, error: str | None) -> None:
        """Count one played game: its usage (total and per cell), done or failed, and the first failures' reasons."""
        self.add_games(cell, usage, played=1, failures=[(game_id, error)] if failed else [])

    def add_games(self, cell: str, usage: Usage, *, played: int, failures: list[tuple[str, str | None]]) -> None:
        """Count games of one cell at once (a shard's, for policy games at thousands a second): their usage summed,
        and (game id, error) of those that failed, in the order they were played."""
        self.usage.add(usage)
        self.per_cell.setdefault(cell, Usage()).add(usage)
        self.games_played += played
        self.games_failed += len(failures)
        self.games_done += played - len(failures)
        for game_id, error in failures[: max(0, MAX_FAILURES_SHOWN - len(self.failures))]:
            self.failures.append((game_id, error or "failed"))

    @property
    def status(self) -> str:
        """running | failed | completed-with-failures | budget-stopped | completed (see `exit_code`)."""
        if self.finished_at is None:
            return "running"
        if self.shard_errors or (self.games_played > 0 and self.games_failed == self.games_played):
            return "failed"  # games could not be played, or every game played failed
        if self.games_failed:
            return "completed-with-failures"  # failed games are landed as such and replayed by the next run
        if self.budget_stopped:
            return "budget-stopped"
        return "completed"

    @property
    def exit_code(self) -> int:
        """What `mafiabench run` exits with, so scripts and schedules can tell: 0 completed (or stopped by the
        budget), 3 completed but some games failed, 1 failed."""
        return {"failed": 1, "completed-with-failures": 3}.get(self.status, 0)

    @property
    def games_missing(self) -> int:
        """Planned games neither landed finished nor failed after this run (budget, shard errors)."""
        return self.games_to_play - self.games_played

    @property
    def nothing_to_play(self) -> str:
        """Why a finished run played nothing, in one line naming the warehouse ("" if it played or could have): every
        planned game was already landed there (the summary's counts alone left the reader to work that out)."""
        if self.finished_at is None or self.games_played or self.games_to_play or self.stopping or self.shard_errors:
            return ""
        if not self.games_planned:
            return f"Nothing to play: the experiment plans no games (games_per_cell, cells); {self.warehouse} unchanged"
        raw = f" ({self.games_loaded_from_raw:,} of them landed now from its raw folder)" \
            if self.games_loaded_from_raw else ""
        return (f"Nothing to play: all {self.games_planned:,} planned games are already landed in {self.warehouse}"
                f"{raw}; raise games_per_cell or add cells to play more")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "experiment": self.experiment,
            "orchestrator": self.orchestrator,
            "warehouse": self.warehouse,
            "status": self.status,
            "started_at": self.started_at.isoformat(timespec="seconds"),
            "finished_at": self.finished_at.isoformat(timespec="seconds") if self.finished_at else None,
            "wall_s": round(self.wall_s, 3),
            "play_wall_s": round(self.play_wall_s, 3),
            "games": {
                "planned": self.games_planned,
                "already_landed": self.games_already_landed,
                "loaded_from_raw": self.games_loaded_from_raw,
                "to_play": self.games_to_play,
                "played": self.games_played,
                "done": self.games_done,
                "failed": self.games_failed,
                "not_started": self.games_not_started,
            },
            "budget_stopped": self.budget_stopped,
            "budget": {**self.budget, "spent": self.budget_spent.to_dict()},
            "shard_errors": self.shard_errors,
            "usage": self.usage.to_dict(),
            "per_cell": {k: v.to_dict() for k, v in sorted(self.per_cell.items())},
            "per_model": {k: v.to_dict() for k, v in sorted(self.per_model.items())},
            "games_concurrency": round(self.games_concurrency, 2),
            "calls_concurrency": round(self.calls_concurrency, 2),
            "price_version": self.price_version,
            "failures": [{"game_id": g, "error": e} for g, e in self.failures],
            "stopping": self.stopping,
        }

    def to_row(self) -> dict[str, Any]:
        import json

        u = self.usage
        return {
            "run_id": self.run_id,
            "experiment": self.experiment,
            "orchestrator": self.orchestrator,
            "status": self.status,
            "started_at": self.started_at.replace(tzinfo=None),
            "finished_at": self.finished_at.replace(tzinfo=None) if self.finished_at else None,
            "wall_s": self.wall_s,
            "games_planned": self.games_planned,
            "games_already_landed": self.games_already_landed,
            "games_loaded_from_raw": self.games_loaded_from_raw,
            "games_to_play": self.games_to_play,
            "games_played": self.games_played,
            "games_done": self.games_done,
            "games_failed": self.games_failed,
            "games_not_started": self.games_not_started,
            "budget_stopped": self.budget_stopped,
            "calls": u.calls,
            "failed_calls": u.failed_calls,
            "format_failures": u.format_failures,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cached_tokens": u.cached_tokens,
            "cost_usd": u.cost_usd,
            "unpriced_models": sorted(u.unpriced),
            "price_version": self.price_version,
            "games_concurrency": self.games_concurrency,
            "calls_concurrency": self.calls_concurrency,
            "shard_errors": len(self.shard_errors),
            "summary_json": json.dumps(self.to_dict(), sort_keys=True),
        }

    # -- rendering ---------------------------------------------------------------------------------------------
    def _headline(self) -> list[tuple[str, str]]:
        u = self.usage
        cost = f"${u.cost_usd:,.4f}" + (f" (+ unpriced: {', '.join(sorted(u.unpriced))})" if u.unpriced else "")
        rows = [
            ("experiment", self.experiment),
            ("status", self.status),
            *([("expected", self.expected)] if self.expected and self.games_played else []),
            ("games planned", f"{self.games_planned:,}"),
            ("skipped (already landed)", f"{self.games_already_landed:,}"),
            ("loaded from raw folder", f"{self.games_loaded_from_raw:,}"),
            ("played", f"{self.games_played:,} ({self.games_done:,} done, {self.games_failed:,} failed)"),
            ("not started (budget)", f"{self.games_not_started:,}"),
            (
                "model calls",
                f"{u.calls:,} ({u.failed_calls:,} failed, {u.format_failures:,} format failures, "
                f"{u.attempts - u.calls:,} retry attempts)",
            ),
            # The cost page's words for the same counts: model calls, failed calls, format failures, retry
            # attempts, input tokens (cached input tokens among them), output tokens, cost.
            ("tokens", f"{u.input_tokens:,} input ({u.cached_tokens:,} cached) + {u.output_tokens:,} output"),
            ("cost", f"{cost}  [prices {self.price_version}]"),
            ("wall time", f"{self.wall_s:.1f} s (playing {self.play_wall_s:.1f} s)"),
            ("achieved concurrency", self._concurrency_text()),
        ]
        if self.budget:
            spent = self.budget_spent
            cap = ", ".join(
                f"${v:,.2f}" if k == "max_usd" else f"{v:,} tokens" for k, v in sorted(self.budget.items())
            )
            rows.append(
                (
                    "budget",
                    f"cap {cap}; the experiment has spent {spent.tokens:,} tokens, ${spent.cost_usd:,.4f}"
                    + (" — STOPPED at the cap" if self.budget_stopped else ""),
                )
            )
        if self.shard_errors:
            rows.append(("shard errors", f"{len(self.shard_errors)}: {self.shard_errors[0][:200]}"))
        if self.stopping:
            cells = self.stopping.get("cells", {}).values()
            states = {st: sum(1 for c in cells if c["state"] == st) for st in ("width", "max", "continue")}
            rows.append(("stopping rule", str(self.stopping.get("description", ""))))
            rows.append(
                (
                    "stopped cells",
                    f"{states['width']} narrow enough, {states['max']} at max_games, {states['continue']} still open",
                )
            )
        return rows

    def _concurrency_text(self) -> str:
        """Games and calls in flight on average while playing; a run that played nothing says so (it printed
        "0.0 games", as if the run had been starved)."""
        if not self.games_played:
            return "none: no game was played"
        if self.games_concurrency <= 0:
            return "not measured (the games' busy time was not reported)"
        return f"{self.games_concurrency:.1f} games, {self.calls_concurrency:.1f} calls in flight"

    def _cell_rows(self, limit: int) -> list[tuple[str, Usage]]:
        rows = sorted(self.per_cell.items())
        return rows[:limit]

    def text(self, max_cells: int = 30) -> str:
        lines = [f"Run {self.run_id} — {self.warehouse}"]
        if self.nothing_to_play:
            lines.append(self.nothing_to_play)
        width = max(len(k) for k, _ in self._headline())
        lines += [f"  {k:<{width}}  {v}" for k, v in self._headline()]
        if self.per_cell:
            lines.append("  per cell (this run):")
            for name, u in self._cell_rows(max_cells):
                lines.append(
                    f"    {name[:60]:<60} {u.games:>6,} games {u.failed_games:>4,} failed {u.calls:>7,} calls "
                    f"{u.tokens:>10,} tokens ${u.cost_usd:,.4f}"
                )
            if len(self.per_cell) > max_cells:
                lines.append(f"    ... and {len(self.per_cell) - max_cells} more cells")
        if self.stopping:
            lines.append("  per cell at its last look (mafia win rate, interval):")
            for name, c in sorted(self.stopping.get("cells", {}).items())[:max_cells]:
                lines.append(
                    f"    {name[:60]:<60} {c['games']:>6} games {c['k']:>6}/{c['n']:<6} "
                    f"[{c['lower']:.3f}, {c['upper']:.3f}] ±{c['half_width']:.3f} {c['state']}"
                )
        if self.failures:
            lines.append("  failed games (first few):")
            for gid, err in self.failures[:5]:
                lines.append(f"    {gid}: {err.splitlines()[0][:160]}")
        lines += ["  then: " + line.replace("\n", "\n    ") for line in self.after]  # a step's own lines indented
        return "\n".join(lines)

    def markdown(self, max_cells: int = 200) -> str:
        def esc(s: str) -> str:
            return s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")

        out = [f"# Run `{self.run_id}`", "", esc(self.description), "", f"Warehouse: `{self.warehouse}`", ""]
        out += ["| | |", "|---|---|"]
        out += [f"| {esc(k)} | {esc(v)} |" for k, v in self._headline()]
        if self.per_model:
            out += [
                "",
                "## Per model",
                "",
                "| model | model calls | failed | format failures | input tokens | cached | output tokens | USD |",
                "|---|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for name, u in sorted(self.per_model.items()):
                usd = "unpriced" if u.unpriced else f"{u.cost_usd:.4f}"
                out.append(
                    f"| {esc(name)} | {u.calls:,} | {u.failed_calls:,} | {u.format_failures:,} | {u.input_tokens:,} | "
                    f"{u.cached_tokens:,} | {u.output_tokens:,} | {usd} |"
                )
        if self.per_cell:
            out += [
                "",
                "## Per cell",
                "",
                "| cell | games | failed | calls | tokens | USD |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            for name, u in self._cell_rows(max_cells):
                out.append(
                    f"| {esc(name)} | {u.games:,} | {u.failed_games:,} | {u.calls:,} | {u.tokens:,} "
                    f"| {u.cost_usd:,.4f} |"
                )
        if self.failures:
            out += ["", "## Failed games (first 20)", ""]
            out += [f"- `{gid}`: {esc(err.splitlines()[0][:200])}" for gid, err in self.failures[:20]]
        return "\n".join(out) + "\n"


# -- the study ----------------------------------------------------------------------------------------------------


_latest: RunSummary | None = None


def latest() -> RunSummary | None:
    """The summary of the run this process started last (None before any)."""
    return _latest


def injected_faults(endpoints: Mapping[str, Any]) -> str:
    """What an offline fake endpoint of the run injects on purpose (`p_rate_limit`, `p_timeout`, ...), in words
    for the summary: its failed calls, format failures and failed games are the demo working, not breaking."""
    faulty = sorted(name for name, ep in endpoints.items() if getattr(ep, "kind", "") == "fake"
                    and any(k.startswith("p_") and float(v or 0) > 0 for k, v in getattr(ep, "options", {}).items()))
    if not faulty:
        return ""
    return (f"failed calls, format failures and a few failed games: the fake endpoint(s) {', '.join(faulty)} "
            "inject faults on purpose (their p_* options); a re-run replays the failed games")
