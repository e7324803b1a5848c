"""The gate's Great Expectations suites, read from where each rule is declared: the YAML beside the model it guards.

A model (or source table, or Python mart) lists its suites under `meta.gx` in its YAML (`transform/sql/models/
<layer>/<model>.yml`, `models/staging/sources/<table>.yml`, `transform/models/<module>.yml`); this module turns them
into `Suite`s, so the gate holds no rule of its own and "what must hold of fct_games?" is answered in one file. A suite:

    meta:
      gx:
        - suite: raw_games                        # its name in `validation_results` (default: the model's)
          select: [game_id, status, winner]        # the frame GX sees: these columns of the model (default: all),
          where: "valid"                           #   optionally filtered; or `sql:` for any query (names of models
                                                   #   and raw tables, not `ref()`)
          checks:
            - {unique: game_id, rule: "no duplicate game ids"}

Checks (each with the `rule` it enforces, in words): `unique: col` (or a list of columns: unique together),
`not_null: col`, `not_blank: col`, `in_set: col` with `values`, `between: col` with `min` and/or `max`, and
`no_rows: true` (the query returns the violations). A value written `{param: NAME}` (and `{NAME}` in a rule) takes
a setting of the build, such as `max_unusable`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mafiabench.errors import UserError

GX_META_KEY = "gx"
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a column or relation named as is


@dataclass(frozen=True)
class Check:
    """One expectation of a suite: a GX expectation class name, its kwargs, and the rule it enforces (run as SQL
    with that expectation's meaning: `quality.expectations`)."""

    expectation: str
    kwargs: dict[str, Any]
    rule: str


@dataclass(frozen=True)
class Suite:
    """A DataFrame pulled by `query` and the expectations it must meet (an empty frame meets every column
    expectation: no beliefs landed is not a failure)."""

    name: str
    query: str
    checks: tuple[Check, ...]
    # The relation whose every row the suite reads, column for column (`select:` of plain columns, no `where:`): its
    # rows are the relation's, so an increment's rows of it are told apart by game (`quality.delta`). None otherwise.
    table: str | None = None


def ident(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def not_blank(column: str, rule: str) -> Check:
    # `\s` as Python (GX) reads it, U+00A0 and U+001C-U+001F among others: `quality.expectations` compiles it so.
    return Check("ExpectColumnValuesToNotMatchRegex", {"column": column, "regex": r"^\s*$"}, rule)


KINDS = ("unique", "not_null", "not_blank", "in_set", "between", "no_rows")


class RuleError(UserError):
    """A declared rule the gate cannot read; the message names the YAML file, the model and the check."""


def _value(value: Any, params: Mapping[str, Any], where: str) -> Any:
    if isinstance(value, dict) and set(value) == {"param"}:
        if value["param"] not in params:
            raise RuleError(f"{where}: unknown parameter {value['param']!r} (known: {', '.join(sorted(params))})")
        return params[value["param"]]
    return value


def _number(value: Any, key: str, where: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleError(f"{where}: `{key}` must be a number, got {value!r} (YAML reads 1e-9 as text: write 1.0e-9)")
    return value


def check_from_spec(spec: Any, params: Mapping[str, Any], where: str) -> Check:
    """One declared check (see the module docstring) as a `Check`."""
    if not isinstance(spec, dict):
        raise RuleError(f"{where}: a check is a mapping such as {{unique: game_id, rule: ...}}, got {spec!r}")
    kinds = [k for k in KINDS if k in spec]
    if len(kinds) != 1:
        raise RuleError(f"{where}: a check names exactly one of {', '.join(KINDS)}; got keys {sorted(spec)}")
    kind = kinds[0]
    rule = spec.get("rule")
    if not isinstance(rule, str) or not rule.strip():
        raise RuleError(f"{where}: every check says the rule it enforces (`rule:`), in words")
    try:
        rule = rule.format_map(params)
    except (KeyError, ValueError) as exc:
        raise RuleError(f"{where}: rule {rule!r} names an unknown parameter ({exc})") from None
    allowed = {kind, "rule", *{"in_set": ("values",), "between": ("min", "max")}.get(kind, ())}
    if set(spec) - allowed:
        raise RuleError(f"{where}: unknown keys {sorted(set(spec) - allowed)} for a `{kind}` check")
    target = spec[kind]
    if kind == "no_rows":
        if target is not True:
            raise RuleError(f"{where}: write `no_rows: true`")
        return Check("ExpectTableRowCountToEqual", {"value": 0}, rule)
    if isinstance(target, list) and kind == "unique" and all(isinstance(c, str) for c in target) and target:
        return Check("ExpectCompoundColumnsToBeUnique", {"column_list": list(target)}, rule)
    if not isinstance(target, str) or not target:
        raise RuleError(f"{where}: `{kind}` names a column, got {target!r}")
    if kind == "unique":
        return Check("ExpectColumnValuesToBeUnique", {"column": target}, rule)
    if kind == "not_null":
        return Check("ExpectColumnValuesToNotBeNull", {"column": target}, rule)
    if kind == "not_blank":
        return not_blank(target, rule)
    if kind == "in_set":
        values = spec.get("values")
        if not isinstance(values, list):
            raise RuleError(f"{where}: an `in_set` check lists its `values`")
        return Check("ExpectColumnValuesToBeInSet", {"column": target, "value_set": values}, rule)
    kwargs: dict[str, Any] = {"column": target}
    for key, gx_key in (("min", "min_value"), ("max", "max_value")):
        if key in spec:
            kwargs[gx_key] = _number(_value(spec[key], params, where), key, where)
    if len(kwargs) == 1:
        raise RuleError(f"{where}: a `between` check gives `min`, `max` or both")
    return Check("ExpectColumnValuesToBeBetween", kwargs, rule)


def suites_of(relation: str, meta: Mapping[str, Any], params: Mapping[str, Any], file: str) -> list[Suite]:
    """The suites one relation declares in its `meta.gx`."""
    declared = meta.get(GX_META_KEY) or []
    if not isinstance(declared, list):
        raise RuleError(f"{file}: {relation}: `meta.{GX_META_KEY}` is a list of suites")
    out = []
    for i, spec in enumerate(declared):
        where = f"{file}: {relation}: meta.{GX_META_KEY}[{i}]"
        if not isinstance(spec, dict) or set(spec) - {"suite", "select", "where", "sql", "checks"}:
            raise RuleError(f"{where}: a suite has `suite`, `select` (and `where`) or `sql`, and `checks`")
        name = spec.get("suite", relation)
        table = None
        if "sql" in spec:
            if "select" in spec or "where" in spec:
                raise RuleError(f"{where}: give `sql` or `select`/`where`, not both")
            query = str(spec["sql"]).strip()
        else:
            columns = spec.get("select")
            cols = ", ".join(columns) if isinstance(columns, list) else "*"
            query = f"select {cols} from {relation}" + (f" where {spec['where']}" if spec.get("where") else "")
            plain = not isinstance(columns, list) or all(isinstance(c, str) and _PLAIN.fullmatch(c) for c in columns)
            table = relation if plain and not spec.get("where") and _PLAIN.fullmatch(relation) else None
        checks = spec.get("checks") or []
        if not checks:
            raise RuleError(f"{where}: suite {name!r} has no checks")
        out.append(Suite(name, query, tuple(
            check_from_spec(c, params, f"{where}.checks[{j}]") for j, c in enumerate(checks)), table))
    return out


def declared_suites(docs: Mapping[str, Mapping[str, Any]], *, params: Mapping[str, Any]) -> tuple[Suite, ...]:
    """Every suite declared in the project's YAML. `docs`: relation name -> {meta, yaml (its file)}, as the
    catalogue reads them (`transform.build.catalogue.model_docs`), in the project's order (sources, staging,
    intermediate, marts, Python marts)."""
    suites = [s for name, doc in docs.items() for s in suites_of(name, doc.get("meta") or {}, params,
                                                                 str(doc.get("yaml") or "?"))]
    seen: set[str] = set()
    for s in suites:
        if s.name in seen:
            raise RuleError(f"two suites are named {s.name!r}: suite names identify results, give each its own")
        seen.add(s.name)
    return tuple(suites)
