"""Shared by the real-model tests (`pytest -m real_model`, run by `make real-model`) and
benchmarks/bench_real_model.py: the installed llama-server + Gemma 3 270M, and the game and experiment files a user
would write to play them through an ordinary `[endpoints.llamacpp]` table (only the port differs from the built-in
endpoint's 8080, since tests take a free one).

No skip anywhere: when the server or the model is missing these tests fail and say how to install them (the default
`make test` deselects the marker, so it never meets them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mafiabench.testing.llama_server import MODEL_NAME, LlamaServer, installed

SPEC = f"llamacpp/{MODEL_NAME}"


def require_installed() -> tuple[Path, Path]:
    found = installed()
    if found is None:
        pytest.fail(
            "llama-server and the Gemma 3 270M model are not installed: `make real-model` builds and assembles them "
            "(python -m mafiabench.testing.llama_server install)",
            pytrace=False,
        )
    return found


def start_server(tmp_path: Path, **options: object) -> LlamaServer:
    binary, model = require_installed()
    return LlamaServer(binary, model, log_path=tmp_path / "llama-server.log", **options).start()  # type: ignore[arg-type]


def cli(*args: str, cwd: Path, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    """`mafiabench ARGS` as a user runs it, in its own process (so its CPU is measured apart from the server's)."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("LLAMACPP_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "mafiabench.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout_s, check=False,
    )  # fmt: skip


def endpoint(base_url: str) -> str:
    return (
        f'[endpoints.llamacpp]\nkind = "openai"\nbase_url = "{base_url}"\napi_key_env = "LLAMACPP_API_KEY"\n'
        "key_required = false\n"
    )


# Token caps: the reference's 50/5 for messages and votes; beliefs get 120 instead of 600 (a base model rambles to
# the cap, and 600 tokens at ~30 tokens/s on two cores is 20 s a call); timeouts generous for a shared machine.
MODEL_SETTINGS = {
    "temperature": 0.7,
    "max_tokens_belief": 120,
    "timeout_s": 180,
    "max_attempts": 3,
    "backoff_base_s": 0.5,
}


def models_table(**overrides: float) -> str:
    """The `[models."llamacpp/gemma-3-270m"]` table: MODEL_SETTINGS with `overrides`."""
    lines = [f"{key} = {value}" for key, value in {**MODEL_SETTINGS, **overrides}.items()]
    return f'\n[models."{SPEC}"]\n' + "\n".join(lines) + "\n"


# A model on this machine costs nothing per token (a study would otherwise report its cost as unpriced).
PRICES = f"""
[[prices]]
provider = "llamacpp"
model = "{MODEL_NAME}"
input = 0.0
output = 0.0
"""


def mini_mafia_game(base_url: str, seed: int = 1, settings: dict[str, float] | None = None) -> str:
    """One Mini-Mafia game, every seat the local model, the reference prompt; `settings` adds model settings."""
    return f"""variant = "mini-mafia"
seed = {seed}
prompt_version = "v4.1-full"
[rules]
discussion_rounds = 2
[agents]
default = "{SPEC}"
{models_table(**(settings or {}))}
{endpoint(base_url)}"""


def mini_mafia_study(
    base_url: str,
    warehouse: Path,
    *,
    name: str = "real-model-mini-mafia",
    games: int = 12,
    detector: bool = True,
    agents: str = f'{{ default = "{SPEC}" }}',
    rounds: int = 2,
    shard_size: int = 4,
    concurrency: str = "games = 4",
    settings: dict[str, float] | None = None,
) -> str:
    """`games` Mini-Mafia games with the reference prompt (every seat the model unless `agents` says otherwise),
    and the detector over them."""
    detect = f'[detector]\nmodels = ["{SPEC}"]\nvariants = ["mini-mafia"]\nmax_attempts = 3\nbackoff_base_s = 0.5\n'
    return f"""name = "{name}"
variant = "mini-mafia"
prompt_version = "v4.1-full"
seed = 0
games_per_cell = {games}
shard_size = {shard_size}
warehouse = "{warehouse}"
[rules]
discussion_rounds = {rounds}
[[cells]]
name = "gemma"
agents = {agents}
[concurrency]
{concurrency}
{models_table(**(settings or {}))}
{endpoint(base_url)}{PRICES}
{detect if detector else ""}"""


def classic_study(base_url: str, warehouse: Path) -> str:
    """One classic game (5 players, 1 mafioso) with belief reports, and the detector over it."""
    return f"""name = "real-model-classic"
variant = "classic"
games_per_cell = 1
warehouse = "{warehouse}"
[rules]
n_players = 5
n_mafia = 1
decision = "belief"
speaking_rounds = 1
max_days = 4
[[cells]]
name = "gemma-beliefs"
agents = {{ default = "{SPEC}" }}
{models_table()}
{endpoint(base_url)}{PRICES}
[detector]
models = ["{SPEC}"]
variants = ["classic"]
"""


def async_study(base_url: str, warehouse: Path) -> str:
    """One asynchronous game, short days (two scheduler rounds), and the detector over it."""
    return f"""name = "real-model-async"
variant = "async"
games_per_cell = 1
warehouse = "{warehouse}"
[rules]
n_players = 4
n_mafia = 1
day_seconds = 10
night_seconds = 5
tick_seconds = 5
typing = false
max_days = 4
[[cells]]
name = "gemma-async"
agents = {{ default = "{SPEC}" }}
{models_table()}
{endpoint(base_url)}{PRICES}
[detector]
models = ["{SPEC}"]
variants = ["async"]
"""
