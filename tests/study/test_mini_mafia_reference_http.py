"""The flagship experiment (experiments/mini_mafia_backgrounds.toml) played over HTTP against the project's fake
server, every model's endpoint pointed at it, and checked from the requests the server received and the warehouse:
the reference's information for each role and nothing more, its token caps (55 / 5; 4,000 for the reasoning models,
with their reasoning settings), no cut at 200 characters, alphabetical candidates, and answers read as the reference
reads them (bastoscostadavi/llm-mafia-game at 4d515da6: src/prompts.py parse_voting_response, src/config.py token
limits, src/llm_utils.py calls, mini-mafia/mini_mafia.py memory lines).

The design is cut to 5 targets × 2 backgrounds and one game a cell (30 games) to stay fast; rules, prompt and model
settings are the flagship's own. The server answers as a script: every message is 300 characters, votes are
"I vote for <last candidate> because <first candidate> lied." (the reference takes the first candidate in list order
named anywhere: the first) or "I think <second candidate> is the mafioso" (the second)."""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.backends.backend import Message
from mafiabench.backends.endpoints import BUILTIN_ENDPOINTS
from mafiabench.study.run import run_study
from mafiabench.study.spec import parse_experiment
from mafiabench.testing import FakeModelServer

ROOT = Path(__file__).resolve().parents[2]
FLAGSHIP = ROOT / "experiments" / "mini_mafia_backgrounds.toml"
TARGETS = ["deepseek/deepseek-chat", "openai/gpt-5-mini", "xai/grok-3-mini", "anthropic/claude-sonnet-4-20250514",
           "llamacpp-qwen/Qwen2.5-7B-Instruct-Q4_K_M.gguf"]
BACKGROUNDS = ["openai/gpt-4.1-mini", "llamacpp-mistral/Mistral-7B-Instruct-v0.2-Q4_K_M.gguf"]
REASONING = {"gpt-5-mini": "minimal", "grok-3-mini": None}  # model -> reasoning_effort sent
# model -> token cap sent: GPT-5 Mini's games were played after the reference raised it to 6,000 (32ef7ebf)
REASONING_CAP = {"gpt-5-mini": 6000, "grok-3-mini": 4000}
MESSAGE = "M" * 299 + "."  # 300 characters: longer than the 200 the prompt asks for
LEAKS = ("discovered that they are the mafioso", "learns who the mafioso is", "played automatically",
         "one night and one day", "ends after the day's vote", "is the detective")


def choices_of(prompt: str) -> list[str]:
    found = re.findall(r"from: ([^\n]+)\.\n", prompt)
    return found[-1].split(", ") if found else []


class ScriptedServer(FakeModelServer):
    """The fake server with the answers of this test (a function of the prompt and the model)."""

    def _answer(self, model: str, messages: list[Message], override: str | None, echo: str = "") -> str:
        prompt = messages[-1].content
        if "#DISCUSSION ROUND" in prompt:
            return f'"{MESSAGE}"\nI say this because it is long.'
        c = choices_of(prompt)
        if model.startswith(("deepseek", "gpt-5", "Qwen")):
            return f"I vote for {c[-1]} because {c[0]} lied."
        return f"I think {c[1]} is the mafioso"


def reference_reading(answer: str, choices: list[str]) -> str:
    """The reference's parse_voting_response, as its code reads (first line exact, else first in list order)."""
    first = answer.strip().split("\n")[0].strip()
    for c in choices:
        if c.lower() == first.lower():
            return c
    return next(c for c in choices if c.lower() in answer.lower())


def experiment(srv: FakeModelServer, warehouse: Path) -> Any:
    data = tomllib.loads(FLAGSHIP.read_text(encoding="utf-8"))
    data["design"].update(targets=TARGETS, backgrounds=BACKGROUNDS)
    data.update(games_per_cell=1, shard_size=10, warehouse=str(warehouse))
    data["concurrency"] = {"games": 8, "processes": 1}
    local = {"kind": "openai", "base_url": srv.base_url_openai, "key_required": False}
    own = data["endpoints"]
    compatible = ("deepseek", "xai", "google", "llamacpp-mistral", "llamacpp-llama", "llamacpp-qwen")
    data["endpoints"] = {name: local | {"options": own.get(name, {}).get("options", {})} for name in compatible} | {
        "openai": local | {"options": dict(BUILTIN_ENDPOINTS["openai"].options)},
        "anthropic": {"kind": "anthropic", "base_url": srv.base_url_anthropic, "key_required": False},
    }
    return parse_experiment(data, f"{FLAGSHIP} (over the fake server)")


