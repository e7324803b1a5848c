"""The SQL project's shape: one model per file with a stated grain, dependencies read from the SQL, idempotent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mafiabench.build import marts as transform
from mafiabench.build.marts import BuildError, build_models, build_order, discover_models, references
from mafiabench.warehouse.raw import load_records
from test_marts_common import cell_records, fresh_con, landed, rows

SQL_DIR = transform.default_sql_dir()


def sql_files() -> list[Path]:
    return sorted(p for layer in transform.LAYERS for p in (SQL_DIR / layer).glob("*.sql"))


@pytest.mark.parametrize("path", sql_files(), ids=lambda p: p.stem)
def test_model_file_style(path: Path) -> None:
    text = path.read_text()
    header = transform.parse_header(text)
    assert header.get("grain") and header.get("purpose"), "header must state grain and purpose"
    assert path.stem.startswith(transform.PREFIXES[path.parent.name])
    # jaffle-shop style: a chain of CTEs ending in `select * from final`.
    assert text.rstrip().endswith("select * from final")
    assert re.search(r"\bfinal as \(", text)


def test_order_comes_from_the_models_references() -> None:
    models = discover_models(SQL_DIR)
    order = [m.name for m in build_order(models)]
    position = {name: i for i, name in enumerate(order)}
    produced = {t: m.name for m in models.values() for t in m.tables}
    for m in models.values():
        for dep in m.depends_on:
            if dep in produced:
                assert position[produced[dep]] < position[m.name], (dep, m.name)
    assert models["fct_games"].depends_on == tuple(sorted(models["fct_games"].depends_on))
    assert "int_vote_rounds" in models["fct_games"].depends_on


def test_references_ignore_comments_and_strings() -> None:
    sql = "-- from int_fake\nselect 'stg_nothing' as x from stg_games /* mart_zzz */ join int_votes using (game_id)"
    assert references(sql) == {"stg_games", "int_votes"}


def _copy_sql(tmp_path: Path) -> Path:
    for p in SQL_DIR.rglob("*.sql"):
        dst = tmp_path / p.relative_to(SQL_DIR)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(p.read_text())
    return tmp_path


def test_unknown_reference_and_cycle_are_reported(tmp_path: Path) -> None:
    d = _copy_sql(tmp_path)
    (d / "marts" / "mart_typo.sql").write_text(
        "-- grain: x\n-- purpose: y\nwith final as (select * from fct_gmes)\nselect * from final\n"
    )
    with pytest.raises(BuildError, match="fct_gmes"):
        discover_models(d)
    (d / "marts" / "mart_typo.sql").write_text(
        "-- grain: x\n-- purpose: y\nwith final as (select * from mart_other)\nselect * from final\n"
    )
    (d / "marts" / "mart_other.sql").write_text(
        "-- grain: x\n-- purpose: y\nwith final as (select * from mart_typo)\nselect * from final\n"
    )
    with pytest.raises(BuildError, match="cycle"):
        build_order(discover_models(d))


def test_missing_header_is_rejected(tmp_path: Path) -> None:
    d = _copy_sql(tmp_path)
    (d / "marts" / "mart_bare.sql").write_text("with final as (select 1)\nselect * from final\n")
    with pytest.raises(BuildError, match="grain"):
        discover_models(d)


def test_staging_are_views_and_the_rest_tables() -> None:
    con = landed([])
    views = {r["view_name"] for r in rows(con, "select view_name from duckdb_views() where not internal")}
    tables = {r["table_name"] for r in rows(con, "select table_name from duckdb_tables()")}
    models = discover_models(SQL_DIR)
    for m in models.values():
        for t in m.tables:
            assert (t in views) if m.layer == "staging" else (t in tables), t


def test_rebuild_is_idempotent_and_a_failed_model_rolls_back(tmp_path: Path) -> None:
    con = fresh_con()
    load_records(con, cell_records("a", n=6, mafia_wins=2, models="X"))
    build_models(con)
    first = rows(con, "select * from mart_win_rates order by all")
    build_models(con)
    assert rows(con, "select * from mart_win_rates order by all") == first
    # A broken model aborts the build; what was built before stays as it was.
    d = _copy_sql(tmp_path)
    (d / "marts" / "mart_win_rates.sql").write_text(
        "-- grain: x\n-- purpose: y\nwith final as (select no_such_column from fct_games)\nselect * from final\n"
    )
    load_records(con, cell_records("b", n=4, mafia_wins=4, models="X"))
    with pytest.raises(BuildError, match="mart_win_rates"):
        build_models(con, sql_dir=d)
    assert rows(con, "select * from mart_win_rates order by all") == first
    assert rows(con, "select count(*) as n from fct_games")[0]["n"] == 6


def test_only_builds_what_is_asked_and_upstream() -> None:
    con = fresh_con()
    runs = build_models(con, only=["mart_capability_scores"])
    names = {r.name for r in runs}
    assert "mart_capability_scores" in names and "int_capability_games" in names and "stg_games" in names
    assert "mart_exceptional_games" not in names
