"""Errors a user can fix. The CLI prints them as one clear line (no traceback) and exits 2."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


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


def printable(text: str) -> str:
    """Text from a dataset or a model (a game id, a file name, a reason quoting a value) for a terminal line or a
    log: control and other unprintable characters as their escapes, so none can move the cursor or colour the
    screen."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
