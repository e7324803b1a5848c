"""Shard sidecars (Parquet next to the lines): a backlog landed from them has exactly the rows landed from the lines,
and a sidecar that is missing, damaged, stale or of another version is passed over for the lines, losing nothing and
landing nothing twice."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from mafiabench.play.runner import play_game
from mafiabench.record import GameRecord, encode_record
from mafiabench.study.design import expand
from mafiabench.study.spec import parse_experiment
from mafiabench.warehouse import landing, sidecar
from mafiabench.warehouse.raw import GRAIN_TABLES, FlatBatch, connect
from support.records import engine_records

EXPERIMENT = "side"


def scripted(n: int) -> list[GameRecord]:
    exp = parse_experiment(
        {"name": EXPERIMENT, "games_per_cell": n, "cells": [{"name": "c", "agents": {"default": "scripted/naive"}}],
         "statements": {}}  # statement labels on: raw_statements and raw_statement_labels get rows too
    )

    async def play() -> list[GameRecord]:
        return list(await asyncio.gather(*(play_game(g.spec(exp)) for g in expand(exp))))

    return asyncio.run(play())


def failed_copy(rec: GameRecord) -> GameRecord:
    d = rec.to_dict()
    d["outcome"] = {**d["outcome"], "status": "failed", "winner": None}
    d["error"] = "ConnectionError: the provider went away"
    return GameRecord.from_dict(d)


def write(folder: Path, shards: list[list[GameRecord]]) -> list[Path]:
    """Shard files with their sidecars, as the shard writers write them."""
    paths = []
    for i, recs in enumerate(shards):
        entries = [encode_record(r) for r in recs]
        lines = [line for _, line in entries]
        path = landing.write_shard(lines, folder, i)
        assert sidecar.write_sidecar(path, lines, FlatBatch.of(entries)) == sidecar.sidecar_path(path)
        paths.append(path)
    return paths


def land(folder: Path, warehouse: Path, **kw: int) -> landing.LoadResult:
    con = connect(warehouse)
    try:
        return landing.land_pending(con, folder, EXPERIMENT, **kw)
    finally:
        con.close()


def differences(a: Path, b: Path) -> dict[str, tuple[int, int, int]]:
    """Per raw table (and the landed-files ledger): rows in a, rows of a not in b, rows of b not in a (`except all`;
    the landing time differs by construction)."""
    con = duckdb.connect()
    con.execute(f"attach '{a}' as a (read_only)")
    con.execute(f"attach '{b}' as b (read_only)")
    out = {}
    for table, cols in [*((t, "* exclude (landed_at)" if t == "raw_games" else "*") for t in GRAIN_TABLES),
                        (landing.LANDED_FILES, "experiment, file, games")]:
        n = con.execute(f"select count(*) from a.{table}").fetchone()[0]  # type: ignore[index]
        ab, ba = (
            con.execute(f"select count(*) from (select {cols} from {x}.{table} except all "
                        f"select {cols} from {y}.{table})").fetchone()[0]  # type: ignore[index]
            for x, y in (("a", "b"), ("b", "a"))
        )
        out[table] = (n, ab, ba)
    con.close()
    return out


def lines_only(folder: Path, dest: Path) -> Path:
    shutil.copytree(folder, dest)
    for d in dest.glob(f"*{sidecar.SUFFIX}"):
        shutil.rmtree(d)
    return dest


@pytest.fixture(scope="module")
def games() -> list[GameRecord]:
    """Games filling every raw table: scripted games (model calls, statement labels) and classic games in belief mode
    (beliefs)."""
    beliefs = engine_records(4, seed=3, variant="classic", rules={"n_players": 6, "n_mafia": 1, "decision": "belief"})
    return scripted(8) + beliefs


def test_rows_landed_from_sidecars_are_the_rows_landed_from_the_lines(tmp_path: Path, games: list[GameRecord]) -> None:
    folder = tmp_path / "raw" / EXPERIMENT
    replayed = games[1]
    shards = [
        [games[0], failed_copy(replayed), games[2]],  # a game that failed, replayed two shards later
        games[3:6],
        [games[6], replayed, games[7]],
        games[8:10],
        games[10:],
        [games[0]],  # a retried shard's game, written twice
    ]
    write(folder, shards)
    plain = lines_only(folder, tmp_path / "plain" / EXPERIMENT)
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    ra = land(folder, a, group_files=4)  # two groups: 4 then 2 files
    rb = land(plain, b)
    assert (ra.files_from_sidecar, ra.files_from_lines) == (6, 0)
    assert (rb.files_from_sidecar, rb.files_from_lines) == (0, 6)
    assert (ra.inserted, ra.replaced, ra.skipped) == (rb.inserted, rb.replaced, rb.skipped) == (12, 1, 1)
    diff = differences(a, b)
    assert all(n > 0 for n, _, _ in diff.values()), diff  # every table holds rows: the comparison means something
    assert {t: (ab, ba) for t, (_, ab, ba) in diff.items()} == {t: (0, 0) for t in diff}
    con = duckdb.connect(str(a), read_only=True)
    status = con.execute("select status from raw_games where game_id = $g", {"g": replayed.game_id}).fetchone()
    replaced = con.execute("select count(*) from raw_replaced_calls").fetchone()
    con.close()
    assert status == (replayed.outcome["status"],) and replaced == (len(replayed.calls),)
    assert land(folder, a).inserted == 0  # every file marked landed


def test_a_missing_stale_damaged_or_foreign_sidecar_falls_back_to_the_lines(
    tmp_path: Path, games: list[GameRecord]
) -> None:
    folder = tmp_path / "raw" / EXPERIMENT
    paths = write(folder, [games[i : i + 2] for i in range(0, 12, 2)])
    plain = lines_only(folder, tmp_path / "plain" / EXPERIMENT)
    cols = [sidecar.sidecar_path(p) for p in paths]
    events = cols[0] / "raw_events.parquet"
    events.write_bytes(events.read_bytes()[: events.stat().st_size // 2])  # truncated
    g = cols[1] / "raw_games.parquet"
    data = bytearray(g.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64  # damaged in the middle, same size
    g.write_bytes(bytes(data))
    shutil.rmtree(cols[2])
    shutil.copytree(cols[5], cols[2])  # another shard's sidecar
    (cols[3] / "raw_players.parquet").unlink()  # a table file missing
    manifest = json.loads((cols[4] / sidecar.MANIFEST).read_text())
    (cols[4] / sidecar.MANIFEST).write_text(json.dumps({**manifest, "version": sidecar.VERSION + 1}))
    reasons = [sidecar.check_sidecar(p)[1] for p in paths]
    assert reasons == ["raw_events file damaged or replaced", "raw_games file damaged or replaced",
                       "made from another lines file", f"missing file: {cols[3] / 'raw_players.parquet'}",
                       "another format or version", ""]
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    ra, rb = land(folder, a), land(plain, b)
    assert (ra.files_from_sidecar, ra.files_from_lines, ra.inserted) == (1, 5, 12)
    assert (rb.files_from_lines, rb.inserted) == (6, 12)
    assert {t: (ab, ba) for t, (_, ab, ba) in differences(a, b).items()} == {t: (0, 0) for t in GRAIN_TABLES} | {
        landing.LANDED_FILES: (0, 0)}
    assert land(folder, a).inserted == 0


def test_damage_the_checksums_miss_is_caught_by_the_reader_and_the_lines_land(
    tmp_path: Path, games: list[GameRecord]
) -> None:
    """A table file replaced by garbage with its manifest entry forged to match: DuckDB refuses to read it, the group
    is landed file by file, and that file from its lines."""
    folder = tmp_path / "raw" / EXPERIMENT
    paths = write(folder, [games[:3], games[3:6], games[6:9]])
    cols = sidecar.sidecar_path(paths[1])
    garbage = b"PAR1" + b"\x00" * 100 + b"PAR1"
    (cols / "raw_games.parquet").write_bytes(garbage)
    manifest = json.loads((cols / sidecar.MANIFEST).read_text())
    manifest["tables"]["raw_games"].update(size=len(garbage), crc32=sidecar.crc32_file(cols / "raw_games.parquet")[1])
    (cols / sidecar.MANIFEST).write_text(json.dumps(manifest))
    assert sidecar.check_sidecar(paths[1])[0] is not None  # the forgery passes the checksums
    r = land(folder, tmp_path / "a.duckdb")
    assert (r.files_from_sidecar, r.files_from_lines, r.inserted) == (2, 1, 9)
    diff = differences(tmp_path / "a.duckdb", (lambda b: (land(lines_only(folder, tmp_path / "p" / EXPERIMENT), b),
                                                          b)[1])(tmp_path / "b.duckdb"))
    assert {t: (ab, ba) for t, (_, ab, ba) in diff.items()} == {t: (0, 0) for t in diff}


def test_a_half_written_sidecar_is_removed_and_an_unwritable_one_does_not_fail_the_shard(
    tmp_path: Path, games: list[GameRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "raw" / EXPERIMENT
    (path,) = write(folder, [games[:2]])
    half = folder / f"{sidecar.TMP_PREFIX}abc{sidecar.SUFFIX}"
    half.mkdir()
    (half / "raw_games.parquet").write_bytes(b"PAR1")
    assert landing.remove_partial(folder) == 1 and not half.exists()

    def full_disk(*args: object, **kw: object) -> None:
        raise OSError(28, "No space left on device")

    import pyarrow.parquet as pq  # the sidecar imports it when it writes (a run with nothing to play never does)

    monkeypatch.setattr(pq, "write_table", full_disk)
    entries = [encode_record(r) for r in games[2:4]]
    lines = [line for _, line in entries]
    second = landing.write_shard(lines, folder, 1)
    assert sidecar.write_sidecar(second, lines, FlatBatch.of(entries)) is None
    assert not list(folder.glob(f"{sidecar.TMP_PREFIX}*")) and not sidecar.sidecar_path(second).exists()
    monkeypatch.undo()
    r = land(folder, tmp_path / "w.duckdb")
    assert (r.files_from_sidecar, r.files_from_lines, r.inserted) == (1, 1, 4)
    assert path.exists()


def test_a_folder_name_duckdb_would_read_as_a_pattern_lands_its_sidecars_one_by_one(
    tmp_path: Path, games: list[GameRecord]
) -> None:
    """`study[2]/x` as a pattern matches `study2/x`: a neighbour folder holds other games under the same names."""
    folder = tmp_path / "raw" / "study[2]"
    paths = write(folder, [games[:2], games[2:4]])
    other = tmp_path / "raw" / "study2"
    other.mkdir()
    for path, recs in zip(paths, [games[4:6], games[6:8]], strict=True):
        entries = [encode_record(r) for r in recs]
        lines = [line for _, line in entries]
        (other / path.name).write_bytes(b"\n".join(lines) + b"\n")
        sidecar.write_sidecar(other / path.name, lines, FlatBatch.of(entries))
    r = land(folder, tmp_path / "w.duckdb")
    assert (r.files_from_sidecar, r.files_from_lines, r.inserted) == (2, 0, 4)
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    ids = {g for (g,) in con.execute("select distinct game_id from raw_events").fetchall()}
    con.close()
    assert ids == {g.game_id for g in games[:4]}


def test_lines_untouched_since_their_sidecar_are_not_read_again_and_changed_ones_are(
    tmp_path: Path, games: list[GameRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's size and modification time of the lines vouch for them; a file touched since is checked by its
    CRC-32: a copy with a new time still lands from its sidecar, a same-size edit lands from its (edited) lines."""
    folder = tmp_path / "raw" / EXPERIMENT
    edited, copied, untouched = write(folder, [games[:2], games[2:4], games[4:6]])
    data = edited.read_bytes()
    edited.write_bytes(data.replace(b'"cell":"c"', b'"cell":"d"', 1))  # the first game moved to another cell
    assert edited.stat().st_size == len(data)
    copied.write_bytes(copied.read_bytes())  # the same content written again
    for path in (edited, copied):  # a later time, whatever the clock's tick
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    read: list[str] = []
    crc32_file = sidecar.crc32_file
    monkeypatch.setattr(sidecar, "crc32_file", lambda p: (read.append(p.name), crc32_file(p))[1])
    reasons = [sidecar.check_sidecar(p)[1] for p in (edited, copied, untouched)]
    assert reasons == ["made from another lines file", "", ""]
    assert [n for n in read if n.endswith(".jsonl")] == [edited.name, copied.name]  # not the untouched file
    r = land(folder, tmp_path / "w.duckdb")
    assert (r.files_from_sidecar, r.files_from_lines, r.inserted) == (2, 1, 6)
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    cells = con.execute("select cell, count(*) from raw_games group by cell order by cell").fetchall()
    con.close()
    assert cells == [("c", 5), ("d", 1)]


