"""A scheduled run's increment: N games landed and built, 1% more landed (new ids), then `mafiabench build` timed
incremental against `mafiabench build --full-refresh` of the same warehouse, side by side.

    .venv/bin/python benchmarks/bench_increment.py 100000
    .venv/bin/python benchmarks/bench_increment.py 1000000 --shards /tmp/inc-shards   # write once, reuse after

The games are bench_landing.py's (policy players played once with the engine, then copied under new ids and seeds;
with `--experiment`, that experiment's games, model calls and beliefs included, played once and copied the same way),
N + N/100 of them (`--extra` to change the share) as shard files with sidecars, written outside the timing into
`<shards>/base` and `<shards>/extra`. Untimed: the base N are landed and built (whole) once, which publishes the
warehouse the increment adds to. Timed, each in a fresh process (peak RSS is the command's own): landing the extra
games, then `mafiabench build` (incremental) on the warehouse, and `mafiabench build --full-refresh` on a copy of it
taken before, so both build the same games. Each build's own per-model table is kept: the slowest models are printed.
With `--again`, a scheduled study's next run follows the first increment: as many games again (the extra games under
new ids, `<shards>/extra2`) landed and built incrementally, the build that can replay what dbt did at the first
(transform.build.replay); `--again K` runs K such increments (`<shards>/extra2` ... `extra<K+1>`), enough to reach
the one whose publish vacuums (warehouse.builds.VACUUM_EVERY: the 8th increment, `--again 7`). The first
increment replays too when this machine kept the record of an earlier build of the same shape (an earlier run of
this benchmark: the warehouse is always `w.duckdb`); `--machine-records off` makes every build's first run of a
shape pay dbt, as on a fresh machine. Each build's summary line says when it replayed.
With `--vacuum-by-run`, each increment's games are landed as a run lands them: the run first runs DuckDB's vacuum
when the next build's publish would (warehouse.builds.compact, which `mafiabench run` starts as its games start),
timed in its own process and printed apart, so the 8th build publishes without the merge.
With `--rehearse-by-run`, each increment's games are then followed by what a run does once its first games landed:
the next build's dbt rehearsed on an empty copy of the warehouse (transform.build.rehearsal), timed in its own process
and printed apart; with `--machine-records fresh` (records kept, in an empty folder of the run's own, as on a fresh
machine) the first increment then replays the rehearsal's records rather than paying dbt.
A published whole build starts a rehearsal of its first increment in a process that outlives it
(transform.build.rehearsal.after_build; with the last game landed standing for the next ones): turned off here
(`MAFIABENCH_REHEARSE_AFTER_BUILD=0`), as the figures before it were taken, unless `--rehearse-after-build`, which
waits for it to end before landing the increment (a schedule's next run comes later) and prints what it did.
At 1,000,000 games the builds run one after the other (each about 3 GB at its peak; the copy needs the warehouse's
size again on disk).
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

from bench_landing import LAND, write_shards

PER_FILE = 500  # games a shard file of bench_landing's holds


def shards(folder: Path, games: int, extra: int, experiment: Path | None = None) -> tuple[Path, Path]:
    """`folder/base` (the first `games`) and `folder/extra` (the next `extra`), written unless already there: copies
    of policy games, or of `experiment`'s games."""
    base, more = folder / "base", folder / "extra"
    if list(base.glob("*.jsonl")) and list(more.glob("*.jsonl")):
        print(f"reused the shard files of {folder}", flush=True)
        return base, more
    if games % PER_FILE or extra % PER_FILE:
        raise SystemExit(f"games and their share must be multiples of {PER_FILE} (the games of a shard file)")
    t0 = time.perf_counter()
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(more, ignore_errors=True)
    write_shards(games + extra, min(20_000, games), base, experiment=experiment)
    more.mkdir(parents=True)
    for lines in sorted(base.glob("*.jsonl"))[games // PER_FILE:]:
        for part in base.glob(lines.stem + ".*"):
            part.rename(more / part.name)
    print(f"wrote {games:,} + {extra:,} games in {time.perf_counter() - t0:.1f} s (not timed)", flush=True)
    return base, more


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int, str, str]:
    """Run `cmd`: its wall, CPU (user + system), peak RSS (MB), exit code, output and standard error."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return (wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status),
                out.read(), err.read())


def again_shards(more: Path, round_: int = 2) -> Path:
    """`more`'s games under new ids and seeds (`<shards>/extra<round_>`), written unless already there."""
    import orjson

    from mafiabench.warehouse import landing
    from mafiabench.warehouse.raw import FlatBatch
    from mafiabench.warehouse.sidecar import write_sidecar

    folder = more.parent / f"extra{round_}"
    suffix = b"-r%d" % round_
    multiplier = 2 * round_ - 1  # 3 for the second round, as before: its shards stay valid
    if list(folder.glob("*.jsonl")):
        return folder
    folder.mkdir(exist_ok=True)
    for index, shard in enumerate(sorted(more.glob("*.jsonl"))):
        batch = []
        for line in shard.read_bytes().splitlines():
            game = orjson.loads(line)
            game_id, seed = game["game_id"], game["seed"]
            renamed = b'"game_id":"%s%s"' % (game_id.encode(), suffix)
            batch.append(line.replace(b'"game_id":"%s"' % game_id.encode(), renamed)
                         .replace(b'"seed":%d,' % seed, b'"seed":%d,' % ((seed * multiplier + 1) % 2**64), 1))
        path = landing.write_shard(batch, folder, index)
        write_sidecar(path, batch, FlatBatch.of([(orjson.loads(b), b) for b in batch], keep_lines=False))
    return folder


