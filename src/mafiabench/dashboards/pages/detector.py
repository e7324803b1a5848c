"""The Mafia Detector page ("Hidden in Plain Text", section III): how often a detector that reads only the cleansed
transcript names the mafia, per source (our LLM games, human games, LLMafia games) and per day, beside the exact
random baseline of the same games; the paper's Tables I-III in its layout (also offered as CSV beside the page);
the dataset profiles of those sources, with any role cue in a source's own listing order; and one page per game
showing exactly the cleansed transcript the detector read (`mart_detector_accuracy`, `mart_detector_tables`,
`mart_detector_datasets`, `mart_detections`, `mart_detector_transcripts`, `mart_dataset_profile`,
`mart_listing_leaks`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import altair as alt

from mafiabench.dashboards.charts import DATA, WIDTH, _dropdown, _spec
from mafiabench.dashboards.data import Marts, games_by_variant
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register
from mafiabench.dashboards.pages.transcripts import transcript_path

PATH = "detector.html"
METRICS = {"single": "single-match (at least one right)", "exact": "exact-match (all right)"}


def cleansed_path(game_id: str) -> str:
    """The page of what the detector read of a game (same safe file name as the game's transcript page)."""
    return "detector/" + transcript_path(game_id).split("/", 1)[1]


def games_read(m: Marts, limit: int) -> list[str]:
    if not m.has("mart_detector_transcripts"):
        return []
    rows = m.rows("select distinct game_id from mart_detector_transcripts order by game_id limit ?", [limit])
    return [r["game_id"] for r in rows]


def chart_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-day accuracy rows in long form: one row per (detector, source, day, metric)."""
    out = []
    for r in rows:
        if r["scope"] != "day":
            continue
        for key, label in METRICS.items():
            out.append({
                "detector": r["detector"], "source": r["source_label"], "day": r["day"], "metric": label,
                "rate": r[f"{key}_rate"], "low": r[f"{key}_low"], "high": r[f"{key}_high"],
                "baseline": r[f"baseline_{key}"], "n_games": r["n_games"],
                "baseline_fraction": r[f"baseline_{key}_fraction"],
            })
    return out


def accuracy_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy by day per source with Wilson 95% intervals; the exact random baseline of the same games as a
    short horizontal tick beside each point."""
    detectors = sorted({r["detector"] for r in rows})
    detector = _dropdown("detector", detectors, "Detector: ")
    metric = _dropdown("metric", list(METRICS.values()), "Accuracy: ")
    base = (
        alt.Chart(DATA)
        .transform_filter("datum.detector == detector && datum.metric == metric")
        .encode(
            x=alt.X("day:O", title="transcript cut after day", axis=alt.Axis(labelAngle=0)),
            color=alt.Color("source:N", title="source", legend=alt.Legend(orient="bottom", labelLimit=400,
                                                                          direction="vertical")),
            xOffset=alt.XOffset("source:N"),
        )
    )
    tooltip = [
        alt.Tooltip("source:N"), alt.Tooltip("day:O"), alt.Tooltip("n_games:Q", title="games"),
        alt.Tooltip("rate:Q", format=".1%"), alt.Tooltip("low:Q", format=".1%", title="Wilson low"),
        alt.Tooltip("high:Q", format=".1%", title="Wilson high"),
        alt.Tooltip("baseline:Q", format=".1%", title="random baseline"),
        alt.Tooltip("baseline_fraction:N", title="baseline (exact)"),
    ]
    y = alt.Y("rate:Q", title="accuracy", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%"))
    points = base.mark_point(filled=True, size=70).encode(y=y, tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=2).encode(y=alt.Y("low:Q"), y2="high:Q", tooltip=tooltip)
    baseline = base.mark_tick(thickness=3, size=22, opacity=0.85).encode(
        y=alt.Y("baseline:Q"), tooltip=tooltip
    )
    chart = (
        alt.layer(bars, points, baseline)
        .add_params(detector, metric)
        .properties(width=WIDTH, height=260, title="Detector accuracy by day (horizontal ticks: exact random baseline)")
    )
    return _spec(chart, rows)


PAPER_TABLES = {"single": "Table II: single-match accuracies", "exact": "Table III: exact-match accuracies"}
# Table I's rows as the paper prints them: (label, column of mart_detector_datasets, decimals or None for integers).
DATASET_METRICS = (
    ("Maximum participants", "participants_max", None),
    ("Mean participants", "participants_mean", 2),
    ("Minimum participants", "participants_min", None),
    ("Maximum game length (days)", "days_max", None),
    ("Mean game length (days)", "days_mean", 2),
    ("Minimum game length (days)", "days_min", None),
    ("Ratio of games 3 days or shorter", "share_at_most_3_days", 2),
    ("Mean utterances per game", "utterances_per_game", 2),
    ("Mean words per utterance", "words_per_utterance", 2),
)


def _columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A column per (source, game set): a source whose games read include some its importer's rules exclude gets
    two, the rule-valid games first and every game read beside them, each headed by its set in words."""
    split = {r["source_label"] for r in rows if r.get("game_set") == "rule_valid"}
    columns: dict[str, dict[str, Any]] = {}
    for r in rows:
        key = column_key(r)
        columns.setdefault(key, {"key": key, "source": r["source_label"],
                                 "set": r.get("game_set_label") if r["source_label"] in split else None,
                                 "order": (r["source_label"], r.get("game_set") != "rule_valid")})
    return sorted(columns.values(), key=lambda c: c["order"])


def column_key(row: dict[str, Any]) -> str:
    return f"{row['source_label']}\x00{row.get('game_set') or 'read'}"


def paper_tables(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tables II and III per detector (and prompt), laid out as printed: a row per day and the Average row, a column
    per source (and game set, `_columns`) with "(transcripts) rate", then a Random column each (its baseline, on the
    first row)."""
    blocks: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        block = blocks.setdefault((r["detector"], r["prompt_sha256"]), {
            "detector": r["detector"], "prompt_version": r["prompt_version"], "rows": [], "row_labels": [],
            "cells": {}, "random": {}})
        block["rows"].append(r)
        block["random"][column_key(r)] = r
        block["cells"].setdefault(r["row_label"], {})[column_key(r)] = r
    for block in blocks.values():
        days = sorted({int(label) for label in block["cells"] if label != "Average"})
        block["row_labels"] = [*map(str, days), "Average"]
        block["columns"] = _columns(block.pop("rows"))
    return list(blocks.values())


def dataset_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Table I: a row per metric, a column per source (and game set, as Tables II and III)."""
    columns = _columns(rows)
    by_key = {column_key(r): r for r in rows}
    ordered = [by_key[c["key"]] for c in columns]
    metrics = []
    for label, column, digits in DATASET_METRICS:
        values = []
        for r in ordered:
            v = r[column]
            values.append("–" if v is None else str(int(v)) if digits is None else f"{v:.{digits}f}")
        metrics.append({"label": label, "values": values})
    return {"columns": columns, "games": [r["n_games"] for r in ordered], "metrics": metrics}


def profile_rows(m: Marts, sources: list[str]) -> list[dict[str, Any]] | None:
    if not m.has("mart_dataset_profile"):
        return None
    return m.rows(
        "select * from mart_dataset_profile where source in (select unnest(?)) order by source, variant", [sources]
    )


def listing_cues(m: Marts, sources: list[str]) -> list[dict[str, Any]]:
    """The read sources whose own listing order tells the role (`mart_listing_leaks`), with what the detector's
    header shows for them: the cue is the dataset's, and the detector must not carry it."""
    if not m.has("mart_listing_leaks"):
        return []
    rows = m.rows("""select source, listing, position, mafia, games, verdict from mart_listing_leaks
                     where source in (select unnest(?)) order by source, listing, position""", [sources])
    out = []
    for source in dict.fromkeys(r["source"] for r in rows):
        seats = [r for r in rows if r["source"] == source and r["listing"] == "seats" and r["verdict"] == "leak"]
        if not seats:
            continue
        header = [r for r in rows if r["source"] == source and r["listing"] != "seats"]
        out.append({"source": source, "leaks": seats,
                    "header": "leak" if any(r["verdict"] == "leak" for r in header) else
                    "no leak" if any(r["verdict"] in ("no leak", "small departure") for r in header) else
                    "too few games"})
    return out


def human_sets(m: Marts) -> list[dict[str, Any]]:
    """What each study's protocol card says of the human games its detector read (a set inferred, not published)."""
    if not m.has("mart_protocol_cards"):
        return []
    rows = m.rows("""select distinct study, reference_value, experiment_value, note from mart_protocol_cards
                     where aspect = 'detector.human_set' order by study""")
    return [{"study": r["study"], "value": json.loads(r["experiment_value"]),
             "reference": json.loads(r["reference_value"]), "note": r["note"]} for r in rows]


@register(
    PATH,
    "Mafia Detector",
    "Transcript-only mafia detection per source and day, against the exact random baseline.",
    order=37,
    links=lambda m, limit: games_read(m, limit),
    extra=lambda ctx: cleansed_pages(ctx),
)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page(PATH, "Mafia Detector: LLM games, human games and the random baseline", "detector.html.j2",
                {"available": m.has("mart_detector_accuracy", "mart_detections"), "why_empty": None})
    if not page.data["available"]:
        return page
    if not m.scalar("select count(*) from mart_detections"):
        # Every section would be empty, each repeating what the warehouse holds: say why once, show none of them.
        page.data["why_empty"] = (
            f"No detection has been landed in this warehouse ({games_by_variant(m)}), so there is nothing to show "
            "here yet: run mafiabench detect on this warehouse, then mafiabench build. An experiment with a "
            "[detector] section detects as it runs, into its own warehouse: mafiabench run "
            "experiments/hidden_in_plain_text_offline.toml --publish writes "
            "warehouse/hidden-in-plain-text-offline.duckdb, whose pages are "
            "dashboards-hidden-in-plain-text-offline/detector.html, not these (add --warehouse with this "
            "warehouse's file to detect here instead)."
        )
        return page
    rows = m.rows(
        """select * from mart_detector_accuracy
           order by detector, prompt_sha256, source_label, scope = 'day', day"""
    )
    by_detector: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        r["day_label"] = "whole game" if r["scope"] == "game" else f"day {r['day']}"
        by_detector.setdefault(r["detector"], []).append(r)
    points = chart_rows(rows)
    if points:
        page.add_chart(
            "accuracy",
            accuracy_chart(points),
            "Share of games in which the detector named at least one (single) or every (exact) mafioso, reading the "
            "transcript cut after each day; vertical bars: Wilson 95% intervals; horizontal ticks: the exact random "
            "baseline averaged over the same games.",
        )
    read = games_read(m, ctx.max_rows)
    games = m.rows(
        """select game_id, any_value(source_label) as source_label, any_value(variant) as variant,
                  max(cut) as days_read, any_value(n_players) as n_players, any_value(k) as k,
                  count(*) as detections, count(*) filter (where exact_match) as exact,
                  count(*) filter (where single_match) as single
           from mart_detections where game_id in (select unnest(?)) group by game_id order by game_id""",
        [read],
    ) if read else []
    for g in games:
        g["cleansed"] = cleansed_path(g["game_id"])
    total = m.scalar("select count(distinct game_id) from mart_detections") or 0
    sources = [r["source"] for r in m.rows("select distinct source from mart_detections order by source")]
    tables = m.rows(
        """select * from mart_detector_tables
           order by detector, prompt_sha256, source_label, day is null, day"""
    ) if m.has("mart_detector_tables") else []
    datasets = m.rows("select * from mart_detector_datasets order by source_label") \
        if m.has("mart_detector_datasets") else []
    if tables:
        page.add_export("tables", tables)
    if datasets:
        page.add_export("datasets", datasets)
    page.data.update(
        paper=paper_tables(tables),
        paper_metrics=PAPER_TABLES,
        dataset_metrics=dataset_table(datasets) if datasets else None,
        by_detector=by_detector,
        games=games,
        total_games=total,
        profiles=profile_rows(m, sources),
        listing_cues=listing_cues(m, sources),
        metrics=METRICS,
        human_sets=human_sets(m),
        **left_out(m, sources, ctx.max_rows),
    )
    return page


LEFT_OUT_WHY = """case when status <> 'finished'
                       then 'did not finish (status ' || status || coalesce(': ' || invalid_reason, '') || ')'
                  when not coalesce(valid, true) then 'invalid: ' || coalesce(invalid_reason, 'no reason recorded')
                  else 'valid and finished: not asked for (a pinned game list, or a detector run without it)' end"""


def left_out(m: Marts, sources: list[str], limit: int) -> dict[str, Any]:
    """The games of the imported sources the detector read that it did not read (in the warehouse: unfinished,
    invalid, not asked for), and those the imports could not read at all (`mart_import_unreadable`), each with why:
    the counts alone ("2 unreadable", "9 games read") named none of them."""
    imported = [s for s in sources if s != "simulation"]
    if not imported:
        return {"left_out": [], "unreadable": [], "left_out_sources": []}
    where = """source in (select unnest(?)) and variant in (select distinct variant from mart_detections)
               and game_id not in (select game_id from mart_detections)"""
    games = m.rows(f"select game_id, source, {LEFT_OUT_WHY} as why from fct_games where {where} "
                   "order by source, game_id limit ?", [imported, limit]) if m.has("fct_games") else []
    unreadable = m.rows("select source, path, file, reason from mart_import_unreadable where source in "
                        "(select unnest(?)) order by source, path, file limit ?", [imported, limit]) \
        if m.has("mart_import_unreadable") else []
    return {"left_out": games, "unreadable": unreadable, "left_out_sources": imported}


def cleansed_pages(ctx: Context) -> Iterator[Page]:
    """One page per game the detector read: its cleansed transcript (as the detector saw it at the last cut, day by
    day) and every detection made on it, with the real mafia shown after (the detector never saw them)."""
    m = ctx.marts
    ids = games_read(m, ctx.max_rows)
    if not ids:
        return
    lines: dict[str, list[dict[str, Any]]] = {}
    for r in m.rows(
        "select game_id, line_no, day, line from mart_detector_transcripts where game_id in (select unnest(?)) "
        "order by game_id, line_no",
        [ids],
    ):
        lines.setdefault(r["game_id"], []).append(r)
    detections: dict[str, list[dict[str, Any]]] = {}
    for r in m.rows(
        "select * from mart_detections where game_id in (select unnest(?)) order by game_id, detector, cut", [ids]
    ):
        detections.setdefault(r["game_id"], []).append(r)
    for gid in ids:
        dets = detections.get(gid, [])
        first = dets[0] if dets else {}
        yield Page(
            cleansed_path(gid),
            f"What the detector read: {gid}",
            "detector_transcript.html.j2",
            {
                "game_id": gid,
                "lines": lines.get(gid, []),
                "detections": dets,
                "mafia": first.get("mafia") or [],
                "source_label": first.get("source_label"),
                "n_players": first.get("n_players"),
                "k": first.get("k"),
                "full_transcript": ctx.transcripts.get(gid),
            },
        )
