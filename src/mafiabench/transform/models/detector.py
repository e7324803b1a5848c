"""The Mafia Detector's marts (metrics.md §8): accuracy per game and day cut, averaged per source and day, beside
the exact random baseline computed per game and averaged over the same games.

- `mart_detections`: one row per (game, cut, detector, prompt sha256): the k names the detector gave, the game's
  real mafia, single-match (at least one right), exact-match (all right), and the game's exact random baseline
  P(single) = 1 - C(n-k, k) / C(n, k), P(exact) = 1 / C(n, k) (n players, k mafia), as fractions and floats.
- `mart_detector_accuracy`: one row per (detector, prompt sha256, source, study, day) — `scope = 'day'` for the
  transcript cut after that day, `scope = 'game'` (day null) for each game's whole transcript (its last cut), one
  detection per game in both, so the games are independent draws and a binomial interval applies: Wilson 95%
  (scipy), with the number of games, beside the baseline averaged over exactly those games (kept exact as "a/b").

- `mart_detector_tables`: Tables II and III of "Hidden in Plain Text" as printed: one row per (detector, prompt
  sha256, source, study, row), a row per day cut and the pooled "Average" row over all the source's cuts (the
  paper's (111) and (87)), with the number of transcripts and the match counts; beside each row the exact per-game
  baseline averaged over that row's transcripts (on the Average row: pooled over all the source's cuts, what a
  uniform random detector scores there in expectation), and on every row the source's random baseline: the paper
  ran a Monte Carlo of 1,000,000 trials per source, guessing two of each game's players; here it is exact, the
  per-game baseline averaged over the source's games, each once (its expectation). No interval: the cuts of one
  game are not independent draws.
- `mart_detector_datasets`: Table I (dataset metrics) per source and study, over the games a detector read:
  participants, game length in days (day cuts), the share of games of 3 days or fewer, public day messages per
  game and words per message.

Tables I-III are kept per game set (`game_set`): `read`, every game the detector read; and, for an imported source
whose games read include some its importer's rules exclude (the human games a study's list pins, issue 35 item 4),
`rule_valid` beside it: the same tables over the rule-valid games alone, so the inferred games never pass for the
paper's. Each set is labelled in words (`game_set_label`: "25 games valid by the importer's rules", "28: 25 + 3
inferred to match the paper's counts" when a study's protocol card records such a pinned set).

Reads only raw tables (`raw_detections`, `raw_detection_transcripts`, `raw_games`, `raw_players`, `raw_events`,
`raw_protocol_cards`), so it does not depend on how the SQL models are organised. Registered with the build in
`transform.models.PYTHON_MODELS`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable
from fractions import Fraction
from typing import Any

import duckdb
import polars as pl

CONFIDENCE = 0.95
SOURCE_LABELS = {
    "simulation": "LLM (simulated)",
    "ibraheem2022-human": "human (Dallinger)",
    "llmafia": "LLM (LLMafia)",
}


# The game sets of Tables I-III: every game a detector read, and (for an imported source that read games its
# importer's rules exclude) the rule-valid ones alone.
READ = "read"
RULE_VALID = "rule_valid"
# The protocol card's fact of a pinned human set (study.protocol: "25 valid by the importer's rules + 3 inferred").
_PINNED_SET = re.compile(r"^(\d+) valid by the importer's rules \+ (\d+) inferred\b")


def pinned_sets(con: duckdb.DuckDBPyConnection) -> set[tuple[int, int]]:
    """(valid, inferred) of every pinned game set a study's protocol card records (`detector.human_set`)."""
    out = set()
    for (value,) in con.execute(
            "select experiment_value from raw_protocol_cards where aspect = 'detector.human_set'").fetchall():
        try:
            text = json.loads(value) if value else ""
        except ValueError:
            text = value
        match = _PINNED_SET.match(text) if isinstance(text, str) else None
        if match:
            out.add((int(match[1]), int(match[2])))
    return out


def game_set_label(game_set: str, source: str, n_games: int, n_valid: int,
                   pinned: Collection[tuple[int, int]]) -> str:
    """A game set in words: how many games, and how many of them the importer's rules keep."""
    if game_set == RULE_VALID:
        return f"{_games(n_valid)} valid by the importer's rules"
    if source == "simulation":
        return _games(n_games)
    extra = n_games - n_valid
    if not extra:
        return f"{_games(n_games)} valid by the importer's rules"
    if (n_valid, extra) in pinned:
        return f"{n_games}: {n_valid} + {extra} inferred to match the paper's counts"
    return f"{n_games}: {n_valid} + {extra} the importer's rules exclude (read by a game list or --include-invalid)"


