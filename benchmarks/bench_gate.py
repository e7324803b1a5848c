"""The build's parts timed inside one `publish.build`: the dbt models, the Python models, the gate's expectation suites
and its dbt data tests, on a copy of a landed warehouse, for one or more versions of the sources side by side.

    .venv/bin/python benchmarks/bench_gate.py /tmp/landed1m.duckdb                      # this checkout
    .venv/bin/python benchmarks/bench_gate.py W.duckdb --src /tmp/before/src --src src --rounds 2   # alternated

The warehouse is copied for each build (a build writes its marts into the file), and each build runs in a fresh
process with the version's sources first on the path. The parts are timed by wrapping `publish.stage`,
`publish.stage_python`, `quality.run_suites` and `publish.dbt_test_results` (every version since issue 13 has them):
the wall seconds during which a part's calls ran (a second two threads' calls share counts once), and the process's
CPU seconds. The suites, the dbt data tests and the Python models run side by side in a build, so the parts overlap:
each is its own figure, the build's wall time is the whole. After the build, the suites run once more alone on the
published marts, for their own wall and CPU seconds (a version that validates with GX gets its GX context made
before the clock starts).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time, threading
from collections import defaultdict
from mafiabench import publish
from mafiabench.quality import gate

spans = defaultdict(list)
lock = threading.Lock()

def timed(part, fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            with lock:
                spans[part].append((t0, time.perf_counter()))
    return wrapper

def covered(intervals):
    # The wall seconds during which at least one call ran: the suites run on two threads at once, whose calls'
    # seconds summed would count the same second twice.
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total

publish.stage = timed("dbt models", publish.stage)
publish.stage_python = timed("Python models", publish.stage_python)
publish.dbt_test_results = timed("dbt data tests", publish.dbt_test_results)
gate.run_suites = timed("expectation suites", gate.run_suites)
t0, c0 = time.perf_counter(), time.process_time()
result = publish.build(__import__("pathlib").Path(sys.argv[1]), raise_on_failure=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
slow = sorted(result.models, key=lambda m: -m.seconds)[:6]
parts = {part: covered(calls) for part, calls in spans.items()}
# The suites again, alone in the process, on the published marts: their own CPU (DuckDB's threads included).
try:
    from mafiabench.transform.build.catalogue import model_docs
    from mafiabench.transform.build.dbt_runner import resolve_project
except ImportError:  # sources from before transform/build/
    from mafiabench.transform.catalogue import model_docs
    from mafiabench.transform.dbt_runner import resolve_project
from mafiabench.warehouse.raw import connect
con = connect(sys.argv[1])
suites = gate.gate_suites(model_docs(resolve_project()))
kwargs = {}
if hasattr(__import__("mafiabench.quality.validator", fromlist=["_Validator"]), "ValidatorProcess"):
    from mafiabench.quality.validator import _Validator
    kwargs["validator"] = _Validator()  # GX imported and its context made before the clock starts
t1, c1 = time.perf_counter(), time.process_time()
again = gate.run_suites(con, suites=suites, **kwargs)
alone = (time.perf_counter() - t1, time.process_time() - c1)
print(json.dumps({"build": wall, "cpu": cpu, "published": result.published, "checks": len(result.validation),
                  "failed": [r.describe() for r in result.failures], **parts, "alone": alone,
                  "slowest": [f"{m.name} {m.seconds:.1f} s" for m in slow]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", type=Path, help="a landed warehouse (copied for each build)")
    parser.add_argument("--src", type=Path, action="append", help="package sources (repeat to compare)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    srcs = args.src or [ROOT / "src"]
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        for r in range(args.rounds):
            for src in srcs:
                copy = Path(tmp) / "w.duckdb"
                shutil.copy(args.warehouse, copy)
                load = os.getloadavg()[0]
                env = {**os.environ, "PYTHONPATH": str(src)}
                out = subprocess.run([sys.executable, "-c", CHILD, str(copy)], env=env, capture_output=True,
                                     text=True, check=False)
                if out.returncode != 0:
                    raise SystemExit(f"{src}: build failed: {out.stderr[-3000:]}")
                t = json.loads(out.stdout.strip().splitlines()[-1])
                parts = ", ".join(f"{k} {t[k]:.1f} s" for k in ("dbt models", "Python models", "expectation suites",
                                                                 "dbt data tests") if k in t)
                print(f"round {r + 1} {str(src)[-30:]}: build {t['build']:.1f} s, CPU {t['cpu']:.1f} s; {parts}; "
                      f"the suites again, alone: {t['alone'][0]:.1f} s, CPU {t['alone'][1]:.1f} s; "
                      f"{t['checks']} checks, published {t['published']}; slowest models: {', '.join(t['slowest'])}; "
                      f"load {load:.1f}-{os.getloadavg()[0]:.1f}", flush=True)
                for failure in t["failed"]:
                    print(f"  FAILED {failure}")
                copy.unlink()


if __name__ == "__main__":
    main()
