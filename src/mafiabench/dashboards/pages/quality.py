"""Data quality: the validation results of the published build, failures first (`validation_results`,
`build_runs`), and whether the order each source lists its players in tells their role (`mart_listing_leaks`: an
imported dataset's cue is shown here, a simulated study's refused by the gate)."""

from __future__ import annotations

import json
from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register
from mafiabench.warehouse.builds import DBT_SUITE, checked_nothing


def pretty_json(text: Any, indent: int | None = 1) -> str:
    if not text:
        return ""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return str(text)
    if value in ([], {}, None):
        return ""
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=True, default=str)


def listing_order(m: Any) -> dict[str, Any] | None:
    """The leak check per source and listing: its leaking positions first, then every position tested or not."""
    if not m.has("mart_listing_leaks"):
        return None
    rows = m.rows("""select * from mart_listing_leaks
                     order by verdict <> 'leak', origin, source, listing, position""")
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        r["row_class"] = "failed" if r["verdict"] == "leak" else None
        g = groups.setdefault((r["source"], r["listing"]), {
            "source": r["source"], "origin": r["origin"], "listing": r["listing"], "leaks": [], "tested": 0,
            "too_few": 0})
        if r["verdict"] == "leak":
            g["leaks"].append(r)
        if r["verdict"] == "too few games":
            g["too_few"] += 1
        else:
            g["tested"] += 1
    first = rows[0] if rows else {}
    return {"rows": rows, "groups": sorted(groups.values(), key=lambda g: (not g["leaks"], g["source"],
                                                                             g["listing"])),
            "alpha": first.get("alpha"), "min_games": first.get("min_games"),
            "positions_tested": first.get("positions_tested")}


def outcome(r: dict[str, Any]) -> str:
    """failed, passed, or "no rows": a per-row expectation that passed on an empty table (`checked_nothing`)."""
    if not r.get("success"):
        return "failed"
    nothing = checked_nothing(str(r.get("suite")), str(r.get("expectation") or ""), True, r.get("element_count"))
    return "no rows" if nothing else "passed"


@register("data-quality.html", "Data quality", "The latest validation results, failures first.", order=90)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("data-quality.html", "Data quality", "quality.html.j2", {"available": m.has("validation_results")})
    if not page.data["available"]:
        return page
    build_id = (ctx.build or {}).get("build_id") or m.scalar(
        "select build_id from validation_results order by run_at desc limit 1"
    )
    rows = m.rows(
        "select * from validation_results where build_id = ? order by success, suite, expectation, rule", [build_id]
    )
    per_suite: dict[tuple[str, str], int] = {}
    for r in rows:
        r["outcome"] = outcome(r)
        r["row_class"] = r["outcome"].replace(" ", "-")
        r["dbt"] = r["suite"] == DBT_SUITE
        r["arguments"] = pretty_json(r.get("kwargs_json"), indent=None)
        r["failing_sample"] = pretty_json(r.get("failing_rows_json"))
        per_suite[(r["suite"], r["outcome"])] = per_suite.get((r["suite"], r["outcome"]), 0) + 1
    failed_suites = {s for (s, o) in per_suite if o == "failed"}
    chart_rows = [
        {"suite": s, "outcome": o, "expectations": c, "failed_first": 0 if s in failed_suites else 1}
        for (s, o), c in sorted(per_suite.items())
    ]
    if chart_rows:
        page.add_chart("validation", charts.validation_chart(chart_rows),
                       "Expectations per suite: failed, passed, and passed with no rows to check.")
    builds = None
    if m.has("build_runs"):
        builds = m.rows("select * from build_runs order by started_at desc limit 20")
        for b in builds:
            b["row_class"] = "failed" if b.get("status") == "failed" else None
    page.data.update(
        build_id=build_id,
        run_at=rows[0]["run_at"] if rows else "",
        rows=rows,
        n_failed=sum(1 for r in rows if not r.get("success")),
        no_rows=sorted({r["suite"] for r in rows if r["outcome"] == "no rows"}),
        n_no_rows=sum(1 for r in rows if r["outcome"] == "no rows"),
        builds=builds,
        listing=listing_order(m),
    )
    return page
