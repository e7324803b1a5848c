"""What real answers show (issue 28): llama.cpp's llama-server with Gemma 3 270M (a base model) plays, through an
ordinary `[endpoints.llamacpp]` table, the real-model tests' games: a classic game with belief reports, an
asynchronous game and a 12-game Mini-Mafia study with the reference prompt, each with the Mafia Detector.

Reports, from the warehouse: the format-failure rate per action (speak, vote/kill/investigate, belief, schedule,
detect) and how each refusal was read; the server's prompt-token counts against the preview's estimate (per call,
from the preview's own sample games, and the len/4 rule applied to the very prompts sent); latency per call; the
client's CPU per call (the `mafiabench` processes' user + system time) against the server's (its /proc counters).

    make real-model                               # once: builds llama-server, assembles the model
    .venv/bin/python benchmarks/bench_real_model.py [--slots 2] [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the experiment files the real-model tests play

from mafiabench.backends.backend import EndpointConfig, GenerateSettings, Message  # noqa: E402
from mafiabench.backends.endpoints import aclose_clients, resolve_backend  # noqa: E402
from mafiabench.backends.fake import estimate_tokens  # noqa: E402
from mafiabench.study.estimate import estimate_plan  # noqa: E402
from mafiabench.study.spec import load_experiment  # noqa: E402
from mafiabench.testing.llama_server import LlamaServer, install, process_cpu_s  # noqa: E402
from support.real_model import async_study, classic_study, cli, mini_mafia_study  # noqa: E402

ACTION = """case when c.action = 'speak' then 'speak' when c.action = 'schedule' then 'schedule'
                 when g.variant = 'classic' then 'belief (' || c.action || ')' else c.action end"""


async def _replay(base_url: str, requests: list[dict[str, Any]]) -> list[int]:
    """The recorded requests again, one at a time, through the `llamacpp` endpoint's backend (the games' path)."""
    endpoint = EndpointConfig(
        "llamacpp", "openai", base_url=base_url, api_key_env="LLAMACPP_API_KEY", key_required=False
    )
    backend = resolve_backend("llamacpp/gemma-3-270m", {"llamacpp": endpoint})
    out = []
    for req in requests:
        s = req["settings"]
        settings = GenerateSettings(temperature=s["temperature"], max_tokens=s["max_tokens"], timeout_s=120)
        completion = await backend.generate([Message("user", req["messages"][0]["content"])], settings)
        out.append(completion.output_tokens)
    await aclose_clients()
    return out


def replay_cpu(srv: LlamaServer, requests: list[dict[str, Any]]) -> dict[str, float]:
    """Client CPU per call (this process, `time.process_time`) against the server's (/proc), calls in sequence."""
    assert srv.pid is not None
    client, server, wall = time.process_time(), process_cpu_s(srv.pid), time.monotonic()
    tokens = asyncio.run(_replay(srv.base_url, requests))
    n = len(requests)
    return {
        "calls": n,
        "client_cpu_ms_per_call": 1000 * (time.process_time() - client) / n,
        "server_cpu_ms_per_call": 1000 * (process_cpu_s(srv.pid) - server) / n,
        "wall_ms_per_call": 1000 * (time.monotonic() - wall) / n,
        "mean_output_tokens": sum(tokens) / n,
    }


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    binary, model = install()
    home = Path(tempfile.mkdtemp(prefix="bench-real-model-"))
    warehouse = home / "w.duckdb"
    files = {
        "classic.toml": classic_study,
        "async.toml": async_study,
        "study.toml": mini_mafia_study,
    }
    timings: dict[str, float] = {}
    with LlamaServer(binary, model, slots=args.slots, threads=args.threads, log_path=home / "server.log") as srv:
        assert srv.pid is not None
        server_before, client_before, wall_before = process_cpu_s(srv.pid), children_cpu_s(), time.monotonic()
        for name, make in files.items():
            (home / name).write_text(make(srv.base_url, warehouse))
            started = time.monotonic()
            extra = ["--publish"] if name == "study.toml" else ["--no-prefect"]
            run = cli("run", name, "--no-progress", *extra, cwd=home)
            if run.returncode != 0:
                raise SystemExit(f"{name}: exit {run.returncode}\n{run.stdout}\n{run.stderr}")
            timings[name] = time.monotonic() - started
        server_cpu = process_cpu_s(srv.pid) - server_before
        client_cpu = children_cpu_s() - client_before
        wall = time.monotonic() - wall_before
        con = duckdb.connect(str(warehouse), read_only=True)
        prompts = con.execute("select request_json, input_tokens from raw_model_calls").fetchall()
        plain = [srv.tokenize(json.loads(r)["messages"][0]["content"]) for r, _ in prompts[:40]]
        replay = replay_cpu(srv, [json.loads(r) for r, _ in prompts[:: max(1, len(prompts) // 40)]])
    per_action = con.execute(f"""
        select {ACTION} as action, count(*) as calls, count(*) filter (where c.format_failure) as refused,
               round(avg(c.latency_ms)) as mean_ms, round(median(c.latency_ms)) as median_ms,
               round(quantile_cont(c.latency_ms, 0.9)) as p90_ms, round(avg(c.input_tokens)) as mean_in,
               round(avg(c.output_tokens), 1) as mean_out,
               count(*) filter (where c.finish_reason = 'length') as hit_cap
        from raw_model_calls c join raw_games g using (game_id) group by 1 order by 1""").fetchall()
    detect = con.execute("""
        select 'detect', count(*), count(*) filter (where format_failure), round(avg(latency_ms)),
               round(median(latency_ms)), round(quantile_cont(latency_ms, 0.9)), round(avg(input_tokens)),
               round(avg(output_tokens), 1), null
        from raw_detections""").fetchall()
    read_as = con.execute("""
        select type, random_fallback, count(*) from raw_events where format_failure group by 1, 2 order by 1
        """).fetchall()
    calls = len(prompts) + detect[0][1]
    counted = sum(n for _, n in prompts)
    rule = sum(estimate_tokens(json.loads(r)["messages"][0]["content"]) for r, _ in prompts)
    template = [n - p for (_, n), p in zip(prompts[:40], plain, strict=True)]
    preview = {}
    for name in files:
        est = estimate_plan(load_experiment(home / name), samples=3)
        total = est.total(remaining=False)
        real = con.execute(
            "select count(*), sum(input_tokens) from raw_model_calls c join raw_games g using (game_id) "
            "where g.experiment = ?",
            [load_experiment(home / name).name],
        ).fetchone()
        assert real is not None
        preview[name] = {
            "preview_calls": total.calls,
            "preview_in_per_call": total.input_tokens / max(total.calls, 1),
            "real_calls": real[0],
            "real_in_per_call": (real[1] or 0) / max(real[0], 1),
        }
    con.close()
    result = {
        "per_action": [
            dict(
                zip(
                    ["action", "calls", "refused", "mean_ms", "median_ms", "p90_ms", "mean_in", "mean_out", "hit_cap"],
                    row,
                    strict=True,
                )
            )
            for row in per_action + detect
        ],
        "read_as": [list(r) for r in read_as],
        "tokens": {
            "server_counted": counted,
            "len_over_4": rule,
            "ratio": rule / counted,
            "chat_template_tokens": sorted(set(template)),
        },
        "preview": preview,
        # whole runs: the CLI processes' CPU (Python start-up, Prefect, dbt, the gate and pages included) per call
        "runs_cpu": {
            "calls": calls,
            "client_cpu_ms_per_call": 1000 * client_cpu / calls,
            "server_cpu_ms_per_call": 1000 * server_cpu / calls,
            "wall_s": wall,
        },
        "replay_cpu": replay,
        "timings_s": timings,
        "slots": args.slots,
        "threads": args.threads,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