def _games(n: int) -> str:
    return f"{n} game{'' if n == 1 else 's'}"


def game_sets(items: list[dict[str, Any]], pinned: Collection[tuple[int, int]]
              ) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(game set, label, rows) of one source's rows (each with `game_id` and `valid_by_rules`): every game read, and
    beside it the rule-valid games alone when an imported source read games its importer's rules exclude."""
    source = items[0]["source"]
    n_games = len({r["game_id"] for r in items})
    valid = [r for r in items if r["valid_by_rules"]]
    n_valid = len({r["game_id"] for r in valid})
    out = [(READ, game_set_label(READ, source, n_games, n_valid, pinned), items)]
    if source != "simulation" and 0 < n_valid < n_games:
        out.append((RULE_VALID, game_set_label(RULE_VALID, source, n_games, n_valid, pinned), valid))
    return out


def baseline(n: int, k: int) -> tuple[Fraction, Fraction]:
    """(P(single), P(exact)) of naming k of n players uniformly at random when k of them are mafia."""
    if not 0 < k <= n:
        raise ValueError(f"need 0 < k <= n, got n={n}, k={k}")
    total = math.comb(n, k)
    return 1 - Fraction(math.comb(n - k, k), total), Fraction(1, total)


def fraction_text(f: Fraction) -> str:
    return f"{f.numerator}/{f.denominator}"


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """The Wilson score interval of a binomial proportion (scipy); (None, None) for no trials."""
    if n <= 0:
        return None, None
    from scipy import stats  # here, not at import: most builds have no detections (0.3 s)

    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def source_label(source: str, study: str | None) -> str:
    label = SOURCE_LABELS.get(source, source)
    return label if not study or study == source else f"{label}: {study}"


DETECTIONS_SCHEMA: dict[str, Any] = {
    "game_id": pl.Utf8,
    "source": pl.Utf8,
    "study": pl.Utf8,
    "source_label": pl.Utf8,
    "variant": pl.Utf8,
    "detector": pl.Utf8,
    "prompt_version": pl.Utf8,
    "prompt_sha256": pl.Utf8,
    "temperature": pl.Float64,
    "cut": pl.Int64,
    "last_cut": pl.Int64,
    "is_last_cut": pl.Boolean,
    "n_players": pl.Int64,
    "k": pl.Int64,
    "predicted": pl.List(pl.Utf8),
    "mafia": pl.List(pl.Utf8),
    "n_correct": pl.Int64,
    "single_match": pl.Boolean,
    "exact_match": pl.Boolean,
    "baseline_single": pl.Float64,
    "baseline_exact": pl.Float64,
    "baseline_single_fraction": pl.Utf8,
    "baseline_exact_fraction": pl.Utf8,
    "format_failure": pl.Boolean,
    "random_fallback": pl.Boolean,
    "transcript_sha256": pl.Utf8,
    "valid_by_rules": pl.Boolean,
}

ACCURACY_SCHEMA: dict[str, Any] = {
    "detector": pl.Utf8,
    "prompt_version": pl.Utf8,
    "prompt_sha256": pl.Utf8,
    "source": pl.Utf8,
    "study": pl.Utf8,
    "source_label": pl.Utf8,
    "scope": pl.Utf8,
    "day": pl.Int64,
    "n_games": pl.Int64,
    "n_single": pl.Int64,
    "n_exact": pl.Int64,
    "single_rate": pl.Float64,
    "single_low": pl.Float64,
    "single_high": pl.Float64,
    "exact_rate": pl.Float64,
    "exact_low": pl.Float64,
    "exact_high": pl.Float64,
    "baseline_single": pl.Float64,
    "baseline_exact": pl.Float64,
    "baseline_single_fraction": pl.Utf8,
    "baseline_exact_fraction": pl.Utf8,
    "single_minus_baseline": pl.Float64,
    "exact_minus_baseline": pl.Float64,
    "n_format_failures": pl.Int64,
}