def memory_of(prompt: str) -> list[str]:
    return prompt.split("#YOUR MEMORY:\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_the_flagship_plays_the_reference_protocol_over_http(tmp_path: Path) -> None:
    with ScriptedServer(latency_s=0.0, seed=1) as srv:
        summary = asyncio.run(run_study(experiment(srv, tmp_path / "w.duckdb"), progress=False))
        requests = [r for r in srv.requests if r["status"] == 200]
    assert summary.games_done == 30 and summary.games_failed == 0
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    try:
        roles = {(g, n): (r, m) for g, n, r, m in con.execute(
            "select game_id, name, role, model from raw_players").fetchall()}
        deaths = dict(con.execute("select game_id, target from raw_events where type = 'death'").fetchall())
        mafioso = {g: n for (g, n), (r, _) in roles.items() if r == "mafioso"}
        calls = con.execute(
            "select game_id, player, action, model, request_json, response_text from raw_model_calls "
            "order by game_id, call_index").fetchall()
        votes = {(g, a): (t, ff) for g, a, t, ff in con.execute(
            "select game_id, actor, target, format_failure from raw_events where type = 'vote'").fetchall()}
        messages = con.execute("select text, truncated from raw_events where type = 'message'").fetchall()
        card = con.execute("select aspect, matches from raw_protocol_cards").fetchall()
    finally:
        con.close()

    # Token caps and reasoning settings, from the bodies the server received.
    assert len(requests) == len(calls) == 30 * 9
    for r in requests:
        body = r["body"]
        model = body["model"]
        if model.endswith(".gguf"):  # the local models: a plain completion of the [INST]-wrapped prompt, as there
            assert r["path"].endswith("/v1/completions") and "messages" not in body
            assert body["prompt"].startswith("[INST]\n#CONTEXT:") and body["prompt"].endswith("[/INST]\n")
        else:
            assert r["path"].endswith(("/v1/chat/completions", "/v1/messages"))
            assert "[INST]" not in json.dumps(body["messages"])
        prompt = body.get("prompt") or json.dumps(body["messages"])
        cap = body.get("max_completion_tokens", body.get("max_tokens"))
        speak = "#DISCUSSION ROUND" in prompt
        if model in REASONING:
            assert cap == REASONING_CAP[model] and "temperature" not in body, (model, body.keys())
            assert body.get("reasoning_effort") == REASONING[model]
        else:
            assert cap == (55 if speak else 5) and body["temperature"] == 0.7 and "reasoning_effort" not in body

    for game, player, action, model, request_json, response in calls:
        request = json.loads(request_json)
        prompt = request["messages"][-1]["content"]
        if model.endswith(".gguf"):  # the record says how the call went out
            assert request["format"] == {"api": "completions", "prompt_template": "[INST]\n{prompt}[/INST]\n"}
        else:
            assert "format" not in request
        role = roles[(game, player)][0]
        victim, culprit = deaths[game], mafioso[game]
        # Exactly the reference's memory lines for the role before the day's talk (mini-mafia/mini_mafia.py).
        night = {
            "mafioso": [f"You're {player}, the mafioso.", "Night 1 begins.", f"You killed {victim}.",
                        f"{victim} was found dead.", "Day 1 begins."],
            "detective": [f"You're {player}, the detective.", "Night 1 begins.", f"{victim} was found dead.",
                          f"You investigated {culprit} and discovered that they are the mafioso.", "Day 1 begins."],
            "villager": [f"You're {player}, the villager.", "Night 1 begins.", f"{victim} was found dead.",
                         "Day 1 begins."],
        }[role]
        memory = memory_of(prompt)
        assert memory[: len(night)] == night, (role, memory)
        talk = memory[len(night):]
        assert all(re.fullmatch(r'(You|Alice|Bob|Charlie|Diana): "M{299}\."', line) for line in talk), talk
        if role != "detective":
            assert not any(leak in prompt for leak in LEAKS), (role, [leak for leak in LEAKS if leak in prompt])
        if action == "vote":
            choices = choices_of(prompt)
            assert choices == sorted(choices) and len(choices) == 2  # alphabetical, the other two still playing
            target, failed = votes[(game, player)]
            assert target == reference_reading(response, choices) and not failed
    # Nothing cut at 200: every message is whole, unflagged.
    assert messages and all(text == MESSAGE and not truncated for text, truncated in messages)
    # Both readings occurred: the first-in-list name of "I vote for X because Y lied", and "I think Y is ...".
    answers = {response.split(" ")[1] for _, _, action, _, _, response in calls if action == "vote"}
    assert answers == {"vote", "think"}
    # The run landed the protocol card; its deviations are the prompt wrapper, the latent mart's widened interval and
    # this test's smaller design.
    assert {a for a, matches in card if matches is False} == {"prompt.wrapper", "statistics.latent_interval",
                                                               "design.targets", "design.backgrounds",
                                                               "design.games_per_cell"}
