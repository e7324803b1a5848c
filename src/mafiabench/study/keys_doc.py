"""docs/experiment.md: every section and key of an experiment file, generated from the schema itself.

The pydantic models of `study.spec` (and the sections they nest: endpoints, models, cells, design, [detector], ...)
are walked field by field: key, type, default, description, and an example value taken from the first shipped
experiment (experiments/*.toml) that sets it. A new section or key appears without anyone writing it down; a test
regenerates the file and compares, as for docs/catalogue.md.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from mafiabench.engine import VARIANTS
from mafiabench.errors import UserError
from mafiabench.play.config import read_toml
from mafiabench.study.spec import Experiment

DEFAULT_PATH = Path("docs") / "experiment.md"  # in the working folder, never the installed package's
EXAMPLES = Path("experiments")
MAX_EXAMPLE = 70  # characters of an example value shown


def _args(annotation: Any) -> tuple[Any, ...]:
    return typing.get_args(annotation)


def _strip(annotation: Any) -> Any:
    """`Annotated[X, ...]` -> X."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = _args(annotation)[0]
    return annotation


def type_text(annotation: Any) -> str:
    """A reader's name for a field's type: `integer`, `list of string`, `table of [endpoints.<name>]`, ..."""
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [type_text(a) for a in _args(annotation) if a is not type(None)]
        return " or ".join(dict.fromkeys(parts))
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(a) for a in _args(annotation))
    if origin in (list, tuple, set, frozenset):
        inner = [a for a in _args(annotation) if a is not Ellipsis]
        if origin is tuple and len(inner) > 1 and len(set(inner)) == 1:
            return f"list of {len(inner)} {type_text(inner[0])}"
        return "list of " + " or ".join(dict.fromkeys(type_text(a) for a in inner)) if inner else "list"
    if origin is dict:
        return f"table of {type_text(_args(annotation)[1])}" if _args(annotation) else "table"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation is Any:
        return "any"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    annotation = _strip(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in _args(annotation) for m in _models_in(a)]


def _container(annotation: Any) -> str:
    """How a section is written: `table` ([x]), `array` ([[x]]) or `map` ([x.<name>])."""
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for a in _args(annotation):
            if _models_in(a):
                return _container(a)
    if origin in (list, tuple):
        return "array"
    if origin is dict:
        return "map"
    return "table"


def toml_value(value: Any) -> str:
    """A value as it is written in TOML (inline tables and arrays)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_defaults=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        inner = ", ".join(f"{k if str(k).replace('_', '').replace('-', '').isalnum() else json.dumps(k)} = "
                          f"{toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, list | tuple | set | frozenset):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if value is None or value is PydanticUndefined:
        return "unset"
    if isinstance(value, BaseModel):
        return "the section's defaults"
    if value in ({}, [], ()):
        return "none"
    return f"`{toml_value(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _example(files: list[tuple[str, dict[str, Any]]], path: tuple[str, ...], key: str) -> str:
    """`value` (file) from the first shipped experiment that sets `key` under `path` ('*' = any item or name)."""
    def found(node: Any, rest: tuple[str, ...]) -> Any:
        if not rest:
            return node.get(key, PydanticUndefined) if isinstance(node, dict) else PydanticUndefined
        head, tail = rest[0], rest[1:]
        if head == "*":
            items = node if isinstance(node, list) else list(node.values()) if isinstance(node, dict) else []
            for item in items:
                value = found(item, tail)
                if value is not PydanticUndefined:
                    return value
            return PydanticUndefined
        return found(node.get(head), tail) if isinstance(node, dict) else PydanticUndefined

    for name, data in files:
        value = found(data, path)
        if value is not PydanticUndefined:
            text = toml_value(value)
            if len(text) > MAX_EXAMPLE:
                text = text[: MAX_EXAMPLE - 3] + "..."
            return f"`{text}` ({name})"
    return ""


def _section_title(path: tuple[str, ...], container: str) -> str:
    name = ".".join(p if p != "*" else "<name>" for p in path)
    if container == "array":
        return f"[[{name.removesuffix('.<name>')}]]"
    return f"[{name}]"


def generate(examples: Path = EXAMPLES) -> str:
    """The reference as Markdown (deterministic: fields in declaration order, sections as they are first met)."""
    files = []
    for p in sorted(examples.glob("*.toml"), key=lambda p: (p.name != "demo.toml", p.name)):
        try:
            files.append((f"{examples.name}/{p.name}", read_toml(p)))
        except UserError:  # an unreadable example only loses its examples; `preview` reports it
            continue
    lines = [
        "# Experiment files",
        "",
        "Generated by `mafiabench schema` from the experiment schema (`mafiabench.study.spec` and the",
        "sections it nests); do not edit by hand (a test regenerates it). Every section and key an experiment file",
        "may hold, its type, its default and what it does; the example is the value the first shipped experiment",
        "(`experiments/*.toml`) that sets the key gives it. Paths in the file are relative to the file.",
        "`mafiabench preview FILE` validates a file and shows what it would play; an unknown key is an error naming",
        "the file, the key and its value.",
        "",
    ]
    queue: list[tuple[tuple[str, ...], type[BaseModel], str, str]] = [((), Experiment, "table", "")]
    seen: set[tuple[str, ...]] = set()
    while queue:
        path, model, container, said = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        title = "Top level" if not path else _section_title(path, container)
        doc = " ".join((model.__doc__ or "").split())
        lines += [f"## {title}", ""]
        if said:
            lines += [_cell(said), ""]
        if doc and path:
            lines += [f"*{model.__name__}*: {doc}", ""]
        lines += ["| key | type | default | description | example |", "|---|---|---|---|---|"]
        nested: list[tuple[tuple[str, ...], type[BaseModel], str, str]] = []
        for key, field in model.model_fields.items():
            shown = field.alias or key
            sub = _models_in(field.annotation)
            kind = _container(field.annotation) if sub else ""
            where = (*path, shown) if kind != "map" else (*path, shown, "*")
            where_items = (*where, "*") if kind == "array" else where
            link = f" (see {_section_title(where_items, kind)})" if sub else ""
            example = "" if sub else _example(files, path, shown)  # a section's keys have their own examples
            lines.append(f"| `{shown}` | {_cell(type_text(field.annotation))}{link} | {_cell(default_text(field))} "
                         f"| {_cell(field.description or '')} | {_cell(example)} |")
            for m in sub:
                nested.append((where_items, m, kind, field.description or ""))
        lines.append("")
        queue = nested + queue  # depth first: a section's own sections follow it
    for variant, (_, rules_model) in VARIANTS.items():
        lines += [f"## [rules] of `variant = \"{variant}\"`", "",
                  "The variant's rule options (the engine's own rules model: a cell's `rules` override the file's).",
                  "", "| key | type | default | description | example |", "|---|---|---|---|---|"]
        chosen = [(n, d) for n, d in files if d.get("variant", "mini-mafia") == variant]
        for key, field in rules_model.model_fields.items():
            lines.append(f"| `{key}` | {_cell(type_text(field.annotation))} | {_cell(default_text(field))} "
                         f"| {_cell(field.description or '')} | {_cell(_example(chosen, ('rules',), key))} |")
        lines.append("")
    return "\n".join(lines)


def write(path: Path = DEFAULT_PATH, examples: Path = EXAMPLES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(generate(examples))
    return path
