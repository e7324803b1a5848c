"""The data-quality gate: Great Expectations suites on raw tables and marts (the dbt data tests run beside it).

GX 1.24 cannot validate DuckDB through SQLAlchemy (every expectation fails upstream), so each suite pulls a DataFrame
with `con.sql(...).df()` and validates it through an ephemeral context (no files, no network). Only the rows a check
could flag are pulled (`candidate_sql`: a SQL superset of each expectation's failing rows, GX decides on them), with
the suite's full row count beside them: pulling every row of a million games into pandas cost minutes. Checks that need
the event order (a vote by a player already dead) are computed in SQL first (`int_game_checks`, `int_votes`) and
the suite expects zero violations. Every expectation's outcome is stored in `validation_results`; any failure
fails the build, which then is not published (`warehouse.builds.gate_passed`).

`import great_expectations` and its context cost 2-3 s of single-threaded Python, so a build does them in a helper
process started as the build starts (`start_validator`): they run beside the models' build on the other core instead
of after it (1M games: the build 1-3 s shorter, BENCHMARKS.md). The helper only validates the frames it is sent; the
warehouse keeps its one connection in the build's process. Should the helper die, `run_suites` validates in process.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import duckdb

from mafiabench.errors import UserError
from mafiabench.warehouse.builds import VALIDATION_RESULTS_SCHEMA

SAMPLE_ROWS = 5
# The largest share of landed games that may be invalid or unscored before the build is refused (`mafiabench build
# --max-unusable`): marts over a few survivors of a broken import are not results.
DEFAULT_MAX_UNUSABLE = 0.5

@dataclass
class ExpectationResult:
    suite: str
    expectation: str  # GX expectation type, or the assert file's name
    rule: str  # what the expectation means, in words
    kwargs: dict[str, Any]
    success: bool
    element_count: int
    unexpected_count: int
    failing_rows: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.rule} [{self.suite}: {self.expectation}({args})]"


class QualityGateError(UserError):
    """The gate failed; the message names every failing expectation and shows failing rows."""

    def __init__(self, message: str, *, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class Check:
    """One expectation of a suite: a GX expectation class name, its kwargs, and the rule it enforces.

    `candidates` overrides the SQL predicate that selects the rows GX must see for this check (see `candidate_sql`);
    it must hold for every row the expectation could flag."""

    expectation: str
    kwargs: dict[str, Any]
    rule: str
    candidates: str | None = None


@dataclass(frozen=True)
class Suite:
    """A DataFrame pulled by `query` and the expectations it must meet (an empty frame meets every column
    expectation: no beliefs landed is not a failure)."""

    name: str
    query: str
    checks: tuple[Check, ...]


def _in(column: str, values: Sequence[Any], rule: str) -> Check:
    return Check("ExpectColumnValuesToBeInSet", {"column": column, "value_set": list(values)}, rule)


def _zero(column: str, rule: str) -> Check:
    return Check("ExpectColumnValuesToBeBetween", {"column": column, "min_value": 0, "max_value": 0}, rule)


def _unit(column: str, rule: str) -> Check:
    return Check("ExpectColumnValuesToBeBetween", {"column": column, "min_value": 0.0, "max_value": 1.0}, rule)


def _at_least(column: str, low: float, rule: str) -> Check:
    return Check("ExpectColumnValuesToBeBetween", {"column": column, "min_value": low}, rule)


def _not_null(column: str, rule: str) -> Check:
    return Check("ExpectColumnValuesToNotBeNull", {"column": column}, rule)


def _ident(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def _not_blank(column: str, rule: str) -> Check:
    # RE2 (DuckDB) and Python disagree on what `\s` matches (Python's includes U+00A0, U+001C-U+001F, ...), so the
    # SQL pre-filter keeps every value without a printable non-space ASCII character, and GX's regex decides.
    return Check("ExpectColumnValuesToNotMatchRegex", {"column": column, "regex": r"^\s*$"}, rule,
                 candidates=f"not coalesce(regexp_matches({_ident(column)}, '[!-~]'), false)")


def _no_rows(rule: str) -> Check:
    return Check("ExpectTableRowCountToEqual", {"value": 0}, rule)


SUITES: tuple[Suite, ...] = (
    Suite(
        "raw_games",
        "select game_id, variant, status, winner, valid from raw_games",
        (
            Check("ExpectColumnValuesToBeUnique", {"column": "game_id"}, "no duplicate game ids"),
            _not_null("game_id", "every game has an id"),
            _in("status", ["finished", "unfinished", "failed", "abandoned"], "game status is known"),
            _in("winner", ["mafia", "town"], "a winner is mafia or town"),
        ),
    ),
    Suite(
        "raw_players",
        "select game_id, seat, name, role, model from raw_players",
        (
            Check(
                "ExpectCompoundColumnsToBeUnique",
                {"column_list": ["game_id", "name"]},
                "no duplicate game ids (a game's seats are landed once)",
            ),
            _not_null("model", "no empty model names"),
            _not_blank("model", "no empty model names"),
            _in("role", ["mafioso", "detective", "villager", "bystander", "doctor"], "roles are known"),
        ),
    ),
    Suite(
        "game_checks",
        "select * from int_game_checks",
        (
            _zero("seq_defects", "event seq contiguous per game"),
            _zero("duplicate_names", "player names unique within a game"),
            _zero("n_empty_models", "no empty model names"),
        ),
    ),
    # Rules about play hold for valid games; games an importer flagged invalid are already out of every rate.
    Suite(
        "valid_game_checks",
        "select * from int_game_checks where valid",
        (
            _in("one_winner_ok", [True], "one winner per finished game"),
            _in(
                "composition_ok",
                [True],
                "mini-mafia games have four players: 1 mafioso, 1 detective, 2 villagers",
            ),
            _zero("n_invalid_votes", "votes only by active players for other active players"),
        ),
    ),
    Suite(
        "vote_violations",
        """select v.game_id, v.seq, v.vote_kind, v.voter, v.target, v.voter_active, v.target_active, v.is_self_vote
           from int_votes as v inner join stg_games as g on g.game_id = v.game_id
           where g.valid and (not v.voter_active or not v.target_active or v.is_self_vote)""",
        (_no_rows("votes only by active players for other active players"),),
    ),
    Suite(
        "beliefs",
        "select game_id, seq, player, candidate, probability from raw_beliefs",
        (
            _not_null("probability", "belief probabilities valid"),
            _unit("probability", "belief probabilities valid"),
        ),
    ),
    Suite(
        "belief_sums",
        "select game_id, seq, player, sum(probability) as total from raw_beliefs group by game_id, seq, player",
        (
            Check(
                "ExpectColumnValuesToBeBetween",
                {"column": "total", "min_value": 1 - 1e-6, "max_value": 1 + 1e-6},
                "belief probabilities valid (each distribution sums to 1)",
            ),
        ),
    ),
    Suite(
        "mart_rates",
        """select 'mart_win_rates' as mart, variant || '/' || dimension || '=' || value as grp, team as subject,
                  rate, laplace_mean, wilson_low, wilson_high
           from mart_win_rates
           union all
           select 'mart_capability_win_rates', study || '/' || background, capability || ':' || target_model,
                  rate, laplace_mean, wilson_low, wilson_high
           from mart_capability_win_rates""",
        (
            _unit("rate", "rates within [0, 1]"),
            _unit("laplace_mean", "rates within [0, 1]"),
            _unit("wilson_low", "rates within [0, 1]"),
            _unit("wilson_high", "rates within [0, 1]"),
        ),
    ),
    Suite(
        "homogeneous_cells",
        """select study, prompt_version, target_model, background, min(n) as min_n,
                  max(laplace_mean) filter (where capability = 'deceive')
                    + max(laplace_mean) filter (where capability = 'detect') as deceive_plus_detect,
                  max(laplace_mean) filter (where capability = 'detect')
                    - max(laplace_mean) filter (where capability = 'disclose') as detect_minus_disclose
           from mart_capability_win_rates where is_homogeneous
           group by study, prompt_version, target_model, background""",
        (
            Check(
                "ExpectColumnValuesToBeBetween",
                {"column": "deceive_plus_detect", "min_value": 1 - 1e-9, "max_value": 1 + 1e-9},
                "homogeneous cells: deceive + detect = 1",
            ),
            Check(
                "ExpectColumnValuesToBeBetween",
                {"column": "detect_minus_disclose", "min_value": -1e-9, "max_value": 1e-9},
                "homogeneous cells: detect = disclose",
            ),
            # With n = 0 every posterior mean is 1/2 and the identities hold for nothing: that is not a pass.
            Check(
                "ExpectColumnValuesToBeBetween",
                {"column": "min_n", "min_value": 1},
                "homogeneous cells: the invariant is checked on scored games (n > 0)",
            ),
            _not_null("deceive_plus_detect", "homogeneous cells appear in every capability"),
            _not_null("detect_minus_disclose", "homogeneous cells appear in every capability"),
        ),
    ),
    Suite(
        "raw_model_calls",
        """select game_id, call_index, provider, model, input_tokens, output_tokens, cached_tokens, latency_ms, attempts
           from raw_model_calls""",
        (
            _at_least("input_tokens", 0, "model calls: token counts are not negative"),
            _at_least("output_tokens", 0, "model calls: token counts are not negative"),
            _at_least("cached_tokens", 0, "model calls: token counts are not negative"),
            _at_least("latency_ms", 0, "model calls: latency is not negative"),
            _not_null("attempts", "model calls: every call made at least one attempt"),
            _at_least("attempts", 1, "model calls: every call made at least one attempt"),
        ),
    ),
    Suite(
        "orphan_rows",
        """select 'raw_players' as grain_table, game_id, count(*) as n_rows from raw_players
             where game_id not in (select game_id from raw_games) group by all
           union all
           select 'raw_events', game_id, count(*) from raw_events
             where game_id not in (select game_id from raw_games) group by all
           union all
           select 'raw_model_calls', game_id, count(*) from raw_model_calls
             where game_id not in (select game_id from raw_games) group by all
           union all
           select 'raw_beliefs', game_id, count(*) from raw_beliefs
             where game_id not in (select game_id from raw_games) group by all""",
        (_no_rows("no orphan rows: every player, event, call and belief belongs to a landed game"),),
    ),
    Suite(
        "copied_games",
        # A simulated game copied under another id: same seed, seats and event log (seeds differ between genuine
        # simulated games). Imported games have no seed; their importers are idempotent by source id instead.
        # Narrowed in steps, each a necessary condition of the last: a (variant, seed) that repeats, then the same
        # seats too; only those games' event logs are fingerprinted (every game's cost about 80 s at a million).
        """with repeated as (
               select variant, seed from raw_games where seed is not null group by all having count(*) > 1
           ),
           candidates as (
               select g.game_id, g.variant, g.seed from raw_games g
               semi join repeated r on r.variant is not distinct from g.variant and r.seed = g.seed
           ),
           seat_hashes as (
               -- An order-free sum of each seat's hash: equal seat lists give equal sums (a narrowing, not the test).
               select c.game_id, c.variant, c.seed, h.seats_hash
               from candidates c left join (
                   select p.game_id, sum(hash(seat_line)) filter (where seat_line is not null) as seats_hash
                   from (select game_id, seat || ':' || name || ':' || role || ':' || coalesce(agent, '') as seat_line
                         from raw_players) p
                   semi join candidates c on c.game_id = p.game_id
                   group by p.game_id
               ) h on h.game_id = c.game_id
           ),
           same_hash as (
               select s.game_id, s.variant, s.seed from seat_hashes s
               semi join (select variant, seed, seats_hash from seat_hashes group by all having count(*) > 1) r
                 on r.variant is not distinct from s.variant and r.seed = s.seed
                    and r.seats_hash is not distinct from s.seats_hash
           ),
           same_seats as (
               select c.game_id, c.variant, c.seed, x.seats
               from same_hash c left join (
                   select p.game_id,
                          string_agg(p.seat || ':' || p.name || ':' || p.role || ':' || coalesce(p.agent, ''), ','
                                     order by p.seat) as seats
                   from raw_players p semi join same_hash c on c.game_id = p.game_id
                   group by p.game_id
               ) x on x.game_id = c.game_id
           ),
           logs as (
               -- The event log's fingerprint: each event's 128-bit md5 (its seq inside what is hashed, so order
               -- counts), summed in two halves. Equal logs give equal sums, and the sums stream: an ordered
               -- string_agg held every candidate's whole log at once (4.2 GB for a million copied games).
               select game_id, sum(md5_number_upper(line)::hugeint) as events_hi,
                      sum(md5_number_lower(line)::hugeint) as events_lo
               from (select e.game_id, e.seq || '|' || e.type || '|' || coalesce(e.actor, '') || '|'
                                       || coalesce(e.target, '') || '|' || coalesce(e.text, '') as line
                     from raw_events e semi join same_seats c on c.game_id = e.game_id)
               group by game_id
           ),
           fp as (
               select s.game_id, s.variant, s.seed, s.seats, l.events_hi, l.events_lo
               from same_seats s left join logs l on l.game_id = s.game_id
           )
           select variant, seed, count(*) as n_copies, list(game_id order by game_id) as game_ids
           from fp where events_hi is not null and seed is not null
           group by variant, seed, seats, events_hi, events_lo having count(*) > 1""",
        (_no_rows("no game copied under another id (same seed, seats and event log)"),),
    ),
    Suite(
        "mafia_kills",
        """select e.game_id, e.seq, e.type, e.actor, e.target, p.role as target_role
           from raw_events e
           join raw_games g on g.game_id = e.game_id
           join raw_players p on p.game_id = e.game_id and p.name = e.target
           where g.valid and p.team = 'mafia'
             and (e.type = 'kill' or (e.type = 'death' and e.data_json like '%"night_kill"%'))""",
        (_no_rows("the mafia never kills one of its own (nor a mafioso himself) at night"),),
    ),
    Suite(
        "raw_detections",
        """select game_id, cut, detector, prompt_sha256, k, n_candidates, attempts,
                  case when len(predicted) <> k or len(list_distinct(predicted)) <> k then 1 else 0 end
                    as wrong_number_of_names,
                  case when game_id in (select game_id from raw_games) then 0 else 1 end as orphan
           from raw_detections""",
        (
            Check("ExpectCompoundColumnsToBeUnique", {"column_list": ["game_id", "cut", "detector", "prompt_sha256"]},
                  "a detection is landed once per (game, cut, detector, prompt sha256)"),
            _at_least("cut", 1, "detections: a cut is after day 1 or later"),
            _at_least("k", 1, "detections: the game has at least one mafioso to name"),
            _zero("wrong_number_of_names", "detections: exactly k distinct names"),
            _zero("orphan", "detections: every detection belongs to a landed game"),
        ),
    ),
    Suite(
        "mart_detections",
        """select game_id, cut, detector, n_players, k, n_correct, baseline_single, baseline_exact,
                  case when n_correct between 0 and k then 0 else 1 end as bad_count,
                  case when single_match = (n_correct >= 1) and exact_match = (n_correct = k) then 0 else 1 end
                    as bad_match
           from mart_detections""",
        (
            _unit("baseline_single", "detector baseline: P(single) is a probability"),
            _unit("baseline_exact", "detector baseline: P(exact) is a probability"),
            _at_least("n_players", 2, "detections: a game has players to choose from"),
            _zero("bad_count", "detections: between 0 and k names are right"),
            _zero("bad_match", "detections: single = at least one right, exact = all k right"),
        ),
    ),
    Suite(
        "mart_detector_accuracy",
        """select detector, source, scope, day, n_games, single_rate, exact_rate, single_low, single_high,
                  exact_low, exact_high, baseline_single, baseline_exact,
                  case when single_low <= single_rate + 1e-12 and single_rate <= single_high + 1e-12
                            and exact_low <= exact_rate + 1e-12 and exact_rate <= exact_high + 1e-12
                            and exact_rate <= single_rate and baseline_exact <= baseline_single + 1e-12
                       then 0 else 1 end as inconsistent
           from mart_detector_accuracy""",
        (
            _at_least("n_games", 1, "detector accuracy: a row exists only over at least one game"),
            *(_unit(c, f"detector accuracy: {c} is within [0, 1]") for c in (
                "single_rate", "exact_rate", "single_low", "single_high", "exact_low", "exact_high",
                "baseline_single", "baseline_exact")),
            _not_null("single_low", "detector accuracy: every rate has its interval"),
            _zero("inconsistent", "detector accuracy: each rate inside its interval, exact <= single (baseline too)"),
        ),
    ),
    Suite(
        "dim_models",
        "select model, n_games from dim_models",
        (
            _not_null("model", "no empty model names"),
            _not_blank("model", "no empty model names"),
        ),
    ),
)


def usable_data_suites(max_unusable: float = DEFAULT_MAX_UNUSABLE) -> tuple[Suite, ...]:
    """Suites that refuse data no result can come from: no games at all, mostly invalid or unscored games, a study
    or a capability cell with games but none scored. Each failing row says how many games and why."""
    if not 0.0 <= max_unusable <= 1.0:
        raise UserError(f"max_unusable must be within [0, 1], got {max_unusable!r}")
    reasons = """coalesce(mode(coalesce(invalid_reason, case when status <> 'finished' then 'status ' || status
                                                       else 'no winner' end))
                           filter (where not is_scored), '')"""
    return (
        Suite(
            "usable_games",
            f"""select count(*) as n_games, count(*) filter (where is_scored) as n_scored,
                       case when count(*) = 0 then 1.0
                            else 1.0 - count(*) filter (where is_scored) / count(*) end as unusable_share,
                       {reasons} as main_reason
                from stg_games""",
            (
                Check("ExpectColumnValuesToBeBetween", {"column": "n_games", "min_value": 1},
                      "games were landed (a gate over no games proves nothing)"),
                Check("ExpectColumnValuesToBeBetween",
                      {"column": "unusable_share", "min_value": 0.0, "max_value": max_unusable},
                      f"at most {max_unusable:.0%} of the games are invalid or unscored"),
            ),
        ),
        Suite(
            "scored_studies",
            f"""select study, count(*) as n_games, count(*) filter (where is_scored) as n_scored,
                       {reasons} as main_reason
                from stg_games group by study order by study""",
            (Check("ExpectColumnValuesToBeBetween", {"column": "n_scored", "min_value": 1},
                   "every study that has games has a scored game"),),
        ),
        Suite(
            "scored_cells",
            """select study, prompt_version, capability, background, target_model, n, n_unscored
               from mart_capability_win_rates order by study, prompt_version, capability, background, target_model""",
            (Check("ExpectColumnValuesToBeBetween", {"column": "n", "min_value": 1},
                   "every capability cell that has games has a scored game"),),
        ),
    )


# -- running -----------------------------------------------------------------------------------------------------


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if hasattr(value, "tolist"):  # numpy scalars and arrays (a list column)
        return _json_safe(value.tolist())
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return str(value)


def _rows(df: Any, index: Sequence[Any] | None = None, limit: int = SAMPLE_ROWS) -> list[dict[str, Any]]:
    part = df.loc[list(index)[:limit]] if index is not None else df.head(limit)
    return [{k: _json_safe(v) for k, v in rec.items()} for rec in part.to_dict(orient="records")]


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _candidates(check: Check) -> str | None:
    """A SQL predicate over the suite's rows that holds for every row `check` could flag (a superset: nulls and NaN
    included wherever in doubt), or None when the check is not about single rows (it then needs every row)."""
    if check.candidates is not None:
        return check.candidates
    kw = check.kwargs
    kind = check.expectation
    if kind == "ExpectColumnValuesToBeInSet":
        values = ", ".join(_literal(v) for v in kw["value_set"])
        return f"not coalesce({_ident(kw['column'])} in ({values}), false)" if values else "true"
    if kind == "ExpectColumnValuesToBeBetween":
        col = _ident(kw["column"])
        bounds = []
        if kw.get("min_value") is not None:
            bounds.append(f"{col} >= {_literal(kw['min_value'])}")
        if kw.get("max_value") is not None:
            bounds.append(f"{col} <= {_literal(kw['max_value'])}")
        # DuckDB orders NaN above every number; pandas treats it as missing: either way GX decides on the row.
        return f"not coalesce({' and '.join(bounds)}, false)" if bounds else None
    if kind == "ExpectColumnValuesToNotBeNull":
        col = _ident(kw["column"])
        return f"{col} is null or try_cast({col} as double) is not distinct from 'nan'::double"
    return None


def _unique_columns(check: Check) -> list[str] | None:
    if check.expectation == "ExpectColumnValuesToBeUnique":
        return [check.kwargs["column"]]
    if check.expectation == "ExpectCompoundColumnsToBeUnique":
        return list(check.kwargs["column_list"])
    return None


def candidate_sql(suite: Suite) -> str | None:
    """The suite's query narrowed to the rows some check could flag, or None when a check needs every row
    (a table-level expectation). GX still validates what this returns, so it decides each row and names it;
    a clean million-game warehouse yields empty frames instead of tens of millions of rows pulled into pandas.
    Duplicates for the uniqueness checks are every row whose key occurs more than once."""
    parts: list[str] = []
    dups: list[str] = []
    for i, check in enumerate(suite.checks):
        key = _unique_columns(check)
        if key is not None:
            cols = ", ".join(_ident(c) for c in key)
            dups.append(f"__dup{i} as (select {cols} from __suite group by all having count(*) > 1)")
            match = " and ".join(f"__dup{i}.{_ident(c)} is not distinct from __suite.{_ident(c)}" for c in key)
            parts.append(f"exists (select 1 from __dup{i} where {match})")
            continue
        predicate = _candidates(check)
        if predicate is None:
            return None
        parts.append(f"({predicate})")
    if not parts:
        return None
    # Not materialised: the uniqueness checks read the suite twice, and scanning a raw table twice costs less than
    # storing its rows once (raw_players at 1M games: 0.9 -> 0.5 s).
    ctes = ",\n".join([f"__suite as not materialized ({suite.query})", *dups])
    return f"with {ctes}\nselect * from __suite where {' or '.join(parts)}"


class _Validator:
    """An ephemeral GX context with one pandas datasource; one asset per suite."""

    def __init__(self) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.gx = gx
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.source = self.context.data_sources.add_pandas("mafiabench")

    def submit(self, suite: Suite, df: Any, element_count: int | None = None) -> Future[list[ExpectationResult]]:
        """`validate`, done now (the helper process's `submit` returns before GX has answered)."""
        done: Future[list[ExpectationResult]] = Future()
        try:
            done.set_result(self.validate(suite, df, element_count))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def validate(self, suite: Suite, df: Any, element_count: int | None = None) -> list[ExpectationResult]:
        """Validate `df`; `element_count` is the suite's full row count when `df` holds only its candidate rows."""
        gx = self.gx
        asset = self.source.add_dataframe_asset(name=suite.name)
        try:
            return self._validate(gx, asset, suite, df, element_count)
        finally:
            self.source.delete_asset(suite.name)  # the context outlives a build in the gate's helper process

    def _validate(
        self, gx: Any, asset: Any, suite: Suite, df: Any, element_count: int | None
    ) -> list[ExpectationResult]:
        batch = asset.add_batch_definition_whole_dataframe(f"{suite.name}_all").get_batch(
            batch_parameters={"dataframe": df}
        )
        # GX reorders results (by column); `meta.check` ties each result back to its check.
        expectations = [
            getattr(gx.expectations, c.expectation)(**c.kwargs, meta={"check": i}) for i, c in enumerate(suite.checks)
        ]
        gx_suite = gx.ExpectationSuite(name=suite.name, expectations=expectations)
        report = batch.validate(
            gx_suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_ROWS}
        )
        out: list[ExpectationResult] = []
        for res in sorted(report.results, key=lambda r: int((r.expectation_config.meta or {})["check"])):
            check = suite.checks[int(res.expectation_config.meta["check"])]
            info = res.result or {}
            if check.expectation == "ExpectTableRowCountToEqual":
                unexpected = len(df) if not res.success else 0
                sample = _rows(df) if not res.success else []
            else:
                unexpected = int(info.get("unexpected_count") or 0)
                idx = info.get("partial_unexpected_index_list") or []
                sample = _rows(df, idx) if idx else []
            if res.exception_info and res.exception_info.get("raised_exception"):
                unexpected = unexpected or -1
                sample = [{"exception": str(res.exception_info.get("exception_message"))}]
            out.append(
                ExpectationResult(
                    suite=suite.name,
                    expectation=res.expectation_config.type,
                    rule=check.rule,
                    kwargs=dict(check.kwargs),
                    success=bool(res.success),
                    element_count=len(df) if element_count is None else element_count,
                    unexpected_count=unexpected,
                    failing_rows=sample,
                )
            )
        return out