def land(warehouse: Path, folder: Path, env: dict[str, str]) -> tuple[float, float, float]:
    wall, cpu, rss, code, _, err = timed([sys.executable, "-c", LAND, str(warehouse), str(folder)], env)
    if code:
        raise SystemExit(f"landing failed: {err[-2000:]}")
    return wall, cpu, rss


VACUUM = """
import sys
from mafiabench.warehouse import builds
from mafiabench.warehouse.raw import connect
con = connect(sys.argv[1])
seconds = builds.compact(con)
con.close()
print("VACUUM", seconds)
"""


def run_vacuum(warehouse: Path, env: dict[str, str]) -> str:
    """What `mafiabench run` does as its games start when the next publish would vacuum (`Lander.compact`)."""
    wall, cpu, _, code, out, err = timed([sys.executable, "-c", VACUUM, str(warehouse)], env)
    if code:
        raise SystemExit(f"the run's vacuum failed: {err[-2000:]}")
    seconds = out.split()[-1]
    if seconds == "None":
        return "the run's vacuum: not due"
    return f"the run's vacuum: {float(seconds):.2f} s ({wall:.1f} s process, CPU {cpu:.1f} s), while its games play"


REHEARSE = """
import sys, tempfile
from pathlib import Path
from mafiabench.transform.build import rehearsal
from mafiabench.warehouse.raw import connect
folder = Path(tempfile.mkdtemp()) / "copy"
con = connect(sys.argv[1])
exported = rehearsal.export(con, folder)
con.close()
raise SystemExit(rehearsal.main([str(folder)]) if exported else print("nothing to rehearse"))
"""


def run_rehearsal(warehouse: Path, env: dict[str, str]) -> str:
    """What `mafiabench run` does once its first games landed: the next build's dbt rehearsed on an empty copy
    (`transform.build.rehearsal`), whose records that build replays."""
    wall, cpu, _, code, out, err = timed([sys.executable, "-c", REHEARSE, str(warehouse)], env)
    if code:
        raise SystemExit(f"the run's rehearsal failed: {err[-2000:]}")
    said = rehearsal_outcome(out)
    return f"the run's rehearsal: {said} ({wall:.1f} s process, CPU {cpu:.1f} s), while its games play"


