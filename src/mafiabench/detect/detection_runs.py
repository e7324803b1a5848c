"""Run detectors over the warehouse's games and land their answers (the pipeline step after landing).

Reads games from the raw tables (so simulated and imported games are treated alike), plans every
(game, cut, detector) whose key (with the prompt's sha256) is not landed yet, runs the detectors concurrently (model
calls under a concurrency limit, retries in the backends), and lands the answers through the warehouse's one writer
in one transaction. A detection whose model call failed for good is not landed: it is reported, and the next run
asks again. Re-running changes nothing once everything is landed.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import duckdb
from pydantic import BaseModel, ConfigDict, Field

from mafiabench.backends.endpoints import EndpointConfig, aclose_clients, check_backend, resolve_backend
from mafiabench.detect.cleansed_transcript import Transcript, cleanse, day_numbers
from mafiabench.detect.detectors import (
    DEFAULT_PROMPT_VERSION,
    Detection,
    Detector,
    LLMDetector,
    PolicyDetector,
    load_detector_prompt_file,
)
from mafiabench.engine.events import Event
from mafiabench.errors import UserError, printable
from mafiabench.warehouse.landing import warehouse_lock
from mafiabench.warehouse.raw import connect, detection_keys, load_detections

DEFAULT_DETECTORS = ("policy/most-voted", "policy/random")


class DetectorSpec(BaseModel):
    """The `[detector]` section of an experiment file, and the options of `mafiabench detect`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: tuple[str, ...] = Field(DEFAULT_DETECTORS, description="Detectors: provider/model or policy/...")
    prompt_version: str = Field(DEFAULT_PROMPT_VERSION, description="Detector prompt version (detect/prompts/<v>/).")
    prompt_file: str | None = Field(None, description="Your own detector prompt file (overrides prompt_version).")
    temperature: float | None = Field(0.0, description="Sampling temperature of model detectors (reference: 0).")
    max_tokens: int | None = Field(60, description="Token cap of a detector answer.")
    sources: tuple[str, ...] | None = Field(
        None, description="Only games of these sources (simulation, dallinger, llmafia, ...); default all."
    )
    variants: tuple[str, ...] = Field(("async", "classic"), description="Only games of these variants.")
    experiments: tuple[str, ...] | None = Field(
        None, description="Only simulated games of these experiments (imported games are kept)."
    )
    valid_only: bool = Field(True, description="Skip games flagged invalid (the human-game study kept valid ones).")
    imported_games: tuple[str, ...] | None = Field(
        None, description="Read exactly these imported games (valid or not): a study's pinned game list."
    )
    max_cut: int | None = Field(None, ge=1, description="Cut after at most this many days; default the last day.")
    concurrency: int = Field(8, ge=1, description="Detector calls in flight at once.")
    max_attempts: int = Field(5, ge=1, description="Tries per detector call, retries included.")
    backoff_base_s: float = Field(1.0, ge=0, description="Base of the exponential backoff between tries.")