def detection_rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Each landed detection scored against the game's real mafia."""
    rows = con.execute(
        """with mafia as (
               select game_id, list(name order by name) as mafia, count(*) as n_mafia
               from raw_players
               where team = 'mafia' and game_id in (select game_id from raw_detections)
               group by game_id
           ),
           last_cut as (
               select game_id, detector, prompt_sha256, max(cut) as last_cut
               from raw_detections group by all
           )
           select d.game_id, g.source, coalesce(g.experiment, g.source) as study, g.variant,
                  coalesce(g.valid, true) as valid_by_rules, d.detector,
                  d.prompt_version, d.prompt_sha256, d.temperature, d.cut, l.last_cut, d.n_candidates, d.k,
                  d.predicted, m.mafia, d.format_failure, d.random_fallback, d.transcript_sha256
           from raw_detections d
           join raw_games g on g.game_id = d.game_id
           join mafia m on m.game_id = d.game_id
           join last_cut l on l.game_id = d.game_id and l.detector = d.detector and l.prompt_sha256 = d.prompt_sha256
           order by d.game_id, d.detector, d.prompt_sha256, d.cut"""
    ).fetchall()
    out: list[dict[str, Any]] = []
    for (gid, source, study, variant, valid, detector, version, sha, temp, cut, last, n, k, predicted, mafia, ff, rf,
         tsha) in rows:
        right = len(set(predicted or []) & set(mafia))
        p_single, p_exact = baseline(int(n), int(k))
        out.append({
            "game_id": gid,
            "source": source,
            "study": study,
            "source_label": source_label(source, study),
            "variant": variant,
            "valid_by_rules": bool(valid),
            "detector": detector,
            "prompt_version": version,
            "prompt_sha256": sha,
            "temperature": temp,
            "cut": int(cut),
            "last_cut": int(last),
            "is_last_cut": int(cut) == int(last),
            "n_players": int(n),
            "k": int(k),
            "predicted": list(predicted or []),
            "mafia": list(mafia),
            "n_correct": right,
            "single_match": right >= 1,
            "exact_match": right == int(k) and len(set(predicted or [])) == int(k),
            "baseline_single": float(p_single),
            "baseline_exact": float(p_exact),
            "baseline_single_fraction": fraction_text(p_single),
            "baseline_exact_fraction": fraction_text(p_exact),
            "format_failure": bool(ff),
            "random_fallback": bool(rf),
            "transcript_sha256": tsha,
        })
    return out


