"""Last-speaker advantage and name and seat bias (`mart_last_speaker_bias`, `mart_name_seat_bias`)."""

from __future__ import annotations

from typing import Any

from mafiabench.dashboards import charts
from mafiabench.dashboards.data import options
from mafiabench.dashboards.html import Page
from mafiabench.dashboards.page_registry import Context, register


def with_rate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        n = r.get("n") or 0
        r["rate"] = (r.get("k") or 0) / n if n else None
    return rows


@register("biases.html", "Biases", "Last-speaker advantage and name and seat bias.", order=60)
def build(ctx: Context) -> Page:
    m = ctx.marts
    page = Page("biases.html", "Last-speaker and name bias", "bias.html.j2")
    last = name_seat = None
    if m.has("mart_last_speaker_bias"):
        last = with_rate(m.rows("select * from mart_last_speaker_bias order by variant, role, spoke_last"))
        for r in last:
            r["spoke_last"] = "spoke last" if r.get("spoke_last") else "did not speak last"
        if last:
            page.add_chart(
                "last-speaker",
                charts.last_speaker_chart(last, variants=options(r["variant"] for r in last)),
                "Win rate by role, last speaker or not.",
            )
    if m.has("mart_name_seat_bias"):
        rows = with_rate(
            m.rows(
                "select * from mart_name_seat_bias order by variant, setting, dimension, role, "
                "try_cast(value as integer), value"
            )
        )
        if rows:
            page.add_chart(
                "name-seat",
                charts.name_seat_chart(
                    rows,
                    variants=options(r["variant"] for r in rows),
                    settings=options(["all", *(r["setting"] for r in rows)]),
                    roles=options(["all", *(r["role"] for r in rows)]),
                ),
                "Win rate by name and by seat (choose the setting and role above).",
            )
        name_seat = [r for r in rows if r.get("role") == "all"]
    page.data.update(last=last, name_seat=name_seat)
    return page
