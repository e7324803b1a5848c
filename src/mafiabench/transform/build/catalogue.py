"""A catalogue of every table and view in the warehouse, generated from the dbt project's own descriptions.

Each model's description, grain and column meanings come from the YAML beside it (`models/<layer>/<model>.yml`,
a raw table's in `models/staging/sources/<table>.yml`, a Python mart's beside its module in `transform/models/`); its
lineage from dbt's parsed manifest; its column types from a build into a scratch warehouse. That build takes
seconds, so its facts (types, lineage, data tests) are cached in the user's cache folder, keyed by everything that
decides them (`cache_key`): a cached run prints the same bytes as a built one, and `--no-cache` builds afresh.
`docs/catalogue.md` is this output; a test regenerates it and compares, and another requires every column of every
mart to have a description, so neither can drift from the SQL.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml  # type: ignore[import-untyped]

from mafiabench import scratch
from mafiabench.transform import LAYERS
from mafiabench.transform import models as python_models
from mafiabench.transform.build import dbt_runner
from mafiabench.transform.models import PYTHON_MODELS

if TYPE_CHECKING:  # imported by the build only: a cached run needs neither DuckDB nor the build's modules
    import duckdb

DEFAULT_PATH = Path("docs") / "catalogue.md"  # in the working folder, never the installed package's

# Bookkeeping tables the build writes itself (not models, not sources): what each build did and what its gate found.
BOOKKEEPING: dict[str, dict[str, Any]] = {
    "validation_results": {
        "grain": "one row per (build, expectation)",
        "description": "every quality-gate expectation's outcome (dbt data tests and Great Expectations) with a "
                       "sample of failing rows as JSON",
        "columns": {
            "build_id": "the build whose gate ran it (`build_runs.build_id`)",
            "suite": "a Great Expectations suite of a model's or source's YAML (`meta.gx`), or `dbt_tests` for the "
                     "dbt project's data tests",
            "expectation": "the expectation's type (GX's name), or the dbt data test's name",
            "rule": "what it checks, in words (the YAML's `rule`, or the dbt test's rule or description)",
            "kwargs_json": "its arguments as JSON (for a dbt test, the YAML file declaring it)",
            "success": "whether it held; a build is published only when every one did",
            "element_count": "the rows it checked (0 for a dbt data test, which returns only the rows breaking its "
                             "rule)",
            "unexpected_count": "the rows breaking the rule; -1 when the expectation itself raised",
            "failing_rows_json": "up to 5 of those rows as JSON (`[]` when it held; the error when it raised)",
            "run_at": "when the build stored its results (UTC)",
        },
    },
    "build_runs": {
        "grain": "one row per build",
        "description": "each build: when, its gate status, and whether it was published",
        "columns": {
            "build_id": "the build's id: its start (UTC, `YYYYMMDDTHHMMSS`) and 8 random hex digits",
            "started_at": "when it started (UTC)",
            "finished_at": "when it ended (UTC)",
            "status": "`passed` (gate passed, published), `failed` (the gate refused it: the marts published "
                      "before stay) or `unvalidated` (it stopped before its gate ran)",
            "published": "whether its marts replaced the published ones",
            "n_models": "the models it built, dbt's and the Python marts",
            "n_expectations": "the quality-gate expectations it ran (`validation_results`)",
            "n_failed": "those that failed",
            "n_games": "the games in raw_games when it ended",
            "max_landed_at": "the latest `landed_at` in raw_games then: with `n_games`, how the pages tell the "
                             "published marts are current",
            "message": "the gate's failure message (null when it passed)",
        },
    },
}
# The build's own state, which the next build reads to plan an increment or replay dbt's statements: listed so that
# a look at the warehouse's tables finds them explained, without their columns, which any version may change.
BUILD_STATE: dict[str, str] = {
    "build_increment_state": "the published build's key (its dbt project's digest, the dbt, dbt-duckdb and DuckDB "
                             "versions, its vars, the raw tables' schema), which an incremental build must share",
    "build_published_games": "the published fct_games' games: their count, a checksum of their landed marks and "
                             "raw_games' row number after them, which the next build compares with raw_games' rows "
                             "below it",
    "build_grain_rows": "the rows of each per-game raw table the published gate vouched for",
    "build_source_fingerprints": "a fingerprint of each source not keyed by game, as the published build read it",
    "build_replay": "the published build's record of dbt's statements, which a build of the same key replays",
    "build_unvacuumed": "the increments published since DuckDB's last vacuum of the file",
    "build_deleted_rows": "the rows of the published build's that the lander deleted from each per-game raw table "
                          "since (a replaced game's published rows), which the gate takes away from the rows that "
                          "build read",
}

# The Python marts' YAML, one beside each module of `transform.models` that computes them (dbt never reads them).
PYTHON_MODELS_DIR = Path(python_models.__file__).resolve().parent
PYTHON_YAML = sorted(PYTHON_MODELS_DIR.glob("*.yml"))

_LAYER_TITLES = {"staging": "Staging (views)", "intermediate": "Intermediate", "marts": "Marts"}


# libyaml's loader where PyYAML was built with it: the build reads this YAML for the gate's rules, and the pure-Python
# loader takes seconds over the project's files.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_LOADER) or {}


def model_docs(project: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every documented relation: name -> {layer, description, grain, columns {name: description}, file, meta, yaml}.

    Read from the YAML beside each model: every `*.yml` under the project's `models/` (a SQL model's
    `models/<layer>/<model>.yml`, a raw table's `sources:` entry in `models/staging/sources/<table>.yml`), then the
    Python marts' (`transform/models/<module>.yml`, beside the module that computes them; layer `marts`). In that
    order: sources, the three model layers, the Python marts. `meta` is the relation's own (its grain, the quality
    gate's suites: `quality.suites`); `yaml` the file that declares it, relative to the project (a Python mart's,
    relative to the package's parent: `mafiabench/transform/models/...`)."""
    project = project or dbt_runner.resolve_project()
    out: dict[str, dict[str, Any]] = {}
    loaded = [(p, _load(p)) for p in sorted((project / "models").rglob("*.yml"))]
    for path, doc in loaded:
        for src in doc.get("sources") or []:
            for t in src.get("tables", []):
                out[t["name"]] = {
                    "layer": "sources",
                    "description": t.get("description", ""),
                    "grain": "",
                    "columns": {c["name"]: c.get("description", "") for c in t.get("columns", [])},
                    "file": None,
                    "meta": t.get("meta") or {},
                    "yaml": path.relative_to(project).as_posix(),
                }
    files = [(layer, path, doc, path.relative_to(project).as_posix()) for layer in LAYERS for path, doc in loaded
             if path.relative_to(project / "models").parts[0] == layer]
    files += [("marts", path, _load(path), path.relative_to(_PACKAGE.parent).as_posix()) for path in PYTHON_YAML]
    for layer, path, doc, where in files:
        python = path.parent == PYTHON_MODELS_DIR
        for m in doc.get("models") or []:
            out[m["name"]] = {
                "layer": layer,
                "description": m.get("description", ""),
                "grain": (m.get("meta") or {}).get("grain", ""),
                "step": (m.get("meta") or {}).get("step"),
                "columns": {c["name"]: c.get("description", "") for c in m.get("columns", []) or []},
                "file": None if python else f"models/{layer}/{m['name']}.sql",
                "meta": m.get("meta") or {},
                "yaml": where,
            }
    return out


