"""Read-only access to the built warehouse for page builders: which marts exist, rows as dicts, small frames.

Pages read marts only (`fct_`, `dim_`, `mart_`; never `raw_`, `stg_` or `int_`: tests/test_pages_read_marts.py). A
mart that a build did not produce makes its section say so instead of failing the whole render.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import duckdb


class Marts:
    """A thin reader over one DuckDB connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        rows = con.execute(
            "select table_name from duckdb_tables() union select view_name from duckdb_views() where not internal"
        ).fetchall()
        self.tables: set[str] = {r[0] for r in rows}
        self._columns: dict[str, set[str]] = {}

    def has(self, *names: str) -> bool:
        return all(n in self.tables for n in names)

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            if table not in self.tables:
                self._columns[table] = set()
            else:
                cur = self.con.execute(f"select * from {table} limit 0")
                self._columns[table] = {d[0] for d in cur.description}
        return self._columns[table]

    def rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params) if params is not None else self.con.execute(sql)
        cols = [d[0] for d in cur.description]
        return [{c: clean(v) for c, v in zip(cols, r, strict=True)} for r in cur.fetchall()]

    def one(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> dict[str, Any]:
        out = self.rows(sql, params)
        return out[0] if out else {}

    def scalar(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> Any:
        cur = self.con.execute(sql, params) if params is not None else self.con.execute(sql)
        row = cur.fetchone()
        cur.fetchall()
        return clean(row[0]) if row else None


def clean(value: Any) -> Any:
    """DuckDB values → JSON-friendly Python (Vega data and tables): NaN → None, dates → ISO text."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime | date):
        return value.isoformat(sep=" ", timespec="seconds") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def options(values: Iterable[Any]) -> list[Any]:
    """Distinct values in first-seen order, without None: the options of a chart's dropdown."""
    return [v for v in dict.fromkeys(values) if v is not None]


def games_by_variant(m: Marts) -> str:
    """What the warehouse's games are, for a page that has none of its own: "76 games, all mini-mafia", "553 games:
    540 mini-mafia, 13 async", or "no game at all"."""
    if not m.has("fct_games"):
        return "no game at all"
    counts = m.rows("select variant, count(*) as n from fct_games group by variant order by n desc, variant")
    total = sum(int(r["n"]) for r in counts)
    if not total:
        return "no game at all"
    if len(counts) == 1:
        return f"{total:,} game{'s' if total != 1 else ''}, all {counts[0]['variant']}"
    return f"{total:,} games: " + ", ".join(f"{int(r['n']):,} {r['variant']}" for r in counts)


# The built-in offline players: the fake provider (its endpoints may inject faults on purpose), the scripted
# responders and the scripted policies. What they do follows fixed rules, not skill.
OFFLINE_PROVIDERS = ("fake", "scripted", "policy")


def offline(model: Any) -> bool:
    """Whether a model is one of the built-in offline players (`fake/...`, `scripted/...`, `policy/...`)."""
    return isinstance(model, str) and model.split("/", 1)[0] in OFFLINE_PROVIDERS


def inferred_seats(m: Marts, by: str) -> dict[tuple[str, str], bool]:
    """Per (`by`: "study" or "variant", model) with seats whose model an importer inferred rather than read
    (`fct_player_games.model_inferred`: the Mini-Mafia web game records a session label only): whether every one of
    its seats there was. The pages mark such a model `(inferred)`; a warehouse built before the column has none."""
    if by not in ("study", "variant"):
        raise ValueError(f"inferred_seats by {by!r}: study or variant")
    if not records_inferred_seats(m):
        return {}
    return {(r["key"], r["model"]): bool(r["every"]) for r in m.rows(
        f"select {by} as key, model, bool_and(model_inferred) as every from fct_player_games group by all "
        "having bool_or(model_inferred)")}


def records_inferred_seats(m: Marts) -> bool:
    """Whether the warehouse says which seats' models were inferred (`fct_player_games.model_inferred`); one built
    before the column has no such seat."""
    return m.has("fct_player_games") and "model_inferred" in m.columns("fct_player_games")


def inferred_mark(every: bool | None) -> str | None:
    """The words a page marks a model's name with, from whether every seat the name stands for was inferred
    (`inferred_seats`' value; None: no seat was): `inferred`, `inferred in some games`, or None (recorded)."""
    if every is None:
        return None
    return "inferred" if every else "inferred in some games"


def inferred_label(model: str, every: bool | None) -> str:
    """The model's name as a chart shows it: `X (inferred)`, `X (inferred in some games)` or `X` (`inferred_mark`)."""
    return marked(model, inferred_mark(every))


def marked(name: str, mark: str | None) -> str:
    """A name as a chart (whose labels are data, not markup) shows it with its mark: `name (mark)`, or the name."""
    return name if mark is None else f"{name} ({mark})"


def inferred_cells(m: Marts, by: str) -> dict[tuple[str, str], bool]:
    """Per (`by`: "study" or "variant", cell) with games whose background models an importer inferred rather than
    read (`fct_games.background_inferred`: the Mini-Mafia web game records a session label only): whether every one
    of its games there was. A cell's label names its models (`deceive|human|openai/gpt-4o-mini`), so the pages mark
    it `cell_mark`; a warehouse built before the column has none."""
    if by not in ("study", "variant"):
        raise ValueError(f"inferred_cells by {by!r}: study or variant")
    if not (m.has("fct_games") and "background_inferred" in m.columns("fct_games")):
        return {}
    return {(r["key"], r["cell"]): bool(r["every"]) for r in m.rows(
        f"select {by} as key, cell, bool_and(coalesce(background_inferred, false)) as every from fct_games "
        "where cell is not null group by all having bool_or(background_inferred)")}


def mark_named(text: str, marks: dict[str, str], before: str, after: str) -> str:
    """`text` with each model of `marks` (model -> its mark, `inferred` or `inferred in some games`) it names followed
    by its mark, `X (inferred)`: only a whole name between the patterns `before` and `after` (a role's word and `, `,
    a signed weight and a space or `;`), never a name inside another's, so a generated sentence (a fit's reason, its
    unidentified directions) is marked where its model is named."""
    if not marks:
        return text
    names = "|".join(re.escape(name) for name in sorted(marks, key=len, reverse=True))
    return re.sub(rf"({before})({names})(?={after})", lambda g: f"{g[1]}{g[2]} ({marks[g[2]]})", text)


def cell_mark(every: bool | None) -> str | None:
    """The words a page marks a cell's label with (`inferred_cells`' value; None: its background was recorded):
    `background inferred`, `background inferred in some games`, or None."""
    mark = inferred_mark(every)
    return None if mark is None else f"background {mark}"


# A person's seat: every importer names a person the model `human` (agents `human/web`, `human/player`, ...).
PERSON = "human"
# What a person's row of format failures is: the interface's reading of what the person typed, not a model's answer
# failing a format (the Mini-Mafia web game reads a message not in quotes as a silence).
PERSON_FORMAT_MARK = "a person: the interface's reading"


def person(model: Any) -> bool:
    """Whether a model is a person (`human`), not a model."""
    return model == PERSON


def studies_by_size(m: Marts, table_name: str, study_col: str = "study") -> list[str]:
    """The studies of a mart, largest first (the first is a chart's default selection)."""
    rows = m.rows(f"select {study_col} as s, count(*) as c from {table_name} group by 1 order by 2 desc, 1")
    return [r["s"] for r in rows if r["s"] is not None]


def protocol_cards(m: Marts, studies: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The protocol cards (`mart_protocol_cards`) of the given studies (all when None), one dict per card: its
    header and its rows, deviations first, each value shown as the reference wrote it. Any study's page can show
    them with `{{ m.protocol_cards(cards) }}`."""
    if not m.has("mart_protocol_cards"):
        return []
    rows = m.rows(
        "select * from mart_protocol_cards order by study, "
        "case status when 'deviates' then 0 when 'matches' then 1 else 2 end, position"
    )
    wanted = None if studies is None else set(studies)
    cards: dict[str, dict[str, Any]] = {}
    for r in rows:
        if wanted is not None and r["study"] not in wanted:
            continue
        card = cards.setdefault(r["study"], {
            k: r[k] for k in ("study", "protocol", "protocol_title", "repository", "reference_commit", "deviations",
                              "matching", "noted", "recorded_at")
        } | {"rows": []})
        card["rows"].append({**r, "reference_value": _json_text(r["reference_value"]),
                             "experiment_value": _json_text(r["experiment_value"])})
    return list(cards.values())


def _json_text(value: str | None) -> str:
    """A card value (JSON text) as the card prints it: strings bare, lists joined."""
    import json

    if value is None:
        return ""
    try:
        v = json.loads(value)
    except ValueError:
        return value
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) or "(none)"
    if v == "not sent":
        return "not sent (the provider's default)"
    return v if isinstance(v, str) else json.dumps(v)
