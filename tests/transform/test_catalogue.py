"""docs/catalogue.md is generated from the dbt project's YAML and must be kept current; every column of every mart
has a meaning, and the YAML lists exactly the columns the models build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mafiabench.cli import main
from mafiabench.transform.build import catalogue, dbt_runner
from mafiabench.transform.models import PYTHON_MODELS
from support.import_graph import parse_allowed
from support.records import landed, rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def text() -> str:
    return catalogue.generate(cache=False)  # built afresh (and cached: test_a_cached_run_prints_the_built_text)


@pytest.fixture(scope="module")
def built():  # type: ignore[no-untyped-def]
    return landed([])


def test_catalogue_is_current(text: str) -> None:
    current = (ROOT / "docs" / "catalogue.md").read_text()
    assert current == text, "docs/catalogue.md is out of date: run `mafiabench catalogue`"


def test_every_mart_column_has_a_meaning(built) -> None:  # type: ignore[no-untyped-def]
    docs = catalogue.model_docs()
    marts = [n for n, d in docs.items() if d["layer"] == "marts"]
    assert {t for s in PYTHON_MODELS for t in s.outputs} <= set(marts)
    assert len(marts) > 20
    for name in marts:
        doc = docs[name]
        assert doc["description"].strip() and doc["grain"].strip(), name
        actual = [r["column_name"] for r in rows(built, f"select column_name from (describe \"{name}\")")]
        assert list(doc["columns"]) == actual, f"{name}: the YAML's columns differ from the built table's"
        empty = [c for c, meaning in doc["columns"].items() if not meaning.strip()]
        assert not empty, f"{name}: columns without a description: {empty}"


def test_every_model_and_source_column_is_described(built) -> None:  # type: ignore[no-untyped-def]
    for name, doc in catalogue.model_docs().items():
        assert doc["description"].strip(), name
        actual = [r["column_name"] for r in rows(built, f"select column_name from (describe \"{name}\")")]
        assert list(doc["columns"]) == actual, name
        assert all(m.strip() for m in doc["columns"].values()), name


def test_catalogue_documents_every_table_with_grain_columns_and_meanings(text: str) -> None:
    for name, doc in catalogue.model_docs().items():
        section = text.split(f"### `{name}`", 1)[1].split("### ", 1)[0]
        assert "| column | type | meaning |" in section, name
        if doc["layer"] != "sources":
            assert "**Grain:**" in section, name
    assert "`detective` means town arrested its own detective" in text
    assert "assert_rates_in_unit_interval" in text and "unique_fct_games_game_id" in text


def test_each_source_says_who_writes_it_and_its_own_meanings(text: str) -> None:
    """Every source said "(the build writes `ref_prices`)" and the beliefs' probability carried the exceptional
    games' description (issue 31 item 8): each section names its own writer and its own column meanings."""
    def section(name: str) -> str:
        return text.split(f"### `{name}`", 1)[1].split("### ", 1)[0]

    assert "*table* written by the build, from `src/mafiabench/prices.toml`" in section("ref_prices")
    assert "*table* written by the landing step\n" in section("raw_games") and "ref_prices" not in section("raw_games")
    assert text.count("ref_prices`)") == 0
    for name in ("raw_beliefs", "stg_beliefs"):
        (row,) = [ln for ln in section(name).splitlines() if ln.startswith("| `probability` |")]
        assert "action distribution" in row and "rule's reference" not in row, name


def _no_build(*_: object, **__: object) -> dict[str, object]:
    raise AssertionError("the catalogue built a scratch warehouse")


