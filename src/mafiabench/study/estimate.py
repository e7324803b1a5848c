"""Preview: what an experiment will play and spend (calls, tokens, cost) and how long it will take, before anything
is spent.

Wall time comes from the sample games and two limits (Little's law, each a lower bound on the run's duration): games
in flight, each lasting its critical path (the engine asks decisions in batches, a batch's calls run at once, so a
game lasts the sum over its batches of the slowest call), and each provider's calls in flight
(`concurrency.providers`), each call lasting that provider's latency. The estimate is the larger of the two, and
names which limit binds. Latencies are `concurrency.latency_s` per provider, else `DEFAULT_LATENCY_S`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mafiabench.backends.endpoints import EndpointConfig
from mafiabench.play.runner import BackendPool, play_game
from mafiabench.prices import (
    FREE_KINDS,
    PriceTable,
    Usage,
    call_cost,
    call_spec,
    free_providers_of,
    game_usage,
    load_prices,
)
from mafiabench.study.design import Cell, cell_prefix, expand_cells, planned_game
from mafiabench.study.spec import Experiment
from mafiabench.warehouse import landing

# Seconds per call when the experiment gives none: typical short (50-token) replies of each built-in endpoint, as a
# starting point; set `concurrency.latency_s` from a measured run (mart_game_costs has the latencies).
DEFAULT_LATENCY_S: dict[str, float] = {
    "openai": 1.0, "anthropic": 1.5, "openrouter": 1.5, "deepseek": 2.0, "xai": 1.5, "together": 1.0,
    "vllm": 0.5, "ollama": 1.0, "llamacpp": 1.0,
}
OTHER_HTTP_LATENCY_S = 1.0  # an endpoint of the experiment's own, reached over HTTP


def provider_latency(exp: Experiment, endpoints: dict[str, EndpointConfig], provider: str) -> tuple[float, str]:
    """(expected seconds per call to `provider`, where that figure comes from): the experiment's
    `concurrency.latency_s`, else an in-process provider's own `latency_ms` option (0 unless set), else the
    default for the endpoint."""
    if provider in exp.concurrency.latency_s:
        return exp.concurrency.latency_s[provider], "concurrency.latency_s"
    ep = endpoints.get(provider)
    if ep is not None and ep.kind not in ("openai", "anthropic"):
        return float(ep.options.get("latency_ms", 0) or 0) / 1000.0, "endpoint option latency_ms"
    if provider in ("scripted", "fake", "policy", "human") and ep is None:
        return 0.0, "in-process"
    return DEFAULT_LATENCY_S.get(provider, OTHER_HTTP_LATENCY_S), "default"


LABEL_ACTIONS = {"assess_self": "speaker", "assess_peer": "listeners"}  # statement labels' calls, by who is asked


def call_batches(calls: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """A game's calls grouped as the engine asked them: consecutive calls of the same phase, round and action run
    at once (votes, night actions, an async tick's scheduler calls); every message is its own batch; a message's
    statement labels (the speaker's and the listeners') are asked at once, after it."""
    batches: list[list[Mapping[str, Any]]] = []

    def key(c: Mapping[str, Any]) -> tuple[Any, ...]:
        action = "assess" if c.get("action") in LABEL_ACTIONS else c.get("action")
        return c.get("phase"), c.get("round"), action

    for c in calls:
        last = batches[-1][-1] if batches else None
        if last is not None and c.get("action") != "speak" and key(c) == key(last):
            batches[-1].append(c)
        else:
            batches.append([c])
    return batches


@dataclass(frozen=True)
class WallTime:
    seconds: float
    limit: str  # which limit binds, in words
    by_limit: dict[str, float]


@dataclass
class CellEstimate:
    cell: Cell
    games: int
    to_play: int
    calls_per_game: float
    usage_per_game: Usage
    per_model_per_game: dict[str, Usage]
    critical_path_s: float = 0.0  # one game, start to end, at the providers' latencies
    calls_per_provider: dict[str, float] = field(default_factory=dict)  # per game
    detect_samples: dict[str, Usage] = field(default_factory=dict)  # per model detector: its calls on the samples
    samples: int = 1
    labels_per_game: dict[str, Usage] = field(default_factory=dict)  # statement labels: "speaker" / "listeners"

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
    latency: dict[str, float] = field(default_factory=dict)  # expected seconds per call, per provider
    latency_source: dict[str, str] = field(default_factory=dict)  # where each latency comes from
    warehouse: Path | None = None  # the file `landed` was counted in

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

    def wall_time(self, *, remaining: bool = True) -> WallTime:
        """The run's duration as the larger of two lower bounds: game-seconds over games in flight, and each
        provider's call-seconds over its calls in flight."""
        c = self.experiment.concurrency
        game_seconds = sum((x.to_play if remaining else x.games) * x.critical_path_s for x in self.cells)
        bounds = {f"{c.games:,} games in flight": game_seconds / c.games}
        calls: dict[str, float] = {}
        for x in self.cells:
            for provider, k in x.calls_per_provider.items():
                calls[provider] = calls.get(provider, 0.0) + k * (x.to_play if remaining else x.games)
        for provider, k in sorted(calls.items()):
            limit = c.providers.get(provider, c.default_provider)
            bounds[f"{provider}: {limit:,} calls in flight"] = k * self.latency.get(provider, 0.0) / limit
        binding = max(bounds, key=lambda b: bounds[b])
        return WallTime(bounds[binding], binding, bounds)

    def detection(self, *, remaining: bool = True) -> dict[str, Usage]:
        """The `[detector]`'s model calls on this experiment's games (one per day cut and model detector);
        imported games it also reads are not counted."""
        out: dict[str, Usage] = {}
        for c in self.cells:
            n = c.to_play if remaining else c.games
            for spec, u in c.detect_samples.items():
                out.setdefault(spec, Usage()).add(_scale(u, n / c.samples))
        return out

    def labels(self, *, remaining: bool = True) -> dict[str, Usage]:
        """The statement labels' share (`[statements]`): calls, tokens and cost of the speakers' own labels and of
        the listeners' (a call per living listener per message), already counted in the totals."""
        out: dict[str, Usage] = {}
        for c in self.cells:
            n = c.to_play if remaining else c.games
            for who, u in c.labels_per_game.items():
                out.setdefault(who, Usage()).add(_scale(u, n))
        return out

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
    warehouse_path = exp.warehouse_path(warehouse)
    landed = _landed_per_cell(exp, cells, warehouse_path)  # the plan itself is never built
    providers = {s.split("/", 1)[0] for s in exp.agent_specs() if not s.startswith(("policy/", "human/"))}
    fake_endpoints = {p: EndpointConfig(p, "fake") for p in providers}
    models = exp.model_settings()
    latency_of = {p: provider_latency(exp, endpoints, p) for p in providers}
    latency = {p: v[0] for p, v in latency_of.items()}

    async def sample() -> list[CellEstimate]:
        pool = BackendPool(endpoints=fake_endpoints)
        out: list[CellEstimate] = []
        for pos, cell in enumerate(cells):
            picked = [planned_game(exp, cell, i) for i in range(min(cell.games, max(1, samples)))]
            recs = await asyncio.gather(*(play_game(g.spec(exp, models), pool) for g in picked))
            per_game = Usage()
            per_model: dict[str, Usage] = {}
            path_s = 0.0
            per_provider: dict[str, float] = {}
            labelled: dict[str, Usage] = {}
            for rec in recs:
                for batch in call_batches(rec.calls):
                    path_s += max(latency.get(str(c.get("provider")), 0.0) for c in batch)
                for call in rec.calls:
                    per_provider[str(call.get("provider"))] = per_provider.get(str(call.get("provider")), 0.0) + 1
                for call in rec.calls:
                    cap = ((call.get("request") or {}).get("settings") or {}).get("max_tokens")
                    if cap is not None:
                        call["output_tokens"] = int(cap)
                    call["cached_tokens"] = 0
                for call in rec.calls:
                    who = LABEL_ACTIONS.get(str(call.get("action")))
                    if who is not None:
                        labelled.setdefault(who, Usage()).add(_call_usage(call, table))
                total, pm = game_usage(rec, table)
                per_game.add(total)
                for spec, u in pm.items():
                    per_model.setdefault(spec, Usage()).add(u)
            k = 1.0 / len(recs)
            planned = cell.games if exp.stopping is None else exp.stopping.rule().worst_case_games()
            to_play = planned if landed is None else max(0, planned - landed[pos])
            out.append(
                CellEstimate(
                    cell=cell,
                    games=cell.games,
                    to_play=to_play,
                    calls_per_game=per_game.calls * k,
                    usage_per_game=_scale(per_game, k),
                    per_model_per_game={s: _scale(u, k) for s, u in per_model.items()},
                    critical_path_s=path_s * k,
                    calls_per_provider={p: n * k for p, n in per_provider.items()},
                    detect_samples=_detection_usage(exp, recs, table),
                    samples=len(recs),
                    labels_per_game={who: _scale(u, k) for who, u in labelled.items()},
                )
            )
        return out

    return Estimate(exp, asyncio.run(sample()), samples, table.version, None if landed is None else sum(landed),
                    latency, {p: v[1] for p, v in latency_of.items()}, warehouse_path)


def _call_usage(call: Mapping[str, Any], table: PriceTable) -> Usage:
    u = Usage(calls=1, input_tokens=int(call.get("input_tokens") or 0),
              output_tokens=int(call.get("output_tokens") or 0))
    cost = call_cost(call, table)
    if cost is None:
        u.unpriced = {call_spec(call)}
    else:
        u.cost_usd = cost
    return u


def _detection_usage(exp: Experiment, recs: Sequence[Any], table: PriceTable) -> dict[str, Usage]:
    """Calls, tokens and cost of each model detector over the sample games (all of them, not per game): one call
    per day cut, the prompt rendered over the cleansed transcript, output counted at the detector's token cap."""
    if exp.detector is None or not exp.detector.simulated:
        return {}
    from mafiabench.detect.detection_runs import prompt_tokens_per_cut

    spec = exp.detector.spec(exp.name)
    models = [m for m in spec.models if not m.startswith("policy/")]
    if not models:
        return {}
    cuts: list[int] = []
    for rec in recs:
        if rec.outcome.get("status") != "finished":
            continue
        players = [p.name for p in rec.players]
        mafia = [p.name for p in rec.players if p.team == "mafia"]
        ordered = mafia + [p for p in players if p not in mafia]
        cuts += prompt_tokens_per_cut(spec, rec.game_id, rec.events, ordered, len(mafia))
    out: dict[str, Usage] = {}
    for model in models:
        u = Usage()
        u.calls = len(cuts)
        u.input_tokens = sum(cuts)
        u.output_tokens = (spec.max_tokens or 0) * len(cuts)
        cost = table.cost(model, u.input_tokens, u.output_tokens)
        if cost is None:
            u.unpriced = {model}
        else:
            u.cost_usd = cost
        out[model] = u
    return out


def _landed_per_cell(exp: Experiment, cells: list[Cell], warehouse: Path) -> list[int] | None:
    """Finished games of each cell already in the warehouse, read-only; None if a run holds it."""
    if not warehouse.exists():
        return [0] * len(cells)
    try:
        import duckdb

        con = duckdb.connect(str(warehouse), read_only=True)
    except Exception:
        return None
    try:
        if not con.execute("select count(*) from information_schema.tables where table_name = 'raw_games'").fetchall()[
            0
        ][0]:
            return [0] * len(cells)
        # game ids are unique in raw_games, so each index comes at most once
        return [sum(1 for i in landing.finished_indices(con, cell_prefix(exp, c)) if i < c.games) for c in cells]
    finally:
        con.close()


# -- what the study needs: keys, endpoints, models ------------------------------------------------------------------
# Where a built-in hosted endpoint without a `base_url` is reached (the SDKs' defaults): what preview probes.
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com/v1"}
PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class KeyNeed:
    env: str
    endpoints: tuple[str, ...]
    set: bool


@dataclass(frozen=True)
class EndpointProbe:
    """One endpoint's answer to `GET <base_url>/models` (no key sent): `answers`, `refused`, `no answer` (nothing
    within the probe's timeout), `unknown host`, or `unreachable`; the model names it lists, when it lists any."""

    name: str
    url: str
    status: str
    detail: str = ""
    served: tuple[str, ...] = ()

    @property
    def answers(self) -> bool:
        return self.status == "answers"

    @property
    def local(self) -> bool:
        """On this machine or its network (a server to start), not a hosted API (to reach)."""
        import ipaddress
        from urllib.parse import urlsplit

        host = urlsplit(self.url).hostname or ""
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_private
        except ValueError:
            return False


@dataclass(frozen=True)
class ModelNeed:
    spec: str
    status: str  # priced | free | deprecated | retired | unknown
    detail: str
    suggestions: tuple[str, ...] = ()


@dataclass
class Needs:
    """What a run of the experiment needs from the machine it runs on, and what it would refuse whatever the machine."""

    keys: list[KeyNeed]
    endpoints: list[EndpointProbe]
    models: list[ModelNeed]
    refusals: list[str]

    @property
    def missing_keys(self) -> list[KeyNeed]:
        return [k for k in self.keys if not k.set]

    @property
    def silent_endpoints(self) -> list[EndpointProbe]:
        return [e for e in self.endpoints if e.status not in ("answers", "in-process", "not probed")]


def model_specs(exp: Experiment) -> list[str]:
    """Every model the experiment calls (players and the detector's models), in first-seen order; policies and
    human seats are not models."""
    specs = list(exp.agent_specs())
    if exp.detector is not None:
        specs += list(exp.detector.models)
    return [s for s in dict.fromkeys(specs) if not s.startswith(("policy/", "human/"))]


def probe_endpoint(name: str, url: str, timeout: float = PROBE_TIMEOUT_S,
                   headers: Mapping[str, str] | None = None) -> EndpointProbe:
    """`GET <url>/models`: any HTTP status means the server answers (a hosted API says 401 without its key, and
    lists its model names with it); a refused connection, silence past `timeout`, or a host name that does not
    resolve say why a run would fail."""
    import json
    import socket
    import urllib.error
    import urllib.request

    target = url.rstrip("/") + "/models"
    try:
        request = urllib.request.Request(target, headers=dict(headers or {}))
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            body = reply.read(1 << 20)
            status = reply.status
    except urllib.error.HTTPError as exc:
        return EndpointProbe(name, url, "answers", f"HTTP {exc.code}")
    except TimeoutError:
        return EndpointProbe(name, url, "no answer", f"nothing within {timeout:g} s")
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            return EndpointProbe(name, url, "refused", "connection refused: is the server started?")
        if isinstance(reason, TimeoutError):
            return EndpointProbe(name, url, "no answer", f"nothing within {timeout:g} s")
        if isinstance(reason, socket.gaierror):
            return EndpointProbe(name, url, "unknown host", "the host name does not resolve (offline?)")
        return EndpointProbe(name, url, "unreachable", str(reason))
    except (OSError, ValueError) as exc:
        return EndpointProbe(name, url, "unreachable", str(exc))
    served: tuple[str, ...] = ()
    try:
        data = json.loads(body).get("data") or []
        served = tuple(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)
    except (ValueError, AttributeError, TypeError):
        pass
    return EndpointProbe(name, url, "answers", f"HTTP {status}", served)


def probe_endpoints(targets: Mapping[str, str], timeout: float = PROBE_TIMEOUT_S,
                    headers: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, EndpointProbe]:
    """All probes at once, each on a daemon thread, so the whole takes one timeout (a name lookup the system does
    not time out is abandoned, not waited for)."""
    import threading
    import time

    results: dict[str, EndpointProbe] = {}

    def one(name: str, url: str) -> None:
        results[name] = probe_endpoint(name, url, timeout, (headers or {}).get(name))

    threads = [threading.Thread(target=one, args=(n, u), daemon=True) for n, u in targets.items()]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout + 0.25
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return {n: results.get(n) or EndpointProbe(n, u, "no answer", f"nothing within {timeout:g} s")
            for n, u in targets.items()}


def did_you_mean(model: str, known: Sequence[str]) -> tuple[str, ...]:
    """The known names closest to a model name nobody prices (difflib's ratio, at least 0.6)."""
    import difflib

    return tuple(difflib.get_close_matches(model, list(dict.fromkeys(known)), n=3, cutoff=0.6))


def study_needs(
    exp: Experiment,
    *,
    prices: PriceTable | None = None,
    probe: bool = True,
    timeout: float = PROBE_TIMEOUT_S,
    today: Any = None,
) -> Needs:
    """Each key the experiment's endpoints read (set or not), each endpoint it calls (probed for `timeout`
    seconds, all at once), each model (priced, free, deprecated or retired with the date, or unknown to the price
    table with the closest names the table and the endpoint know), and what `mafiabench run` would refuse whatever
    the machine (an unknown provider, a bad endpoint option, a dollar budget over an unpriced model)."""
    from dataclasses import replace

    from mafiabench.backends.endpoints import BUILTIN_ENDPOINTS, check_backend, split_spec
    from mafiabench.errors import UserError
    from mafiabench.study.budget import require_prices

    own = exp.endpoint_configs()
    merged = {**BUILTIN_ENDPOINTS, **own}
    table = (prices or load_prices()).with_overrides(exp.prices, free_providers_of(own))
    specs = model_specs(exp)
    refusals: list[str] = []
    used: dict[str, EndpointConfig] = {}
    for spec in specs:
        try:
            provider, _ = split_spec(spec)
        except UserError as exc:
            refusals.append(str(exc))
            continue
        ep = merged.get(provider)
        if ep is None:
            try:
                check_backend(spec, own)
            except UserError as exc:
                refusals.append(str(exc))
            continue
        used.setdefault(provider, ep)
        try:  # everything but the key (listed below, and set on the machine that runs)
            check_backend(spec, {**own, provider: replace(ep, key_required=False)})
        except UserError as exc:
            refusals.append(str(exc))
    try:
        require_prices(exp.budget, specs, table)
    except UserError as exc:
        refusals.append(str(exc))

    keys: dict[str, list[str]] = {}
    for name, ep in used.items():
        if ep.kind not in FREE_KINDS and ep.key_required and ep.api_key_env:
            keys.setdefault(ep.api_key_env, []).append(name)
    key_needs = [KeyNeed(env, tuple(names), bool(os.environ.get(env))) for env, names in keys.items()]

    urls = {name: ep.base_url or DEFAULT_BASE_URLS.get(ep.kind, "") for name, ep in used.items()
            if ep.kind in ("openai", "anthropic")}
    headers = {n: _key_headers(used[n]) for n in urls}
    probes = probe_endpoints({n: u for n, u in urls.items() if u}, timeout, headers) if probe else {}
    endpoint_needs = []
    for name, ep in used.items():
        if ep.kind in FREE_KINDS:
            endpoint_needs.append(EndpointProbe(name, "", "in-process", f"kind {ep.kind}: nothing to reach"))
        elif name in probes:
            endpoint_needs.append(probes[name])
        else:
            endpoint_needs.append(EndpointProbe(name, urls.get(name, ""), "not probed", "--no-probe"))

    models = [_model_need(spec, table, used, probes, today) for spec in specs if split_spec(spec)[0] in used]
    return Needs(key_needs, endpoint_needs, models, list(dict.fromkeys(refusals)))


def _key_headers(ep: EndpointConfig) -> dict[str, str]:
    """The endpoint's key, when set, as the run would send it: the answer then lists the names it serves."""
    key = os.environ.get(ep.api_key_env or "") if ep.api_key_env else None
    if not key:
        return {}
    if ep.kind == "anthropic":
        return {"x-api-key": key, "anthropic-version": "2023-06-01"}
    return {"Authorization": f"Bearer {key}"}


def _model_need(spec: str, table: PriceTable, used: Mapping[str, EndpointConfig],
                probes: Mapping[str, EndpointProbe], today: Any) -> ModelNeed:
    provider, model = spec.split("/", 1)
    ep = used[provider]
    if ep.kind in FREE_KINDS:
        return ModelNeed(spec, "free", f"in-process {ep.kind} model: no calls leave the machine")
    row = table.lookup(spec)
    if row is not None:
        warning = row.lifecycle(today)
        if warning is not None:
            status, _, when = warning.partition(" ")  # "retired on ...", "deprecated on ..." or "retires on ..."
            status = "retired" if status == "retired" else "deprecated"
            source = f" (see {row.lifecycle_source})" if row.lifecycle_source else ""
            return ModelNeed(spec, status, (when if warning.startswith(status) else warning) + source)
        if row.model == "*" and row.input == 0 and row.output == 0:
            return ModelNeed(spec, "free", f"every {provider} model is free (a local server)")
        return ModelNeed(spec, "priced", f"${row.input:g} in, ${row.output:g} out per million tokens")
    served = probes[provider].served if provider in probes else ()
    if model in served:
        return ModelNeed(spec, "unknown", f"served by {provider}, but no row in the price table: its cost is unknown")
    known = [p.model for p in table.models.values() if p.provider == provider and p.model != "*"] + list(served)
    near = did_you_mean(model, known)
    hint = f"; did you mean {' or '.join(f'{provider}/{m}' for m in near)}?" if near else ""
    return ModelNeed(spec, "unknown", f"not in the price table (a misspelling, or add a [[prices]] row){hint}",
                     tuple(f"{provider}/{m}" for m in near))
