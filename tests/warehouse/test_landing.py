"""Landing: atomic raw files, idempotent loading, the run ledger and the warehouse lock."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mafiabench.play.runner import play_game
from mafiabench.record import GameRecord, encode_record
from mafiabench.study.design import expand
from mafiabench.study.spec import parse_experiment
from mafiabench.warehouse import landing
from mafiabench.warehouse.raw import connect


def records(n: int = 6, name: str = "land") -> list[GameRecord]:
    exp = parse_experiment(
        {"name": name, "games_per_cell": n, "cells": [{"name": "c", "agents": {"default": "scripted/naive"}}]}
    )

    async def play() -> list[GameRecord]:
        return list(await asyncio.gather(*(play_game(g.spec(exp)) for g in expand(exp))))

    return asyncio.run(play())


def count(con: object, table: str) -> int:
    return con.execute(f"select count(*) from {table}").fetchone()[0]  # type: ignore[attr-defined]


def test_a_shard_file_is_whole_its_records_read_back_byte_identical_and_temp_files_are_removed(
    tmp_path: Path,
) -> None:
    folder = landing.raw_dir(tmp_path / "w.duckdb", "land")
    recs = records(3)
    path = landing.write_shard([encode_record(r)[1] for r in recs], folder, 0)
    (folder / ".tmp-half.jsonl").write_text('{"game_id": "trunc')  # what a kill -9 mid-write leaves
    assert landing.shard_files(folder) == [path]
    back = landing.raw_records(folder)
    assert list(back) == [r.game_id for r in recs]
    for r in recs:  # read back, each record is the very bytes it was
        assert landing.read_record(back[r.game_id]).to_json() == r.to_json()
    assert landing.remove_partial(folder) == 1
    assert not list(folder.glob(".tmp-*"))


def test_landing_twice_or_from_files_never_duplicates(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    recs = records(5)
    folder = landing.raw_dir(wh, "land")
    entries = [encode_record(r) for r in recs]
    path = landing.write_shard([line for _, line in entries], folder, 0)
    con = connect(wh)
    first = landing.land(con, recs[:3])
    again = landing.land_shard(con, entries, path, "land")
    from_files = landing.land_pending(con, folder, "land")  # marked landed: not even read again
    assert (first.inserted, again.inserted, again.skipped) == (3, 2, 3)
    assert (from_files.inserted, from_files.skipped) == (0, 0)
    assert count(con, "raw_games") == 5
    assert con.execute("select count(distinct game_id) from raw_model_calls").fetchone()[0] == 5
    n_calls = sum(len(r.calls) for r in recs)
    assert count(con, "raw_model_calls") == n_calls
    state = landing.landing_state(con, [r.game_id for r in recs] + ["other"])
    assert state.finished == {r.game_id for r in recs} and not state.failed
    usage = landing.usage_by_model(con, "land")
    assert usage[0][:3] == ("scripted", "naive", n_calls)
    (sha,) = con.execute("select record_sha256 from raw_games where game_id = $g", {"g": recs[0].game_id}).fetchone()
    assert sha == hashlib.sha256(entries[0][1]).hexdigest()  # the checksum of the stored line
    con.close()


def test_a_written_shard_not_yet_landed_is_landed_once_at_the_next_start(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    folder = landing.raw_dir(wh, "land")
    recs = records(4)
    landing.write_shard([encode_record(r)[1] for r in recs[:2]], folder, 0)
    landing.write_shard([encode_record(r)[1] for r in recs[2:]], folder, 1)
    con = connect(wh)
    try:
        first = landing.land_pending(con, folder, "land")
        second = landing.land_pending(con, folder, "land")
        assert (first.inserted, second.inserted, second.skipped) == (4, 0, 0)
        assert count(con, "raw_games") == 4
        assert count(con, landing.LANDED_FILES) == 2
    finally:
        con.close()


def test_a_legacy_per_game_folder_is_still_landed(tmp_path: Path) -> None:
    """Raw folders written before shard files (one `<game_id>.json` per game) resume as before."""
    wh = tmp_path / "w.duckdb"
    folder = landing.raw_dir(wh, "land")
    folder.mkdir(parents=True)
    recs = records(3)
    for r in recs:
        (folder / f"{r.game_id}.json").write_text(r.to_json(), encoding="utf-8")
    con = connect(wh)
    try:
        assert landing.land_pending(con, folder, "land").inserted == 3
        assert landing.land_pending(con, folder, "land").inserted == 0
    finally:
        con.close()
    assert {g: landing.read_record(line).to_json() for g, line in landing.raw_records(folder).items()} == {
        r.game_id: r.to_json() for r in recs
    }


def test_run_ledger_upserts_one_row_per_run(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    landing.record_run(con, {"run_id": "r1", "experiment": "e", "status": "running", "unpriced_models": []})
    landing.record_run(con, {"run_id": "r1", "experiment": "e", "status": "completed", "games_played": 4})
    assert con.execute("select status, games_played from raw_runs").fetchall() == [("completed", 4)]
    con.close()


def test_lock_refuses_a_second_holder_and_names_the_first(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    with landing.warehouse_lock(wh, what="test run"):
        with pytest.raises(landing.WarehouseLockedError) as info, landing.warehouse_lock(wh):
            pass
        assert f"pid {os.getpid()}" in str(info.value) and "test run" in str(info.value)
    with landing.warehouse_lock(wh):  # released on exit
        pass


def test_lock_held_by_another_process_and_released_when_it_dies(tmp_path: Path) -> None:
    wh = tmp_path / "w.duckdb"
    code = (
        "import sys, time; from pathlib import Path; from mafiabench.warehouse.landing import warehouse_lock\n"
        f"with warehouse_lock(Path({str(wh)!r})):\n    print('locked', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(landing.WarehouseLockedError, match=f"pid {proc.pid}"), landing.warehouse_lock(wh):
            pass
    finally:
        proc.kill()  # SIGKILL: the kernel releases the flock
        proc.wait()
    deadline = time.monotonic() + 5
    while True:
        try:
            with landing.warehouse_lock(wh):
                break
        except landing.WarehouseLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