def accuracy_row(key: dict[str, Any], group: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Rates, Wilson intervals and the exact baseline averaged over the same detections (one per game)."""
    items = list(group)
    n = len(items)
    singles = sum(r["single_match"] for r in items)
    exacts = sum(r["exact_match"] for r in items)
    p_single = sum((Fraction(r["baseline_single_fraction"]) for r in items), Fraction(0)) / n
    p_exact = sum((Fraction(r["baseline_exact_fraction"]) for r in items), Fraction(0)) / n
    s_low, s_high = wilson(singles, n)
    e_low, e_high = wilson(exacts, n)
    return {
        **key,
        "n_games": n,
        "n_single": singles,
        "n_exact": exacts,
        "single_rate": singles / n,
        "single_low": s_low,
        "single_high": s_high,
        "exact_rate": exacts / n,
        "exact_low": e_low,
        "exact_high": e_high,
        "baseline_single": float(p_single),
        "baseline_exact": float(p_exact),
        "baseline_single_fraction": fraction_text(p_single),
        "baseline_exact_fraction": fraction_text(p_exact),
        "single_minus_baseline": singles / n - float(p_single),
        "exact_minus_baseline": exacts / n - float(p_exact),
        "n_format_failures": sum(r["format_failure"] for r in items),
    }


def accuracy_rows(detections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in detections:
        base = (r["detector"], r["prompt_version"], r["prompt_sha256"], r["source"], r["study"], r["source_label"])
        groups.setdefault((*base, "day", r["cut"]), []).append(r)
        if r["is_last_cut"]:
            groups.setdefault((*base, "game", None), []).append(r)
    names = ("detector", "prompt_version", "prompt_sha256", "source", "study", "source_label", "scope", "day")
    order = {"game": 0, "day": 1}
    keys = sorted(groups, key=lambda t: (*map(str, t[:6]), order[t[6]], t[7] or 0))
    return [accuracy_row(dict(zip(names, key, strict=True)), groups[key]) for key in keys]


AVERAGE = "Average"

PAPER_TABLES_SCHEMA: dict[str, Any] = {
    "detector": pl.Utf8,
    "prompt_version": pl.Utf8,
    "prompt_sha256": pl.Utf8,
    "source": pl.Utf8,
    "study": pl.Utf8,
    "source_label": pl.Utf8,
    "row_label": pl.Utf8,
    "day": pl.Int64,
    "n_transcripts": pl.Int64,
    "n_games": pl.Int64,
    "n_single": pl.Int64,
    "n_exact": pl.Int64,
    "single_rate": pl.Float64,
    "exact_rate": pl.Float64,
    "baseline_single": pl.Float64,
    "baseline_exact": pl.Float64,
    "baseline_single_fraction": pl.Utf8,
    "baseline_exact_fraction": pl.Utf8,
    "source_baseline_single": pl.Float64,
    "source_baseline_exact": pl.Float64,
    "source_baseline_single_fraction": pl.Utf8,
    "source_baseline_exact_fraction": pl.Utf8,
    "game_set": pl.Utf8,
    "game_set_label": pl.Utf8,
}


def paper_table_rows(detections: list[dict[str, Any]], pinned: Collection[tuple[int, int]] = ()
                     ) -> list[dict[str, Any]]:
    """Tables II and III as printed: per (detector, prompt, source, study) and game set (`game_sets`) a row per day
    cut and the pooled Average."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in detections:
        key = (r["detector"], r["prompt_version"], r["prompt_sha256"], r["source"], r["study"], r["source_label"])
        groups.setdefault(key, []).append(r)
    names = ("detector", "prompt_version", "prompt_sha256", "source", "study", "source_label")
    out: list[dict[str, Any]] = []
    for key in sorted(groups, key=lambda k: tuple(map(str, k))):
        for game_set, set_label, items in game_sets(groups[key], pinned):
            once = {r["game_id"]: r for r in items}  # each game once, as the paper's simulation guessed per game
            per_game = _pooled(list(once.values()))
            days = sorted({r["cut"] for r in items})
            for label, day, rows in [*((str(d), d, [r for r in items if r["cut"] == d]) for d in days),
                                     (AVERAGE, None, items)]:
                row = _pooled(rows)
                out.append({
                    **dict(zip(names, key, strict=True)),
                    "game_set": game_set,
                    "game_set_label": set_label,
                    "row_label": label,
                    "day": day,
                    **row,
                    "source_baseline_single": per_game["baseline_single"],
                    "source_baseline_exact": per_game["baseline_exact"],
                    "source_baseline_single_fraction": per_game["baseline_single_fraction"],
                    "source_baseline_exact_fraction": per_game["baseline_exact_fraction"],
                })
    return out


def _pooled(items: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(items)
    p_single = sum((Fraction(r["baseline_single_fraction"]) for r in items), Fraction(0)) / n
    p_exact = sum((Fraction(r["baseline_exact_fraction"]) for r in items), Fraction(0)) / n
    singles = sum(r["single_match"] for r in items)
    exacts = sum(r["exact_match"] for r in items)
    return {
        "n_transcripts": n,
        "n_games": len({r["game_id"] for r in items}),
        "n_single": singles,
        "n_exact": exacts,
        "single_rate": singles / n,
        "exact_rate": exacts / n,
        "baseline_single": float(p_single),
        "baseline_exact": float(p_exact),
        "baseline_single_fraction": fraction_text(p_single),
        "baseline_exact_fraction": fraction_text(p_exact),
    }


DATASETS_SCHEMA: dict[str, Any] = {
    "source": pl.Utf8,
    "study": pl.Utf8,
    "source_label": pl.Utf8,
    "n_games": pl.Int64,
    "participants_max": pl.Int64,
    "participants_mean": pl.Float64,
    "participants_min": pl.Int64,
    "days_max": pl.Int64,
    "days_mean": pl.Float64,
    "days_min": pl.Int64,
    "share_at_most_3_days": pl.Float64,
    "utterances_per_game": pl.Float64,
    "words_per_utterance": pl.Float64,
    "game_set": pl.Utf8,
    "game_set_label": pl.Utf8,
}


def dataset_rows(con: duckdb.DuckDBPyConnection, pinned: Collection[tuple[int, int]] = ()
                 ) -> list[dict[str, Any]]:
    """Table I over the games a detector read (a game's length is its number of day cuts, its last cut), per game
    set: every game read, and beside it, for an imported source that read games its importer's rules exclude, the
    rule-valid games alone."""
    if not con.execute("select count(*) from (select 1 from raw_detections limit 1)").fetchall()[0][0]:
        return []  # no game was read: nothing to measure (the talk query would still scan every event)
    every = _dataset_metrics(con, valid_only=False)
    valid = {(r["source"], r["study"]): r for r in _dataset_metrics(con, valid_only=True)}
    out = []
    for row in every:
        mine = valid.get((row["source"], row["study"]))
        n_valid = mine["n_games"] if mine else 0
        label = game_set_label(READ, row["source"], row["n_games"], n_valid, pinned)
        out.append({**row, "game_set": READ, "game_set_label": label})
        if mine and row["source"] != "simulation" and n_valid < row["n_games"]:
            label = game_set_label(RULE_VALID, row["source"], row["n_games"], n_valid, pinned)
            out.append({**mine, "game_set": RULE_VALID, "game_set_label": label})
    return out


def _dataset_metrics(con: duckdb.DuckDBPyConnection, *, valid_only: bool) -> list[dict[str, Any]]:
    """Table I's figures per (source, study), over every game a detector read or the rule-valid ones alone."""
    where = "where coalesce(r.valid, true)" if valid_only else ""
    rows = con.execute(
        f"""with games as (
               select d.game_id, max(d.cut) as days, any_value(d.n_candidates) as n_players
               from raw_detections d join raw_games r on r.game_id = d.game_id {where} group by d.game_id
           ),
           talk as (
               select e.game_id, count(*) as utterances,
                      sum(len(string_split(trim(regexp_replace(e.text, '\\s+', ' ', 'g')), ' '))) as words
               from raw_events e
               where e.game_id in (select game_id from games) and e.type = 'message' and e.phase = 'day'
                     and e.visibility = 'public' and trim(coalesce(e.text, '')) <> ''
               group by e.game_id
           )
           select r.source, coalesce(r.experiment, r.source) as study, count(*) as n_games,
                  max(g.n_players), avg(g.n_players), min(g.n_players), max(g.days), avg(g.days), min(g.days),
                  avg(case when g.days <= 3 then 1.0 else 0.0 end),
                  avg(coalesce(t.utterances, 0)),
                  case when sum(t.utterances) > 0 then sum(t.words) * 1.0 / sum(t.utterances) end
           from games g
           join raw_games r on r.game_id = g.game_id
           left join talk t on t.game_id = g.game_id
           group by all order by 1, 2"""
    ).fetchall()
    names = [c for c in DATASETS_SCHEMA if c not in ("source_label", "game_set", "game_set_label")]
    out = []
    for values in rows:
        row = dict(zip(names, values, strict=True))
        out.append({**row, "source_label": source_label(row["source"], row["study"])})
    return out


def detector_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    detections = detection_rows(con)
    pinned = pinned_sets(con)
    return {
        "mart_detections": pl.DataFrame(detections, schema=DETECTIONS_SCHEMA, orient="row"),
        "mart_detector_accuracy": pl.DataFrame(accuracy_rows(detections), schema=ACCURACY_SCHEMA, orient="row"),
        "mart_detector_tables": pl.DataFrame(paper_table_rows(detections, pinned), schema=PAPER_TABLES_SCHEMA,
                                             orient="row"),
        "mart_detector_datasets": pl.DataFrame(dataset_rows(con, pinned), schema=DATASETS_SCHEMA, orient="row"),
    }


TRANSCRIPTS_SCHEMA: dict[str, Any] = {
    "game_id": pl.Utf8,
    "cut": pl.Int64,
    "transcript_sha256": pl.Utf8,
    "line_no": pl.Int64,
    "day": pl.Int64,
    "line": pl.Utf8,
}


def transcript_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """`mart_detector_transcripts`: each game's cleansed transcript as the detector read it at its last cut, one
    row per line (the day it belongs to from the `--- Day d ---` separators), for the dashboards' transcript
    pages; earlier cuts are prefixes of it."""
    rows = con.execute(
        """select t.game_id, t.cut, t.transcript_sha256, t.lines
           from raw_detection_transcripts t
           qualify row_number() over (partition by t.game_id order by t.cut desc, t.transcript_sha256) = 1
           order by t.game_id"""
    ).fetchall()
    out: list[dict[str, Any]] = []
    for gid, cut, sha, lines in rows:
        day = 0
        for i, line in enumerate(lines or [], start=1):
            if line.startswith("--- Day ") and line.endswith(" ---"):
                day = int(line[len("--- Day "):-len(" ---")])
            out.append({"game_id": gid, "cut": int(cut), "transcript_sha256": sha, "line_no": i, "day": day,
                        "line": line})
    return {"mart_detector_transcripts": pl.DataFrame(out, schema=TRANSCRIPTS_SCHEMA, orient="row")}