_GAME_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def load_game_list(path: str | Path) -> tuple[str, ...]:
    """A study's pinned game list: one game id a line, `#` comments, blank lines ignored. The file must say why
    (at least one comment); a malformed or repeated id is an error naming the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: game list file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the game list: {exc}") from None
    ids: list[str] = []
    said_why = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line, _, comment = raw.partition("#")
        said_why = said_why or bool(comment.strip())
        line = line.strip()
        if not line:
            continue
        if not _GAME_ID.match(line):
            raise UserError(f"{path}: line {number}: {line!r} is not a game id (letters, digits, '.', '_', '-')")
        if line in ids:
            raise UserError(f"{path}: line {number}: game {line} is listed twice")
        ids.append(line)
    if not ids:
        raise UserError(f"{path}: the game list names no game")
    if not said_why:
        raise UserError(f"{path}: the game list does not say why these games (add a # comment with the reason)")
    return tuple(ids)


def marked_games(path: str | Path) -> dict[str, str]:
    """The games of a game list marked on their own line (`<id>  # why`): those the importer's rules do not keep,
    pinned by inference, with the reason each was excluded by rule (read after `load_game_list` checked the file)."""
    marked = {}
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line, _, comment = raw.partition("#")
        if line.strip() and comment.strip():
            marked[line.strip()] = comment.strip()
    return marked


@dataclass(frozen=True)
class GameInput:
    game_id: str
    source: str
    variant: str
    players: tuple[str, ...]
    mafia: tuple[str, ...]
    events: tuple[Event, ...]

    def cuts(self, max_cut: int | None) -> list[int]:
        days = day_numbers(self.events)
        last = max(days) if days else 0
        if max_cut is not None:
            last = min(last, max_cut)
        return list(range(1, last + 1))

    def transcript(self, cut: int, words: Mapping[str, str]) -> Transcript:
        return cleanse(self.game_id, self.events, self.players, len(self.mafia), cut, words)


@dataclass
class DetectReport:
    games: int = 0
    planned: int = 0
    already_landed: int = 0
    landed: int = 0
    failed: list[str] = field(default_factory=list)
    format_failures: int = 0
    calls: int = 0
    wall_s: float = 0.0
    # Sources asked for (`sources`) of which no eligible game was found: a typo, or an import not done yet.
    sources_without_games: list[str] = field(default_factory=list)
    # Pinned games (`imported_games`) not found finished in the warehouse: not imported yet, or a wrong id.
    pinned_missing: list[str] = field(default_factory=list)
    # Pinned games read although the importer's rules exclude them: the list's inference, not a published set.
    pinned_invalid: int = 0
    pinned: int = 0
    # When no game was read: which filter left none, with the counts (`why_no_games`).
    why_empty: str = ""
    # Games of the sources and variants asked that were not read, "<game id>: <why>" (`left_out_games`): a game that
    # did not finish, one the importer's rules flag invalid, one the pinned list does not name.
    left_out: list[str] = field(default_factory=list)

    def to_text(self) -> str:
        lines = [
            f"{self.games} games read; {self.planned} detections planned, {self.already_landed} already landed, "
            f"{self.landed} landed, {len(self.failed)} failed (asked again next run), "
            f"{self.format_failures} with a format failure; {self.calls} model calls; {self.wall_s:.1f} s"
        ]
        if self.pinned_invalid:
            lines.append(f"  of the {self.pinned} pinned imported games, {self.pinned_invalid} are invalid or "
                         f"undecided by the importer's rules and read because the game list pins them: "
                         f"{self.pinned - self.pinned_invalid} valid + {self.pinned_invalid} inferred "
                         "(the list's header says why)")
        if self.why_empty:
            lines.append(f"  {self.why_empty}")
        if self.left_out:
            lines.append(f"  left out: {len(self.left_out)} game(s) of the sources asked, not read:")
            lines += [f"    {printable(g)}" for g in self.left_out[:LEFT_OUT_SHOWN]]
            if len(self.left_out) > LEFT_OUT_SHOWN:
                lines.append(f"    ... and {len(self.left_out) - LEFT_OUT_SHOWN} more (--json lists them all)")
        lines += [f"  failed: {f}" for f in self.failed[:20]]
        lines += [f"  no eligible game of source {s!r} (finished, valid, of the variants asked; imported yet?)"
                  for s in self.sources_without_games]
        if self.pinned_missing:
            lines.append(f"  {len(self.pinned_missing)} pinned game(s) not in the warehouse (imported yet?): "
                         + ", ".join(self.pinned_missing[:10]) + (" ..." if len(self.pinned_missing) > 10 else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _scope(spec: DetectorSpec, game_ids: Sequence[str] | None, where: list[str], params: dict[str, Any]) -> None:
    """Add the sources, experiments and games a detection asks for to a `raw_games` filter: the one scope that
    `load_games` reads and `left_out_games` accounts for."""
    if spec.sources is not None:
        where.append("source in (select unnest($sources))")
        params["sources"] = list(spec.sources)
    if spec.experiments is not None:
        where.append("(source <> 'simulation' or experiment in (select unnest($experiments)))")
        params["experiments"] = list(spec.experiments)
    if game_ids is not None:
        where.append("game_id in (select unnest($ids))")
        params["ids"] = list(game_ids)


def load_games(con: duckdb.DuckDBPyConnection, spec: DetectorSpec, game_ids: Sequence[str] | None = None
               ) -> list[GameInput]:
    """Finished games with their players and events, from the raw tables."""
    where = ["status = 'finished'", "variant in (select unnest($variants))"]
    params: dict[str, Any] = {"variants": list(spec.variants)}
    if spec.imported_games is not None:
        where.append("(source = 'simulation' or game_id in (select unnest($pinned)))")
        params["pinned"] = list(spec.imported_games)
        if spec.valid_only:  # a pinned game is read whatever its validity: the list decides
            where.append("(coalesce(valid, true) or source <> 'simulation')")
    elif spec.valid_only:
        where.append("coalesce(valid, true)")
    _scope(spec, game_ids, where, params)
    games = con.execute(
        f"select game_id, source, variant from raw_games where {' and '.join(where)} order by game_id", params
    ).fetchall()
    if not games:
        return []
    ids = [g for g, _, _ in games]
    players: dict[str, list[tuple[str, str]]] = {}
    for gid, name, team in con.execute(
        "select game_id, name, team from raw_players where game_id in (select unnest($ids)) order by game_id, seat",
        {"ids": ids},
    ).fetchall():
        players.setdefault(gid, []).append((name, team))
    events: dict[str, list[Event]] = {}
    for row in con.execute(
        """select game_id, seq, phase, round, type, actor, target, text, visibility, format_failure,
                  random_fallback, truncated, tie_break, data_json
           from raw_events where game_id in (select unnest($ids)) order by game_id, seq""",
        {"ids": ids},
    ).fetchall():
        gid, seq, phase, rnd, type_, actor, target, text, vis, ff, rf, tr, tb, data = row
        events.setdefault(gid, []).append(
            Event(seq, phase, rnd, type_, actor, target, text, vis, bool(ff), bool(rf), bool(tr), bool(tb),
                  json.loads(data) if data else {})
        )
    out = []
    for gid, source, variant in games:
        ps = players.get(gid, [])
        mafia = tuple(n for n, t in ps if t == "mafia")
        if not ps or not mafia:
            continue
        out.append(GameInput(gid, source or "unknown", variant, tuple(n for n, _ in ps), mafia,
                             tuple(events.get(gid, []))))
    return out


LEFT_OUT_SHOWN = 20


def left_out_games(con: duckdb.DuckDBPyConnection, spec: DetectorSpec, read: Sequence[str],
                   game_ids: Sequence[str] | None = None) -> list[str]:
    """The games of the sources, experiments and variants the detector asks for that `load_games` did not read,
    each as "<game id> (<source>): <why>", in game id order; why in the order `load_games` filters."""
    where = ["variant in (select unnest($variants))", "game_id not in (select unnest($read))"]
    params: dict[str, Any] = {"variants": list(spec.variants), "read": list(read)}
    _scope(spec, game_ids, where, params)
    pinned = spec.imported_games is not None
    if pinned:
        params["pinned"] = list(spec.imported_games or ())
    invalid_read = "source <> 'simulation'" if pinned else "false"  # a pinned game is read whatever its validity
    rows = con.execute(f"""
        select game_id, source,
               case when status <> 'finished'
                        then 'did not finish (status ' || status || coalesce(': ' || invalid_reason, '') || ')'
                    when {"source <> 'simulation' and game_id not in (select unnest($pinned))" if pinned else "false"}
                        then 'not in the pinned game list (imported_games)'
                    when {str(spec.valid_only).lower()} and not coalesce(valid, true) and not ({invalid_read})
                        then 'invalid: ' || coalesce(invalid_reason, 'no reason recorded')
                    else 'no player of the mafia team recorded' end
        from raw_games where {' and '.join(where)} order by game_id""", params).fetchall()
    return [f"{gid} ({source}): {why}" for gid, source, why in rows]


def why_no_games(con: duckdb.DuckDBPyConnection, spec: DetectorSpec, game_ids: Sequence[str] | None = None) -> str:
    """Why `load_games` found nothing: the filters applied one at a time, naming the first that leaves no game and
    how many it started from ("0 of 540 games are of a variant the detector reads: ...")."""
    total = con.execute("select count(*) from raw_games").fetchone()[0]  # type: ignore[index]
    if not total:
        return "the warehouse holds no games: play a study or import games first"
    by_variant = dict(con.execute("select variant, count(*) from raw_games group by all order by 2 desc").fetchall())
    held = ", ".join(f"{n} {v}" for v, n in by_variant.items())
    steps: list[tuple[str, str, dict[str, Any]]] = [
        ("variant in (select unnest($variants))",
         f"are of a variant the detector reads: {', '.join(spec.variants)} (the warehouse holds {held}; "
         "[detector] variants chooses)", {"variants": list(spec.variants)}),
        ("status = 'finished'", "of those are finished", {})]
    if spec.imported_games is not None:
        steps.append(("(source = 'simulation' or game_id in (select unnest($pinned)))",
                      "of those are simulated or pinned by imported_games", {"pinned": list(spec.imported_games)}))
    elif spec.valid_only:
        steps.append(("coalesce(valid, true)", "of those are valid (valid_only = true)", {}))
    if spec.sources is not None:
        steps.append(("source in (select unnest($sources))", f"of those come from {', '.join(spec.sources)}",
                      {"sources": list(spec.sources)}))
    if spec.experiments is not None:
        steps.append(("(source <> 'simulation' or experiment in (select unnest($experiments)))",
                      f"of those belong to experiments {', '.join(spec.experiments)}",
                      {"experiments": list(spec.experiments)}))
    if game_ids is not None:
        steps.append(("game_id in (select unnest($ids))", "of those are among the games asked",
                      {"ids": list(game_ids)}))
    where: list[str] = []
    params: dict[str, Any] = {}
    before = total
    for condition, said, extra in steps:
        where.append(condition)
        params.update(extra)
        left = con.execute(f"select count(*) from raw_games where {' and '.join(where)}",
                           params).fetchone()[0]  # type: ignore[index]
        if not left:
            return f"0 of {before} games {said}"
        before = left
    return f"none of the {before} eligible games has players with a mafia team recorded"


def prompt_tokens_per_cut(spec: DetectorSpec, game_id: str, events: Sequence[Event], players: Sequence[str],
                          k: int) -> list[int]:
    """Estimated input tokens of one model-detector call per day cut of a game (for `mafiabench preview`): the
    detector's own prompt rendered over the cleansed transcript, at about four characters a token."""
    from mafiabench.backends.fake import estimate_tokens
    from mafiabench.detect.detectors import load_detector_prompt, render_prompt

    prompt = load_detector_prompt_file(spec.prompt_file) if spec.prompt_file else load_detector_prompt(
        spec.prompt_version)
    game = GameInput(game_id, "simulation", "", tuple(players), tuple(players[:k]), tuple(events))
    return [estimate_tokens(render_prompt(prompt, game.transcript(cut, prompt.words)))
            for cut in game.cuts(spec.max_cut)]


