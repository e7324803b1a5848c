"""An import does the vacuum the next build's publish would (`warehouse.builds.compact`), beside its reading, as a
run does while its games play: the build after an import publishes without paying the merge. Only when due; the
report says so. Data: the Dallinger fixtures (tests/fixtures/datasets/dallinger/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mafiabench.importers import run_import
from mafiabench.warehouse import builds
from mafiabench.warehouse.raw import connect


def _row_groups(con, table: str) -> int:  # type: ignore[no-untyped-def]
    return int(con.execute(f"select count(distinct row_group_id) from pragma_storage_info('{table}')")
               .fetchall()[0][0])


@pytest.mark.parametrize(("since", "due"), [(builds.VACUUM_EVERY - 1, True), (builds.VACUUM_EVERY - 2, False),
                                            (0, False)])
def test_an_import_vacuums_only_when_the_next_publish_would(datasets: Path, tmp_path: Path, since: int,
                                                            due: bool) -> None:
    con = connect(tmp_path / "w.duckdb")
    con.execute("create table main.per_game (game_id VARCHAR, n INTEGER)")
    for a in range(4):  # a row group each, as four increments' published rows
        con.execute(f"insert into main.per_game select 'g{a}-' || i, i from range(100) t(i)")
        con.execute("checkpoint")
    builds.record_unvacuumed(con, since)
    report = run_import("dallinger", datasets / "dallinger", con)
    assert report.landed > 0
    assert (report.compacted_s is not None) == due
    assert _row_groups(con, "per_game") == (1 if due else 4)
    assert builds.unvacuumed(con) == (0 if due else since)
    assert ("compacted the warehouse" in report.brief()) == due
    assert ("compacted the warehouse" in report.to_text()) == due
    assert (report.to_dict()["compacted_s"] is not None) == due
    con.close()