def rehearsal_outcome(out: str) -> str:
    """What the rehearsal's process said last: `rehearsal.main`'s JSON line (as the run reads it), or that there was
    nothing to rehearse. Parsed here, not by the package: the sources benchmarked are the `--src` trees."""
    import json

    last = out.strip().splitlines()[-1] if out.strip() else ""
    if not last.startswith("{"):
        return last or "nothing to rehearse"
    done = json.loads(last)
    return (f"recorded dbt {' and '.join(done['recorded']) or 'nothing'}"
            f"{'; replayed ' + ' and '.join(done['replayed']) if done['replayed'] else ''} in {done['seconds']:.1f} s")


def wait_after_build(env: dict[str, str]) -> str:
    """Wait for the rehearsal a whole build started (its lock in the machine's records folder free) and say what it
    did (`rehearsal-last.json` beside the records). Read here, not by the package: the sources are the `--src` trees."""
    import fcntl
    import json

    base = Path(env["MAFIABENCH_CACHE_DIR"]) if env.get("MAFIABENCH_CACHE_DIR") else Path(
        env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mafiabench"
    lock, last = base / "dbt-replays" / "rehearsal.lock", base / "dbt-replays" / "rehearsal-last.json"
    if not lock.exists():
        return "no rehearsal after the build"
    t0 = time.perf_counter()
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)
    waited = time.perf_counter() - t0
    outcome = json.loads(last.read_text()) if last.exists() else {}
    if "recorded" in outcome:  # a tree before the shapes: one, the games as landed
        outcome = {"as landed": outcome}
    said = [f"{shape}: " + (str(done) if shape == "error" else
                            f"recorded dbt {' and '.join(done['recorded']) or 'nothing'}"
                            f"{'; replayed ' + ' and '.join(done['replayed']) if done['replayed'] else ''} "
                            f"in {done['seconds']:.1f} s")
            for shape, done in outcome.items()]
    return (f"the rehearsal after the build: {'; '.join(said) or 'no outcome'} "
            f"(waited {waited:.1f} s for it after the build returned)")


def build(warehouse: Path, env: dict[str, str], *flags: str) -> tuple[float, float, float, int, str, str]:
    return timed([sys.executable, "-m", "mafiabench.cli", "build", "-v", "--warehouse", str(warehouse), *flags], env)


def slowest(table: str, n: int = 8) -> str:
    """The slowest models of a build's per-model table (`mafiabench build`'s standard error)."""
    rows = []
    for line in table.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[-1].endswith("s") and parts[0] in ("staging", "intermediate", "marts"):
            try:
                rows.append((float(parts[-1][:-1]), parts[1], parts[2]))
            except ValueError:
                continue
    rows.sort(reverse=True)
    total = sum(s for s, _, _ in rows)
    head = ", ".join(f"{name} {kind} {s:.2f}" for s, name, kind in rows[:n])
    return f"models {total:.1f} s summed: {head}"