def serve_validator() -> None:
    """The helper's loop (`python -c "...serve_validator()"`): load GX, then validate each (suite, frame, count) read
    from stdin and answer on what was stdout; anything GX prints goes to stderr. Ends when its parent goes (EOF)."""
    answers = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    requests = Connection(os.dup(0), writable=False)
    validator = _Validator()
    while True:
        try:
            suite, df, element_count = requests.recv()
        except EOFError:
            return
        try:
            answers.send(("ok", validator.validate(suite, df, element_count)))
        except Exception as exc:  # the build's process validates this suite again itself, and raises what GX raises
            answers.send(("error", repr(exc)))


class ValidatorProcess:
    """`_Validator` in a helper process: a fresh interpreter that imports only this module (not the caller's main
    script, as multiprocessing's spawn would), loading GX as soon as it starts. `validate` sends it a suite and its
    frame. A suite GX fails on there is validated again in this process (which raises what GX raises); the helper
    serves on. A helper that cannot start, dies, or gives no answer within `answer_timeout` seconds (stopped, stuck)
    is let go (killed if need be), and from then on this process validates."""

    answer_timeout = 300.0  # importing GX takes seconds; a suite's frame, well under one

    def __init__(self) -> None:
        self._local: _Validator | None = None
        self._lock = threading.Lock()
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gx-helper")
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])  # the folder holding `mafiabench`
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env.setdefault("GX_ANALYTICS_ENABLED", "false")
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-c", "from mafiabench.quality.gate import serve_validator; serve_validator()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            )
        except OSError:
            self._proc = None
            return
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._requests = Connection(os.dup(self._proc.stdin.fileno()), readable=False)
        self._answers = Connection(os.dup(self._proc.stdout.fileno()), writable=False)

    @property
    def pid(self) -> int | None:
        """The helper's process id while it serves (None once it is gone or never started)."""
        return self._proc.pid if self._proc is not None else None

    def submit(self, suite: Suite, df: Any, element_count: int | None = None) -> Future[list[ExpectationResult]]:
        """`validate` on this helper's own thread, in order: the gate pulls the next suite's rows from DuckDB while
        GX checks the last ones (1M games: 0.7 s of GX off the gate's time)."""
        return self._sender.submit(self.validate, suite, df, element_count)

    def validate(self, suite: Suite, df: Any, element_count: int | None = None) -> list[ExpectationResult]:
        with self._lock:
            if self._proc is not None:
                try:
                    self._requests.send((suite, df, element_count))
                    if not self._answers.poll(self.answer_timeout):
                        raise TimeoutError(f"no answer from the GX helper in {self.answer_timeout:g} s")
                    status, answer = self._answers.recv()
                    if status == "ok":
                        return answer
                except (OSError, EOFError) as exc:  # the helper died or hangs: from now on, this process validates
                    self.close(kill=isinstance(exc, TimeoutError))
            if self._local is None:
                self._local = _Validator()
            return self._local.validate(suite, df, element_count)

    def close(self, *, wait: bool = True, kill: bool = False) -> None:
        """Stop the helper: it ends on EOF, awaited (killed if it has not within a few seconds) unless `wait` is
        false, as when this process exits (its teardown of GX then costs this process nothing); `kill` for a helper
        that stopped answering."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        for conn in (self._requests, self._answers):
            conn.close()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        if not wait:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_HELPER: ValidatorProcess | None = None
_HELPER_LOCK = threading.Lock()


def start_validator() -> ValidatorProcess:
    """This process's GX helper, started on first use and kept for later builds (a study's builds, a test
    session): a new one only when the last one is gone."""
    global _HELPER
    with _HELPER_LOCK:
        if _HELPER is None or _HELPER.pid is None:
            _HELPER = ValidatorProcess()
        return _HELPER


@atexit.register
def _stop_helper() -> None:
    if _HELPER is not None:
        _HELPER.close(wait=False)


def json_safe_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows (e.g. a dbt data test's violating rows) as JSON-safe dicts for `validation_results`."""
    return [{k: _json_safe(v) for k, v in row.items()} for row in rows]


