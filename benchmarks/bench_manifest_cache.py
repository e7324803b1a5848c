"""Loading dbt's parsed manifest from the cache (transform.build.dbt_runner): the pickle the cache keeps now against
dbt's own msgpack form, which it kept before, each loaded in a fresh process (dbt imported first, and not timed).

    .venv/bin/python benchmarks/bench_manifest_cache.py [--repeat 5]

The packaged project is parsed once (or taken from the cache) for a warehouse named `w`; both forms are written from
that manifest into a folder of this run's own. Each line is one load: seconds, and whether the loaded manifest
serializes to dbt's msgpack byte for byte as the parsed one does (the msgpack form's never quite: its metadata's
`invocation_started_at` comes back as `+00:00` where the parse wrote `Z`, the only difference, 2026-11-29).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOAD = """
import sys, time
from pathlib import Path
import dbt.contracts.graph.manifest, dbt.parser.manifest  # imported first: the load alone is timed
from dbt.contracts.graph.manifest import Manifest
from dbt.parser.manifest import extended_mashumaro_encoder, extended_mashumuro_decoder
from mafiabench.transform.build import dbt_runner
form, file, reference = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
t0 = time.perf_counter()
if form == "msgpack":
    parsed = Manifest.from_msgpack(file.read_bytes(), decoder=extended_mashumuro_decoder)
else:
    parsed = dbt_runner._load_cached(file)
seconds = time.perf_counter() - t0
print(seconds, parsed.to_msgpack(extended_mashumaro_encoder) == reference.read_bytes())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from dbt.parser.manifest import extended_mashumaro_encoder

    from mafiabench.transform.build import dbt_runner

    with tempfile.TemporaryDirectory(prefix="bench-manifest-") as tmp:
        folder = Path(tmp)
        parsed = dbt_runner.manifest(dbt_runner.PACKAGED_PROJECT, folder / "w.duckdb")
        reference = folder / "reference.msgpack"
        reference.write_bytes(parsed.to_msgpack(extended_mashumaro_encoder))
        pickled = folder / "cache" / f"m{dbt_runner.MANIFEST_SUFFIX}"  # apart: the cache prunes .msgpack files
        dbt_runner._store_cached(pickled, parsed)
        files = {"msgpack (before)": reference, "pickle (now)": pickled}
        print(f"{len(parsed.nodes)} nodes, {len(parsed.macros)} macros; msgpack {reference.stat().st_size:,} bytes, "
              f"pickle {pickled.stat().st_size:,} bytes", flush=True)
        seconds: dict[str, list[float]] = {name: [] for name in files}
        for _ in range(args.repeat):
            for name, file in files.items():
                form = "msgpack" if file == reference else "pickle"
                out = subprocess.run([sys.executable, "-c", LOAD, form, str(file), str(reference)],
                                     capture_output=True, text=True, check=True).stdout.split()
                seconds[name].append(float(out[0]))
                print(f"  {name}: {float(out[0]):.3f} s, the same manifest: {out[1]}", flush=True)
        for name, s in seconds.items():
            print(f"{name}: median {statistics.median(s):.3f} s ({min(s):.3f}-{max(s):.3f})")


if __name__ == "__main__":
    main()
