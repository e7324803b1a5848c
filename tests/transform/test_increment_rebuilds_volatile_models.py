"""A model whose rows are not a function of its inputs (it reads a clock, a random generator, the environment or
files: transform.build.increment.VOLATILE), in its own SQL or in a macro it calls, is rebuilt by every incremental
build, even one that keeps every other model."""

from __future__ import annotations

import shutil
from pathlib import Path

from mafiabench.publish import build_warehouse
from mafiabench.transform.build.dbt_runner import PACKAGED_PROJECT
from mafiabench.warehouse.raw import load_records
from support.increments import kept
from support.records import engine_records, fresh_con

CLOCKS = {
    "mart_clock": "select now() as built_at",
    "mart_clock_by_macro": "select {{ built_at() }} as built_at",
}


def _project(tmp: Path) -> Path:
    """The packaged project with two models that read the clock, one through a macro of the project."""
    project = tmp / "sql"
    shutil.copytree(PACKAGED_PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    (project / "macros" / "clock.sql").write_text("{% macro built_at() -%}\n    current_timestamp\n{%- endmacro %}\n")
    for name, sql in CLOCKS.items():
        (project / "models" / "marts" / f"{name}.sql").write_text(sql + "\n")
        (project / "models" / "marts" / f"{name}.yml").write_text(
            f"version: 2\n\nmodels:\n  - name: {name}\n    description: \"when the build ran\"\n"
            "    columns:\n      - name: built_at\n        description: \"the build's clock\"\n"
        )
    return project


def test_a_model_reading_the_clock_is_always_rebuilt(tmp_path: Path) -> None:
    project = _project(tmp_path)
    con = fresh_con()
    load_records(con, engine_records(3, seed=0))
    assert build_warehouse(con, sql_dir=project).published
    first = dict(con.execute("select 'mart_clock', built_at from mart_clock union all "
                             "select 'mart_clock_by_macro', built_at from mart_clock_by_macro").fetchall())

    again = build_warehouse(con, sql_dir=project)  # nothing landed: every other SQL model is kept
    assert again.published
    assert kept(again) == {m.name for m in again.models if m.kind == "sql"} - set(CLOCKS)
    later = dict(con.execute("select 'mart_clock', built_at from mart_clock union all "
                             "select 'mart_clock_by_macro', built_at from mart_clock_by_macro").fetchall())
    assert all(later[name] > first[name] for name in CLOCKS)