def fresh_cache(folder: Path) -> Path:
    """A cache folder with no dbt records, holding this machine's parsed manifests (a parse is not what is timed)."""
    from mafiabench.transform.build import dbt_runner

    manifests = dbt_runner.manifest_cache_dir()
    if manifests.is_dir():
        shutil.copytree(manifests, folder / manifests.name)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("games", type=int)
    parser.add_argument("--extra", type=float, default=0.01, help="share of N landed after the first build")
    parser.add_argument("--shards", type=Path, help="keep the shard files here; reuse them when it has some")
    parser.add_argument("--experiment", type=Path,
                        help="copy this experiment's games (played once, as it defines them: model calls, beliefs) "
                             "rather than policy games")
    parser.add_argument("--src", type=Path, help="package sources (default: this checkout's)")
    parser.add_argument("--again", type=int, nargs="?", const=1, default=0, metavar="K",
                        help="land and build K more increments after the first (default 1)")
    parser.add_argument("--no-full", action="store_true", help="skip the --full-refresh build")
    parser.add_argument("--vacuum-by-run", action="store_true",
                        help="before each incremental build, the vacuum a run does when the next publish would")
    parser.add_argument("--rehearse-by-run", action="store_true",
                        help="before each incremental build, the rehearsal of its dbt a run does once games landed")
    parser.add_argument("--machine-records", choices=("on", "off", "fresh"), default="on",
                        help="whether a build may replay dbt's records kept on this machine by an earlier build of "
                             "the same shape (transform.build.replay; `off`: MAFIABENCH_REPLAY_CACHE=0: the first "
                             "increment runs dbt; `fresh`: kept, in an empty folder of this run's own, as on a fresh "
                             "machine, the parsed dbt manifests aside)")
    parser.add_argument("--rehearse-after-build", action="store_true",
                        help="let the whole build rehearse its first increment after it, and wait for it")
    args = parser.parse_args()
    extra = round(args.games * args.extra)
    env = {**os.environ, "PYTHONPATH": str(args.src or Path(__file__).resolve().parents[1] / "src"),
           "MAFIABENCH_REPLAY_CACHE": "0" if args.machine_records == "off" else "1",
           "MAFIABENCH_REHEARSE_AFTER_BUILD": "1" if args.rehearse_after_build else "0"}
    with tempfile.TemporaryDirectory(prefix="bench-increment-") as tmp:
        if args.machine_records == "fresh":
            env["MAFIABENCH_CACHE_DIR"] = str(fresh_cache(Path(tmp) / "cache"))
        base, more = shards(args.shards or Path(tmp) / "shards", args.games, extra, args.experiment)
        landing = Path(tmp) / "landing"
        landing.mkdir()
        for part in base.iterdir():
            os.symlink(part.resolve(), landing / part.name)
        warehouse, copy = Path(tmp) / "w.duckdb", Path(tmp) / "full.duckdb"
        wall, _, _ = land(warehouse, landing, env)
        print(f"landed {args.games:,} games in {wall:.1f} s; load average {os.getloadavg()}", flush=True)
        wall, cpu, rss, code, said, _ = build(warehouse, env)
        print(f"first build (whole): {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {rss:.0f} MB, exit code {code}"
              f"{'; dbt replayed' if 'replayed' in said else ''}; load average {os.getloadavg()}", flush=True)
        if args.rehearse_after_build:
            print(wait_after_build(env), flush=True)
        for part in more.iterdir():
            os.symlink(part.resolve(), landing / part.name)
        wall, cpu, rss = land(warehouse, landing, env)
        print(f"land {extra:,} more games: {wall:.1f} s (process), CPU {cpu:.1f} s, peak RSS {rss:.0f} MB", flush=True)
        builds: list[tuple[str, Path, tuple[str, ...]]] = [("incremental", warehouse, ())]
        builds += [(f"incremental again{'' if k == 2 else f' ({k})'}", warehouse, ()) for k in range(2, args.again + 2)]
        if not args.no_full:
            shutil.copyfile(warehouse, copy)
            builds.append(("--full-refresh", copy, ("--full-refresh",)))
        for round_, (label, path, flags) in enumerate(builds, start=1):
            if label.startswith("incremental again"):
                for part in again_shards(more, round_).iterdir():
                    os.symlink(part.resolve(), landing / part.name)
                wall, cpu, rss = land(warehouse, landing, env)
                print(f"land {extra:,} more games again: {wall:.1f} s (process)", flush=True)
            if args.vacuum_by_run and label.startswith("incremental"):
                print(run_vacuum(path, env), flush=True)
            if args.rehearse_by_run and label.startswith("incremental"):
                print(run_rehearsal(path, env), flush=True)
            wall, cpu, rss, code, summary, table = build(path, env, *flags)
            print(f"build {label}: {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {rss:.0f} MB, exit code {code}; "
                  f"load average {os.getloadavg()}", flush=True)
            print("  " + "\n  ".join(summary.strip().splitlines()), flush=True)
            print("  " + slowest(table), flush=True)
            if os.environ.get("BENCH_TABLES"):
                print(table, flush=True)
            if not label.startswith("incremental") or round_ == args.again + 1:
                path.unlink()


if __name__ == "__main__":
    main()