def make_detectors(spec: DetectorSpec, endpoints: dict[str, EndpointConfig] | None = None,
                   cache_dir: str | None = None) -> list[Detector]:
    """Validate every detector (unknown provider, missing key) before any call."""
    out: list[Detector] = []
    seen: set[str] = set()
    for s in spec.models:
        if s in seen:
            raise UserError(f"detector {s!r} is listed twice")
        seen.add(s)
        if s.startswith("policy/"):
            out.append(PolicyDetector(s))
            continue
        check_backend(s, endpoints)
        backend = resolve_backend(s, endpoints, cache_dir=cache_dir)
        prompt = load_detector_prompt_file(spec.prompt_file) if spec.prompt_file else None
        out.append(LLMDetector(s, backend, prompt_version=spec.prompt_version, prompt=prompt,
                               temperature=spec.temperature,
                               max_tokens=spec.max_tokens, max_attempts=spec.max_attempts,
                               backoff_base_s=spec.backoff_base_s))
    return out


def transcript_row(t: Transcript) -> dict[str, Any]:
    """The cleansed transcript a detection read, kept so the dashboards can show exactly that text."""
    return {"game_id": t.game_id, "cut": t.cut, "transcript_sha256": t.sha256, "k": t.k,
            "players": list(t.players), "lines": list(t.lines)}