def _section(name: str, doc: dict[str, Any], types: list[tuple[str, str]], meta: str) -> list[str]:
    lines = [f"### `{name}`", "", meta, ""]
    if doc.get("grain"):
        lines.append(f"- **Grain:** {doc['grain']}")
    lines.append(f"- **Purpose:** {doc['description']}")
    for suite in (doc.get("meta") or {}).get("gx") or []:
        rules = list(dict.fromkeys(str(c.get("rule", "")).replace("|", "/") for c in suite.get("checks") or []))
        lines.append(f"- **Quality gate** (suite `{suite.get('suite', name)}`): " + "; ".join(rules))
    lines += ["", "| column | type | meaning |", "|---|---|---|"]
    cols: dict[str, str] = doc.get("columns", {})
    lines += [f"| `{c}` | {t} | {cols.get(c, '').replace('|', '/')} |" for c, t in types]
    lines.append("")
    return lines


# What decides the facts a build yields (column types, lineage, data tests) besides the dbt project: the package
# stages a build imports (`transform`'s closure in docs/architecture.md's import table, which a test compares) and
# the libraries that type the columns or parse the project. Their files and versions key the cached facts.
BUILD_STAGES = ("transform", "warehouse", "prices", "scratch", "errors", "record", "redact", "engine", "backends")
TYPE_LIBRARIES = ("duckdb", "dbt-core", "dbt-duckdb", "polars", "pyarrow", "numpy", "scipy")
_PACKAGE = Path(__file__).resolve().parents[2]  # the package: read (hashed), never written