def test_a_cached_run_prints_the_built_text(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scratch build took 9-12 s of every `mafiabench catalogue` (issue 31 item 8): its facts are cached, and a
    run with the build disabled prints the built text and docs/catalogue.md byte for byte."""
    assert catalogue.cache_file(dbt_runner.resolve_project()).is_file()  # the `text` fixture's build stored it
    monkeypatch.setattr(catalogue, "build_facts", _no_build)
    cached = catalogue.generate()
    assert cached == text
    assert cached == (ROOT / "docs" / "catalogue.md").read_text()


def test_no_cache_builds_afresh_and_a_damaged_entry_is_rebuilt(
    text: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    project = dbt_runner.resolve_project()
    found = catalogue.facts(project, list(catalogue.model_docs(project)))  # from the cache
    built: list[bool] = []

    def fake_build(*_: object) -> dict[str, object]:
        built.append(True)
        return found

    monkeypatch.setattr(catalogue, "build_facts", fake_build)
    out = tmp_path / "catalogue.md"
    assert main(["catalogue", "--output", str(out)]) == 0 and not built
    assert main(["catalogue", "--output", str(out), "--no-cache"]) == 0 and built == [True]
    assert out.read_text() == text
    monkeypatch.setenv("MAFIABENCH_CACHE_DIR", str(tmp_path / "cache"))
    catalogue.cache_file(project).parent.mkdir(parents=True)
    catalogue.cache_file(project).write_text("{not json")
    assert catalogue.generate() == text and built == [True, True]
    assert catalogue.generate() == text and built == [True, True]  # the rebuilt entry is read


def test_the_cache_key_follows_the_project_the_package_and_the_libraries(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    copy = tmp_path / "sql"
    shutil.copytree(dbt_runner.resolve_project(), copy, ignore=shutil.ignore_patterns("target", "logs"))
    key = catalogue.cache_key(copy)
    assert catalogue.cache_key(copy) == key
    model = copy / "models" / "marts" / "mart_win_rates.sql"
    model.write_text(model.read_text() + "\n")
    assert catalogue.cache_key(copy) != key
    model.write_text(model.read_text()[:-1])
    assert catalogue.cache_key(copy) == key

    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda n: "0.0.0" if n == "duckdb" else real(n))
    assert catalogue.cache_key(copy) != key
    monkeypatch.undo()
    files = catalogue._package_files()
    monkeypatch.setattr(catalogue, "_package_files", lambda: [p for p in files if p.name != "raw.py"])
    assert catalogue.cache_key(copy) != key  # a package file (here: left out) is part of the key
    monkeypatch.undo()
    cache = catalogue.cache_file(copy)
    assert ROOT / "src" not in cache.parents and copy not in cache.parents


def test_the_key_hashes_every_stage_a_build_may_import() -> None:
    """BUILD_STAGES is `transform`'s closure in docs/architecture.md's import table: a stage the build may import
    is hashed into the key, so editing it rebuilds the facts."""
    allowed = parse_allowed((ROOT / "docs" / "architecture.md").read_text())
    closure, todo = set(), ["transform"]
    while todo:
        stage = todo.pop()
        if stage not in closure:
            closure.add(stage)
            todo += sorted(allowed.get(stage, set()))
    assert set(catalogue.BUILD_STAGES) == closure
    files = {p.relative_to(ROOT / "src" / "mafiabench").as_posix() for p in catalogue._package_files()}
    assert {"prices.toml", "prices.py", "warehouse/raw.py", "transform/models/latent.py",
            "transform/sql/dbt_project.yml"} <= files
    assert not any(f.startswith(("dashboards/", "commands/", "study/")) for f in files)


def test_the_scratch_build_folder_is_removed_and_a_killed_ones_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scratch warehouse's folder was a nameless TemporaryDirectory, left for good when a catalogue was killed
    (issue 31 item 12): it is named after its process (mafiabench.scratch), so the next catalogue sweeps it."""
    import subprocess
    import tempfile

    from mafiabench.transform.build import marts

    gone = subprocess.Popen(["true"])
    gone.wait()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = tmp_path / f"mafiabench-catalogue-{gone.pid}-left"
    killed.mkdir()
    (killed / "catalogue.duckdb").write_text("half")
    seen: list[Path] = []

    def stop(con, **_: object) -> None:  # type: ignore[no-untyped-def]
        seen.extend(tmp_path.glob("mafiabench-catalogue-*"))
        raise RuntimeError("stopped")

    monkeypatch.setattr(marts, "build_models", stop)
    with pytest.raises(RuntimeError, match="stopped"):
        catalogue.build_facts(dbt_runner.resolve_project(), [])
    assert len(seen) == 1 and seen[0] != killed  # the killed one was swept before ours was made
    assert not list(tmp_path.glob("mafiabench-catalogue-*"))  # ours is removed at the end of the build


def test_the_builds_own_tables_are_each_explained(landed_increment: Path) -> None:
    """validation_results' and build_runs' columns each have a meaning, as a model's do; every other table the build
    keeps for itself is in the catalogue's list of the build's state (a new one must be added there)."""
    import duckdb

    built = duckdb.connect(str(landed_increment), read_only=True)  # a published build's warehouse
    try:
        for name, doc in catalogue.BOOKKEEPING.items():
            actual = [r["column_name"] for r in rows(built, f"select column_name from (describe \"{name}\")")]
            assert list(doc["columns"]) == actual, name
            assert all(m.strip() for m in doc["columns"].values()), name
        kept = {r["table_name"] for r in rows(built, "select table_name from duckdb_tables() "
                                                     "where starts_with(table_name, 'build_')")}
    finally:
        built.close()
    assert kept - set(catalogue.BOOKKEEPING) == set(catalogue.BUILD_STATE)