def row_for(t: Transcript, d: Detector, det: Detection) -> dict[str, Any]:
    return {
        "game_id": t.game_id,
        "cut": t.cut,
        "detector": d.spec,
        "prompt_sha256": d.prompt_sha256,
        "prompt_version": d.prompt_version,
        "temperature": d.temperature,
        "k": t.k,
        "n_candidates": len(t.players),
        "predicted": list(det.predicted),
        "format_failure": det.format_failure,
        "random_fallback": det.random_fallback,
        "parse_error": det.parse_error,
        "response_text": det.response,
        "transcript_sha256": t.sha256,
        "transcript_lines": len(t.lines),
        "input_tokens": det.input_tokens,
        "output_tokens": det.output_tokens,
        "latency_ms": round(det.latency_ms, 3),
        "attempts": det.attempts,
        "detected_at": datetime.now(UTC).replace(tzinfo=None),
    }


class DetectProgress(Protocol):
    """Who hears of the detections as they are answered (the detect command's bar): `expect("detections", n)`, then
    `done(name)` after each."""

    def expect(self, part: str, count: int) -> None: ...

    def done(self, name: str) -> None: ...


_listener: DetectProgress | None = None


@contextmanager
def listening(progress: DetectProgress) -> Iterator[None]:
    """Within the block, every detection run in this process reports to `progress` (the command's bar; the flow
    runs the detection as a Prefect task, which takes no such object as a parameter)."""
    global _listener
    previous, _listener = _listener, progress
    try:
        yield
    finally:
        _listener = previous


