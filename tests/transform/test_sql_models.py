"""The dbt project's shape: one model per file, lineage from ref()/source(), every model and column described in its
layer's YAML, staged builds that publish atomically."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml

from mafiabench.transform.build import dbt_runner
from mafiabench.transform.build import marts as transform
from mafiabench.transform.build.marts import BuildError, build_models
from mafiabench.warehouse.raw import connect, load_records
from support.records import cell_records, fresh_con, landed, mini_record, rows

pytestmark = pytest.mark.dbt_runs_each_build  # its tests spy on and break dbt_runner.run


PROJECT = dbt_runner.PACKAGED_PROJECT
PREFIXES = {"staging": ("stg_",), "intermediate": ("int_",), "marts": ("fct_", "dim_", "mart_")}
RAW = ("raw_games", "raw_players", "raw_events", "raw_model_calls", "raw_beliefs", "raw_replaced_calls", "raw_runs",
       "raw_protocol_cards", "ref_prices", "raw_statements", "raw_statement_labels", "raw_detections",
       "raw_import_unreadable")


def sql_files() -> list[Path]:
    return sorted(p for layer in transform.LAYERS for p in (PROJECT / "models" / layer).glob("*.sql"))


def _yaml_models(layer: str) -> dict[str, dict]:
    """Every model described in the layer's YAML files (one beside each model since the split)."""
    models: dict[str, dict] = {}
    for path in sorted((PROJECT / "models" / layer).glob("*.yml")):
        models.update({m["name"]: m for m in yaml.safe_load(path.read_text()).get("models", [])})
    return models


@pytest.mark.parametrize("path", sql_files(), ids=lambda p: p.stem)
def test_model_file_style(path: Path) -> None:
    text = path.read_text()
    layer = path.parent.name
    assert path.stem.startswith(PREFIXES[layer])
    # jaffle-shop style: a chain of CTEs ending in `select * from final`, tables only through ref()/source().
    assert text.rstrip().endswith("select * from final")
    assert re.search(r"\bfinal as \(", text)
    code = re.sub(r"--[^\n]*|\{\{.*?\}\}|'(?:[^']|'')*'", " ", text, flags=re.S)
    for m in re.finditer(r"\b(?:from|join)\s+([a-z_][a-z0-9_]*)", code, flags=re.I):
        name = m.group(1).lower()
        assert not name.startswith(("stg_", "int_", "fct_", "dim_", "mart_", "raw_", "ref_")), (
            f"{path.name}: `{name}` must be a ref() or source()")
    doc = _yaml_models(layer).get(path.stem)
    assert doc and doc.get("description") and doc["meta"].get("grain"), f"{path.stem}: describe it beside it"


def test_every_yaml_model_has_a_file() -> None:
    for layer in transform.LAYERS:
        files = {p.stem for p in (PROJECT / "models" / layer).glob("*.sql")}
        assert set(_yaml_models(layer)) == files, layer