def _package_files() -> list[Path]:
    files: list[Path] = []
    for stage in BUILD_STAGES:
        single = [_PACKAGE / f"{stage}.py", _PACKAGE / f"{stage}.toml"]
        files += [p for p in single if p.is_file()]
        if (_PACKAGE / stage).is_dir():
            files += [p for p in (_PACKAGE / stage).rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return sorted(files)


def cache_key(project: Path) -> str:
    """A digest of everything the scratch build's facts depend on: the dbt project's files, the package files of
    the stages a build imports and the versions of Python and the type-deciding libraries."""
    from importlib.metadata import version

    h = hashlib.sha256()
    h.update(f"project {dbt_runner._project_digest(project)}\0".encode())
    for p in _package_files():
        h.update(p.relative_to(_PACKAGE).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    for lib in TYPE_LIBRARIES:
        h.update(f"{lib} {version(lib)}\0".encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:32]


def cache_file(project: Path) -> Path:
    """Where this project's facts are kept: beside dbt's cached manifests, in the user's cache folder
    (`$MAFIABENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/mafiabench`), never the package's or the project's folder."""
    return dbt_runner.cache_dir("catalogue") / f"{cache_key(project)}.json"


def build_facts(project: Path, names: list[str]) -> dict[str, Any]:
    """Build the project into a scratch warehouse and read what the catalogue prints of it: each relation's column
    types, each model's dependencies and materialization, each data test's rule (plain JSON, so it can be cached)."""
    from mafiabench.transform.build.marts import build_models
    from mafiabench.warehouse.builds import ensure_build_tables
    from mafiabench.warehouse.raw import connect

    # A folder named after this process (mafiabench.scratch): one a killed catalogue left is swept by the next.
    with scratch.folder("catalogue") as tmp:
        con = connect(tmp / "catalogue.duckdb")
        try:
            build_models(con, sql_dir=project)
            ensure_build_tables(con)
            types = {
                name: [[r[0], r[1]] for r in con.execute(f'describe "{name}"').fetchall()]
                for name in [*names, *BOOKKEEPING]
                if _exists(con, name)
            }
            parsed = dbt_runner.manifest(project, dbt_runner.warehouse_file(con))
        finally:
            con.close()
    models = [n for n in parsed.nodes.values() if n.resource_type == "model"]
    return {
        "types": types,
        "deps": {n.name: sorted(d.split(".")[-1] for d in n.depends_on.nodes) for n in models},
        "materialized": {n.name: n.config.materialized for n in models},
        "tests": sorted(([n.name, _test_rule(n)] for n in parsed.nodes.values() if n.resource_type == "test"),
                        key=lambda t: t[0]),
    }


def _test_rule(node: Any) -> str | None:
    rule = next((ln.split(":", 1)[1].strip() for ln in node.raw_code.splitlines() if ln.startswith("-- rule:")),
                None)
    meta = getattr(node, "test_metadata", None)
    if rule is None and node.description:
        rule = f"{node.description} (on `{node.attached_node.split('.')[-1]}`)" if node.attached_node else \
            node.description
    if rule is None and meta is not None:
        rule = f"`{meta.name}` on `{node.attached_node.split('.')[-1] if node.attached_node else ''}`" + (
            f".`{node.column_name}`" if getattr(node, "column_name", None) else "")
    return rule


def facts(project: Path, names: list[str], *, cache: bool = True) -> dict[str, Any]:
    """The scratch build's facts, from the cache when its key matches (a damaged or unreadable entry is rebuilt);
    `cache=False` builds afresh (and refreshes the entry)."""
    file = cache_file(project)
    if cache:
        try:
            found = json.loads(file.read_text())
            if isinstance(found, dict) and set(found) == {"types", "deps", "materialized", "tests"}:
                return found
        except (OSError, ValueError):
            pass
    built = build_facts(project, names)
    try:
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = file.with_name(f"{file.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(json.dumps(built, sort_keys=True))
        os.replace(tmp, file)  # atomic: a concurrent reader sees no entry or the whole one
        kept = sorted(file.parent.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[FACTS_KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only cache folder only costs the next run a build
    return built


FACTS_KEPT = 8  # newest cached entries kept (each ~60 kB): one per project and package version


def generate(sql_dir: Path | None = None, *, cache: bool = True) -> str:
    """The catalogue as Markdown (deterministic: no timestamps; layers in data-flow order, names sorted); the same
    text whether the build's facts come from the cache or a fresh build (`cache=False`)."""
    project = dbt_runner.resolve_project(sql_dir)
    docs = model_docs(project)
    found = facts(project, list(docs), cache=cache)
    types: dict[str, list[tuple[str, str]]] = {n: [(c, t) for c, t in cols] for n, cols in found["types"].items()}
    deps: dict[str, list[str]] = found["deps"]
    materialized: dict[str, str] = found["materialized"]
    modules = {m.name: [m.function.rpartition(".")[0]] for m in PYTHON_MODELS}
    lines = [
        "# Warehouse catalogue",
        "",
        "Generated by `mafiabench catalogue` from the YAML beside each model (`transform/sql/models/<layer>/",
        "<model>.yml`, the raw tables' `models/staging/sources/<table>.yml`, the Python marts' `transform/models/",
        "<module>.yml`); do not edit by hand (a test regenerates it). Query any of these with",
        "`mafiabench query \"select ...\"`.",
        "",
        "## Sources",
        "",
    ]
    for name, doc in sorted(docs.items()):
        if doc["layer"] == "sources" and name in types:
            writer = (doc.get("meta") or {}).get("written_by", "the landing step")
            lines += _section(name, doc, types[name], f"*table* written by {writer}")
    for name, doc in BOOKKEEPING.items():
        lines += _section(name, doc, types[name], "*table* written by the build")
    lines += ["## The build's own state", "",
              "Tables the build keeps for the next build (not results; their columns may change in any version):", ""]
    lines += [f"- `{name}`: {purpose}" for name, purpose in BUILD_STATE.items()]
    lines.append("")
    for layer in LAYERS:
        lines += [f"## {_LAYER_TITLES[layer]}", ""]
        for name, doc in sorted(docs.items()):
            if doc["layer"] != layer:
                continue
            if doc["file"]:
                kind = "view" if materialized.get(name) == "view" else "table"
                where = f"*{kind}* from `{doc['file']}`; depends on " + (
                    ", ".join(f"`{d}`" for d in deps.get(name, [])) or "none")
            else:
                module = ".".join(["mafiabench.transform.models", *modules.get(doc["step"], [])])
                where = f"*table* from `{module}` (Python step `{doc['step']}`, after dbt)"
            lines += _section(name, doc, types.get(name, []), where)
    lines += ["## Data tests", "", "dbt data tests of the project (`tests/`: rules over several tables; the",
              "`data_tests` of each model's YAML); each returns the rows that break its rule, and the quality gate",
              "runs them, beside the Great Expectations suites listed with each model above, before a build is",
              "published.", ""]
    lines += [f"- `{name}`: {rule}" for name, rule in found["tests"]]
    lines.append("")
    return "\n".join(lines)


def _exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(con.execute(
        "select 1 from duckdb_tables() where table_name = ? union all "
        "select 1 from duckdb_views() where view_name = ? and not internal", [name, name]).fetchall())


def write(path: Path = DEFAULT_PATH, sql_dir: Path | None = None, *, cache: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(generate(sql_dir, cache=cache))
    return path
