"""Errors a user can fix. The CLI prints them as one clear line (no traceback) and exits 2."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class UserError(Exception):
    """Bad input (a config, a dataset, a flag), a missing key, a busy warehouse: the message says what and where."""


@contextlib.contextmanager
def as_field_error(prefix: str = "") -> Iterator[None]:
    """Inside a pydantic validator that loads what a field names (a prompt version, a protocol, a game list): the
    loader's UserError becomes a ValueError (its message after `prefix`), which pydantic reports with the field's
    file, section and key."""
    try:
        yield
    except UserError as exc:
        raise ValueError(f"{prefix}{exc}") from None


def describe_validation_error(exc: ValidationError, source: str, prefix: str = "") -> str:
    """One line per problem: `file: field a.b = value: what is wrong`."""
    lines = []
    for err in exc.errors():
        loc = prefix + ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        if not err["loc"]:  # a rule over several fields: its message names them
            lines.append(f"{source}: {err['msg'].removeprefix('Value error, ')}")
        elif err["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown field {loc!r} (value {value!r})")
        elif err["type"] == "missing":
            lines.append(f"{source}: field {loc!r} is required")
        else:
            lines.append(f"{source}: field {loc!r} = {value!r}: {err['msg']}")
    return "\n".join(lines)


def printable(text: str) -> str:
    """Text from a dataset or a model (a game id, a file name, a reason quoting a value) for a terminal line or a
    log: control and other unprintable characters as their escapes, so none can move the cursor or colour the
    screen."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
