"""The first build after a whole one, when a scheduled run plays again the games an earlier run landed failed: dbt
replayed from the whole build's rehearsal of that shape (`rehearsal.REPLAYING`), or run.

    PYTHONPATH=<tree>/src .venv/bin/python benchmarks/bench_replay_failed_rehearsed.py --base <warehouse.duckdb>

Untimed, on a copy of `--base` (a warehouse with games landed: bench_landing.py's million, say): a run of `--games`
games whose mafioso is a model behind the fake endpoint, its calls failing with a 500 one time in ten and one attempt
allowed (about a quarter of the games land failed; `MAFIABENCH_FAULT_SEED` pins the draws), then `mafiabench build
--full-refresh` (a whole build, as after an upgrade) with this machine's records kept in an empty folder (a fresh
machine) and the rehearsal it starts after it waited for (what it did is printed). Timed, each a whole command in a
process of its own: the experiment's next run (the failed games played again: the lander replaces them; the run's own
rehearsal as it comes), then `mafiabench build` (the increment that replaces them): its wall and summary, which says
whether dbt's run and test were replayed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_increment import fresh_cache, wait_after_build

EXPERIMENT = """
name = "replayed"
variant = "mini-mafia"
shard_size = 20

[rules]
discussion_rounds = 1

[[cells]]
name = "flaky-mafioso"
agents = {{ mafioso = "flaky/m", default = "policy/random" }}
games = {games}

[endpoints.flaky]
kind = "fake"
options = {{ p_server_error = 0.1 }}

[models.default]
max_attempts = 1
backoff_base_s = 0.0
"""


def command(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """A mafiabench command in a process of its own: its wall, exit code and last lines."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mafiabench.cli", *args], env=env, capture_output=True, text=True)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return time.perf_counter() - t0, done.returncode, "\n  ".join(lines[-6:])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="a warehouse with games landed")
    parser.add_argument("--games", type=int, default=100, help="games of the run whose failed games are replayed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-replay-failed-") as tmp:
        warehouse, experiment = Path(tmp) / "w.duckdb", Path(tmp) / "replayed.toml"
        shutil.copyfile(args.base, warehouse)
        experiment.write_text(EXPERIMENT.format(games=args.games))
        env = {**os.environ, "MAFIABENCH_REPLAY_CACHE": "1", "MAFIABENCH_REHEARSE_AFTER_BUILD": "1",
               "MAFIABENCH_CACHE_DIR": str(fresh_cache(Path(tmp) / "cache")), "MAFIABENCH_FAULT_SEED": "run-1"}
        run = ["run", "--no-prefect", "--no-progress", "--warehouse", str(warehouse), str(experiment)]
        wall, code, said = command(run, env)
        print(f"first run: {wall:.1f} s, exit code {code}\n  {said}", flush=True)
        wall, code, said = command(["build", "--full-refresh", "--warehouse", str(warehouse)], env)
        print(f"whole build: {wall:.1f} s, exit code {code}; load average {os.getloadavg()}", flush=True)
        print(wait_after_build(env), flush=True)
        env["MAFIABENCH_FAULT_SEED"] = "run-2"
        wall, code, said = command(run, env)
        print(f"next run (the failed games again): {wall:.1f} s, exit code {code}\n  {said}", flush=True)
        wall, code, said = command(["build", "--warehouse", str(warehouse)], env)
        print(f"build after it: {wall:.1f} s, exit code {code}; load average {os.getloadavg()}\n  {said}", flush=True)


if __name__ == "__main__":
    main()