def test_lineage_comes_from_ref_and_source(tmp_path: Path, fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    parsed = dbt_runner.manifest(PROJECT, dbt_runner.warehouse_file(con))
    nodes = {n.name: n for n in parsed.nodes.values() if n.resource_type == "model"}
    deps = {name: {d.split(".")[-1] for d in n.depends_on.nodes} for name, n in nodes.items()}
    assert "int_vote_rounds" in deps["fct_games"] and "stg_games" in deps["fct_games"]
    assert deps["stg_games"] == {"raw_games"}
    # A column named like a model is not a dependency (the regex runner took any stg_-shaped identifier).
    assert all(d in nodes or d in RAW for ds in deps.values() for d in ds)


def _copy_project(tmp_path: Path) -> Path:
    dst = tmp_path / "sql"
    shutil.copytree(PROJECT, dst)
    return dst


@pytest.fixture(scope="module")
def broken_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project with mart_win_rates broken (a column that is not there), made once for the module: dbt parses a
    copied project afresh (its path and digest are new), the slow part of a failed build."""
    d = _copy_project(tmp_path_factory.mktemp("broken"))
    (d / "models" / "marts" / "mart_win_rates.sql").write_text(
        "with final as (select no_such_column from {{ ref('fct_games') }})\nselect * from final\n"
    )
    return d


def test_unknown_reference_is_reported(tmp_path: Path) -> None:
    d = _copy_project(tmp_path)
    (d / "models" / "marts" / "mart_typo.sql").write_text(
        "with final as (select * from {{ ref('fct_gmes') }})\nselect * from final\n"
    )
    con = fresh_con()
    with pytest.raises(BuildError, match="fct_gmes"):
        build_models(con, sql_dir=d)


# Kept as views over the staging views: no copy of 9 calls a game, nor of every discussion turn with its text, nor
# of the event log and the answers the transcript pages read a chunk of games at a time (their SQL says why).
VIEW_MODELS = {"fct_model_calls", "int_turns", "mart_model_answers", "mart_transcript_events", "mart_game_details",
               "mart_capability_games"}


def test_staging_are_views_and_the_rest_tables() -> None:
    con = landed([])
    views = {r["view_name"] for r in rows(con, "select view_name from duckdb_views() where not internal")}
    tables = {r["table_name"] for r in rows(con, "select table_name from duckdb_tables()")}
    for path in sql_files():
        is_view = path.parent.name == "staging" or path.stem in VIEW_MODELS
        assert (path.stem in views) if is_view else (path.stem in tables), path.stem
    assert not any(n.startswith(dbt_runner.STAGED_PREFIX) for n in views | tables), "staged relations left behind"


def test_a_published_view_reads_published_marts_and_only_the_built_games() -> None:
    from support.records import call

    def game(gid: str) -> object:
        return mini_record(gid, calls=[call(i, "fake", "m", inp=10, out=1) for i in range(3)])

    con = fresh_con()
    load_records(con, [game("a1"), game("a2")])
    build_models(con)
    sql = rows(con, "select sql from duckdb_views() where view_name = 'fct_model_calls'")[0]["sql"]
    assert dbt_runner.STAGED_PREFIX not in sql and "fct_games" in sql
    assert rows(con, "select count(*) as n, count(distinct game_id) as g from fct_model_calls") == [{"n": 6, "g": 2}]
    # A game landed after the build (or refused by the gate) does not show through the view until a build has it.
    load_records(con, [game("b1")])
    assert rows(con, "select count(*) as n from fct_model_calls") == [{"n": 6}]
    assert rows(con, "select count(*) as n from mart_game_costs") == [{"n": 2}]
    # The next build stages the view over the staged tables, then publishes it over the published ones.
    build_models(con)
    assert rows(con, "select count(*) as n, count(distinct game_id) as g from fct_model_calls") == [{"n": 9, "g": 3}]
    assert not rows(con, "select view_name from duckdb_views() where starts_with(view_name, '__staged_')")


@pytest.mark.slow
def test_rebuild_is_idempotent_and_a_failed_model_changes_nothing(
    broken_project: Path, fresh_warehouse: duckdb.DuckDBPyConnection
) -> None:
    con = fresh_warehouse
    load_records(con, cell_records("a", n=6, mafia_wins=2, models="X"))
    wanted = ["mart_win_rates"]  # and what it reads: fct_games among them
    build_models(con, only=wanted)
    first = rows(con, "select * from mart_win_rates order by all")
    build_models(con, only=wanted)
    assert rows(con, "select * from mart_win_rates order by all") == first
    # A broken model aborts the build; what was published before stays as it was.
    load_records(con, cell_records("b", n=4, mafia_wins=4, models="X"))
    with pytest.raises(BuildError, match="mart_win_rates"):
        build_models(con, sql_dir=broken_project, only=wanted)
    assert rows(con, "select * from mart_win_rates order by all") == first
    assert rows(con, "select count(*) as n from fct_games")[0]["n"] == 6


def test_the_build_settings_hold_while_dbt_runs_and_are_restored_after_a_build_or_a_failed_one(
    broken_project: Path, monkeypatch: pytest.MonkeyPatch, fresh_warehouse: duckdb.DuckDBPyConnection
) -> None:
    """No checkpoint per model while dbt builds (a global setting, so dbt's own connection has it) and unordered
    inserts; the caller's settings come back whether the build passed or raised."""
    con = fresh_warehouse
    load_records(con, cell_records("a", n=4, mafia_wins=2, models="X"))
    settings = "select current_setting('checkpoint_threshold'), current_setting('preserve_insertion_order')"
    before = con.execute(settings).fetchall()
    seen: list[tuple] = []
    run = transform.dbt_runner.run

    def spying_run(c, *args, **kwargs):  # type: ignore[no-untyped-def]
        other = c.cursor()  # another connection to the same database, as dbt's is
        seen.append(other.execute(settings).fetchall()[0] + c.execute(settings).fetchall()[0])
        other.close()
        return run(c, *args, **kwargs)

    monkeypatch.setattr(transform.dbt_runner, "run", spying_run)
    build_models(con, only=["mart_win_rates"])
    ((other_threshold, _, threshold, ordered),) = seen
    assert other_threshold == threshold == "7.4 GiB" != before[0][0]  # 8 GB, as DuckDB prints it
    assert ordered is False
    assert con.execute(settings).fetchall() == before
    with pytest.raises(BuildError, match="mart_win_rates"):
        build_models(con, sql_dir=broken_project, only=["mart_win_rates"])
    assert con.execute(settings).fetchall() == before


def test_an_optimizer_a_failed_model_switched_off_is_on_again_after_the_build(
    monkeypatch: pytest.MonkeyPatch, fresh_warehouse: duckdb.DuckDBPyConnection
) -> None:
    """int_decisions' pre-hook switches an optimizer off (a global setting) and its post-hook back on: a build that
    fails between the two leaves the process planning with the optimizer all the same."""
    con = fresh_warehouse
    load_records(con, cell_records("a", n=4, mafia_wins=2, models="X"))
    setting = "select current_setting('disabled_optimizers')"
    before = con.execute(setting).fetchall()

    def hook_then_fail(c, *args, **kwargs):  # type: ignore[no-untyped-def]
        c.execute("set disabled_optimizers = 'build_side_probe_side'")  # as the pre-hook does
        raise transform.dbt_runner.DbtError("model int_decisions failed")  # before its post-hook

    monkeypatch.setattr(transform.dbt_runner, "run", hook_then_fail)
    with pytest.raises(BuildError, match="int_decisions"):
        build_models(con, only=["mart_win_rates"])
    assert con.execute(setting).fetchall() == before


def test_only_builds_what_is_asked_and_upstream(fresh_warehouse: duckdb.DuckDBPyConnection) -> None:
    con = fresh_warehouse
    runs = build_models(con, only=["mart_capability_scores"])
    names = {r.name for r in runs}
    assert "mart_capability_scores" in names and "int_capability_games" in names and "stg_games" in names
    assert "mart_exceptional_games" not in names


def test_a_working_folder_project_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAFIABENCH_SQL_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert dbt_runner.resolve_project() == PROJECT
    d = _copy_project(tmp_path)
    assert dbt_runner.resolve_project() == d.resolve()
    before = sorted(p.relative_to(d) for p in d.rglob("*"))
    con = fresh_con()
    (d / "models" / "marts" / "mart_local.sql").write_text("with final as (select 1 as x)\nselect * from final\n")
    build_models(con, only=["mart_local"])
    assert rows(con, "select * from mart_local") == [{"x": 1}]
    # dbt's target/ and logs/ went elsewhere: the project folder holds only what we put there.
    assert sorted(p.relative_to(d) for p in d.rglob("*")) == sorted([*before, Path("models/marts/mart_local.sql")])


def test_parsed_project_is_cached_on_disk_and_an_edit_invalidates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(dbt_runner, "_MANIFESTS", {})
    d = _copy_project(tmp_path)
    wh = tmp_path / "wh.duckdb"
    model = d / "models" / "marts" / "mart_runs.sql"

    def code(parsed: object) -> str:
        return next(n.raw_code for n in parsed.nodes.values() if n.name == "mart_runs")  # type: ignore[attr-defined]

    first = dbt_runner.manifest(d, wh)
    assert list((tmp_path / "cache" / "dbt-manifests").glob(f"*{dbt_runner.MANIFEST_SUFFIX}")), "not cached"
    assert not list(d.rglob(f"*{dbt_runner.MANIFEST_SUFFIX}")), "the cache went into the project folder"
    # A new process (no in-memory manifest) reads the cached one: no parse happens.
    parses: list[list[str]] = []
    real_invoke = dbt_runner._invoke

    def counting_invoke(runner: object, command: str, args: list[str]) -> object:
        if command == "parse":
            parses.append(args)
        return real_invoke(runner, command, args)

    monkeypatch.setattr(dbt_runner, "_invoke", counting_invoke)
    monkeypatch.setattr(dbt_runner, "_MANIFESTS", {})
    cached = dbt_runner.manifest(d, wh)
    assert parses == [] and code(cached) == code(first)
    from dbt.parser.manifest import extended_mashumaro_encoder

    # The whole manifest as dbt serializes it, byte for byte: the cache keeps every field dbt's own form keeps.
    assert cached.to_msgpack(extended_mashumaro_encoder) == first.to_msgpack(extended_mashumaro_encoder)
    # Editing a model changes the project's digest: the stale manifest is not used.
    model.write_text(model.read_text().replace("select * from final", "select * from final -- edited"))
    monkeypatch.setattr(dbt_runner, "_MANIFESTS", {})
    edited = dbt_runner.manifest(d, wh)
    assert len(parses) == 1 and code(edited).rstrip().endswith("-- edited")
    # A damaged cache file (a crash mid-write cannot leave one: it is renamed into place) costs a parse, no error.
    for file in (tmp_path / "cache" / "dbt-manifests").glob(f"*{dbt_runner.MANIFEST_SUFFIX}"):
        file.write_bytes(file.read_bytes()[:1000])
    monkeypatch.setattr(dbt_runner, "_MANIFESTS", {})
    assert code(dbt_runner.manifest(d, wh)).rstrip().endswith("-- edited") and len(parses) == 2
    # A later process builds from the cached manifest, without parsing.
    monkeypatch.setattr(dbt_runner, "_MANIFESTS", {})
    con = connect(wh)
    load_records(con, cell_records("a", n=4, mafia_wins=1, models="X"))
    build_models(con, sql_dir=d, only=["mart_runs", "fct_games"])
    assert len(parses) == 2
    assert rows(con, "select count(*) as n from fct_games")[0]["n"] == 4