def run_suites(
    con: duckdb.DuckDBPyConnection,
    *,
    suites: Sequence[Suite] | None = None,
    pull: Callable[[duckdb.DuckDBPyConnection, str], Any] | None = None,
    max_unusable: float = DEFAULT_MAX_UNUSABLE,
    validator: _Validator | ValidatorProcess | None = None,
) -> list[ExpectationResult]:
    """Run every GX suite (by default `SUITES` and the usable-data suites at `max_unusable`); return one result per
    expectation. (The dbt project's data tests run in the pipeline beside these: `mafiabench.publish`.)
    `validator`: where GX runs, by default in this process; a build passes its helper (`start_validator`)."""
    if suites is None:
        suites = (*usable_data_suites(max_unusable), *SUITES)
    validator = validator or _Validator()
    fetch = pull or (lambda c, q: c.sql(q).df())
    pending: list[Future[list[ExpectationResult]]] = []
    for suite in suites:
        narrowed = candidate_sql(suite)
        if narrowed is None:
            pending.append(validator.submit(suite, fetch(con, suite.query)))
            continue
        total = int(con.sql(f"select count(*) from ({suite.query})").fetchall()[0][0])
        pending.append(validator.submit(suite, fetch(con, narrowed), element_count=total))
    return [r for future in pending for r in future.result()]


def store_results(con: duckdb.DuckDBPyConnection, build_id: str, results: Sequence[ExpectationResult]) -> None:
    con.execute(f"create table if not exists validation_results ({VALIDATION_RESULTS_SCHEMA})")
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [
        (
            build_id,
            r.suite,
            r.expectation,
            r.rule,
            json.dumps(r.kwargs, sort_keys=True),
            r.success,
            r.element_count,
            r.unexpected_count,
            json.dumps(r.failing_rows, sort_keys=True, default=str),
            now,
        )
        for r in results
    ]
    if rows:
        con.executemany("insert into validation_results values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def failure_message(build_id: str, results: Sequence[ExpectationResult]) -> str:
    failed = [r for r in results if not r.success]
    lines = [
        f"quality gate failed for build {build_id}: {len(failed)} of {len(results)} expectations failed; "
        "the build is not published."
    ]
    for r in failed:
        lines.append(f"- FAILED {r.describe()}: {r.unexpected_count} unexpected of {r.element_count} rows")
        for row in r.failing_rows:
            lines.append(f"    {json.dumps(row, sort_keys=True, default=str)}")
    return "\n".join(lines)