async def detect_all(todo: Sequence[tuple[Transcript, Detector]], concurrency: int
                     ) -> list[tuple[Transcript, Detector, Detection]]:
    gate = asyncio.Semaphore(concurrency)
    progress = _listener
    if progress is not None:
        progress.expect("detections", len(todo))

    async def one(t: Transcript, d: Detector) -> tuple[Transcript, Detector, Detection]:
        async with gate:
            answer = await d.detect(t)
        if progress is not None:
            progress.done(printable(f"{t.game_id} day {t.cut}"))
        return t, d, answer

    return list(await asyncio.gather(*(one(t, d) for t, d in todo)))


def run_detection(
    warehouse: Path | str,
    spec: DetectorSpec,
    *,
    endpoints: dict[str, EndpointConfig] | None = None,
    cache_dir: str | None = None,
    game_ids: Sequence[str] | None = None,
) -> DetectReport:
    """Detect on every eligible game and cut not landed yet; land the answers under the warehouse lock."""
    return asyncio.run(detect_warehouse(warehouse, spec, endpoints=endpoints, cache_dir=cache_dir, game_ids=game_ids))


async def detect_warehouse(
    warehouse: Path | str,
    spec: DetectorSpec,
    *,
    endpoints: dict[str, EndpointConfig] | None = None,
    cache_dir: str | None = None,
    game_ids: Sequence[str] | None = None,
) -> DetectReport:
    """`run_detection` for callers that already run an event loop (the Prefect flows). The warehouse is open only
    to read the games and to land the answers, not while the detectors run, so queries get in between."""
    started = time.monotonic()
    report = DetectReport()
    detectors = make_detectors(spec, endpoints, cache_dir)
    warehouse = Path(warehouse)
    with warehouse_lock(warehouse, what="detect"):
        con = connect(warehouse, landing=True)
        try:
            games = load_games(con, spec, game_ids)
            have = detection_keys(con)
            if spec.imported_games is not None:
                read = [g.game_id for g in games if g.game_id in set(spec.imported_games)]
                report.pinned = len(read)
                report.pinned_invalid = con.execute(
                    "select count(*) from raw_games where game_id in (select unnest($ids)) "
                    "and not coalesce(valid, true)",
                    {"ids": read}).fetchone()[0]  # type: ignore[index]
            report.why_empty = "" if games else why_no_games(con, spec, game_ids)
            report.left_out = left_out_games(con, spec, [g.game_id for g in games], game_ids)
        finally:
            con.close()
        report.games = len(games)
        seen = {g.source for g in games}
        report.sources_without_games = [s for s in (spec.sources or ()) if s not in seen]
        found = {g.game_id for g in games}
        report.pinned_missing = [g for g in spec.imported_games or () if g not in found]
        todo: list[tuple[Transcript, Detector]] = []
        for g in games:
            for cut in g.cuts(spec.max_cut):
                for d in detectors:
                    t = g.transcript(cut, d.transcript_words)
                    report.planned += 1
                    if (g.game_id, cut, d.spec, d.prompt_sha256) in have:
                        report.already_landed += 1
                    else:
                        todo.append((t, d))
        try:
            results = await detect_all(todo, spec.concurrency) if todo else []
        finally:
            await aclose_clients()
        rows = []
        transcripts: dict[tuple[str, int, str], Transcript] = {}
        for t, d, det in results:
            if not isinstance(d, PolicyDetector):
                report.calls += 1
            if det.error is not None:
                report.failed.append(f"{t.game_id} day {t.cut} {d.spec}: {det.error}")
                continue
            report.format_failures += det.format_failure
            rows.append(row_for(t, d, det))
            transcripts[(t.game_id, t.cut, t.sha256)] = t
        if rows:
            con = connect(warehouse, landing=True)
            try:
                report.landed = load_detections(
                    con, rows, [transcript_row(t) for t in transcripts.values()]
                ).inserted
            finally:
                con.close()
    report.wall_s = time.monotonic() - started
    return report