@pytest.mark.parametrize(("group_bytes", "groups"), [(1, 3), (10**12, 1)])
def test_a_group_of_sidecars_is_bounded_by_its_bytes(
    tmp_path: Path, games: list[GameRecord], monkeypatch: pytest.MonkeyPatch, group_bytes: int, groups: int
) -> None:
    """Shards with long prompts (model calls) would make a group of 2,000 sidecars gigabytes: the byte bound closes a
    group once its Parquet files reach `SIDECAR_GROUP_BYTES`, whatever the number of shards."""
    folder = tmp_path / "raw" / EXPERIMENT
    write(folder, [games[:2], games[2:4], games[4:6]])
    sizes: list[int] = []
    insert = landing._insert_sidecars
    monkeypatch.setattr(landing, "SIDECAR_GROUP_BYTES", group_bytes)
    monkeypatch.setattr(
        landing, "_insert_sidecars", lambda con, group, e: (sizes.append(len(group)), insert(con, group, e))[1]
    )
    r = land(folder, tmp_path / "w.duckdb")
    assert (r.files_from_sidecar, r.inserted) == (3, 6)
    assert len(sizes) == groups and sum(sizes) == 3


def test_a_table_its_writer_counted_empty_is_not_opened(tmp_path: Path, games: list[GameRecord],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Policy and scripted games have no beliefs: the lander does not open the 2,000 empty Parquet files of a
    million games' beliefs. Shown by removing them once checked: the shards still land from their sidecars, whole."""
    folder = tmp_path / "raw" / EXPERIMENT
    scripted_only = games[:8]  # the fixture's scripted games: model calls, no beliefs
    paths = write(folder, [scripted_only[:3], scripted_only[3:6]])
    empty = [sidecar.sidecar_path(p) / "raw_beliefs.parquet" for p in paths]
    assert all(f.is_file() for f in empty)
    insert = landing._insert_sidecars

    def remove_then_insert(con: duckdb.DuckDBPyConnection, group: list[sidecar.Sidecar], e: str) -> int:
        assert all(not s.has_rows("raw_beliefs") and s.has_rows("raw_events") for s in group)
        for f in empty:
            f.unlink()
        return insert(con, group, e)

    monkeypatch.setattr(landing, "_insert_sidecars", remove_then_insert)
    r = land(folder, tmp_path / "w.duckdb")
    assert (r.files_from_sidecar, r.files_from_lines, r.inserted) == (2, 0, 6)
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    counts = con.execute("select (select count(*) from raw_games), (select count(*) from raw_model_calls), "
                         "(select count(*) from raw_beliefs)").fetchone()
    con.close()
    assert counts is not None and counts[0] == 6 and counts[1] > 0 and counts[2] == 0
