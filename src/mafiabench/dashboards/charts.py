"""Altair chart builders. Each takes rows already read from the marts (lists of dicts) and returns a Vega-Lite spec.

Win rates are drawn the way the Mini-Mafia study draws them: horizontal bars of the observed rate split into clean
wins and wins decided by a random tie-break (lighter shade), an error bar (a radio button switches between the
Wilson 95% interval and the Beta posterior mean ± 1 sd), and the exact analytic baselines as dashed reference lines.
Filters (study, variant, dimension, ...) are Vega-Lite parameters bound to dropdowns, so pages stay static files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt

Rows = Sequence[Mapping[str, Any]]

CLEAN = "clean win"
TIE = "won after a tie-break"
PART_SCALE = alt.Scale(domain=[CLEAN, TIE], range=["#3b6fb6", "#a9c4ea"])
# The tie-decided part is hatched (diagonal stripes of the clean colour on white), so it reads in grayscale print.
_STRIPES = 8
TIE_HATCH = {
    "gradient": "linear",
    "x1": 0, "y1": 0, "x2": 1, "y2": 1,
    "stops": [
        stop
        for i in range(_STRIPES)
        for stop in (
            {"offset": i / _STRIPES, "color": "#3b6fb6"},
            {"offset": (i + 0.5) / _STRIPES, "color": "#3b6fb6"},
            {"offset": (i + 0.5) / _STRIPES, "color": "#ffffff"},
            {"offset": (i + 1) / _STRIPES, "color": "#ffffff"},
        )
    ],
}  # fmt: skip
BASELINE_COLOR = "#b2182b"
WIDTH = 460


DATA = alt.NamedData(name="rows")


def _spec(chart: Any, rows: Rows) -> dict[str, Any]:
    """The Vega-Lite dict with the rows attached as the named dataset `rows`.

    Charts are built over a named data source and the rows added last: Altair deep-copies and validates inline
    data at every step, which cost seconds per page; the spec itself is still schema-validated.
    """
    spec: dict[str, Any] = chart.to_dict()
    _title_layers(spec)
    axis = spec.setdefault("config", {}).setdefault("axis", {})
    for key, value in AXIS_LABELS.items():
        axis.setdefault(key, value)
    spec["datasets"] = {"rows": [dict(r) for r in rows]}
    return spec


# Every axis: labels that would overlap are thinned (Vega's greedy strategy) and long ones cut with an ellipsis,
# so no two tick labels are ever drawn over each other; charts may set a wider limit on their own axes.
AXIS_LABELS = {"labelOverlap": "greedy", "labelLimit": 240, "labelSeparation": 4}


def _title_layers(node: Any) -> None:
    """Give every layer's x/y encoding the title of the axis it shares with its sibling layers (an untitled layer
    would otherwise add its field name, e.g. "lo", to the axis title)."""
    if isinstance(node, dict):
        layers = node.get("layer")
        if isinstance(layers, list):
            for channel in ("x", "y"):
                encodings = [
                    e for layer in layers if isinstance(layer, dict)
                    for e in [layer.get("encoding", {}).get(channel)] if isinstance(e, dict)
                ]
                titles = [e["title"] for e in encodings if e.get("title")]
                for e in encodings:
                    if titles and not e.get("title") and ("field" in e or "aggregate" in e):
                        e["title"] = titles[0]
        for key, value in node.items():
            if key != "datasets":
                _title_layers(value)
    elif isinstance(node, list):
        for item in node:
            _title_layers(item)


def _dropdown(name: str, options: Sequence[Any], label: str, value: Any | None = None) -> alt.Parameter:
    options = list(options)
    return alt.param(
        name=name,
        value=options[0] if value is None else value,
        bind=alt.binding_select(options=options, name=label),
    )


def _interval_param() -> alt.Parameter:
    return alt.param(
        name="interval",
        value="wilson",
        bind=alt.binding_radio(
            options=["wilson", "beta"],
            labels=["Wilson 95% interval", "Beta posterior mean ± 1 sd"],
            name="Error bars: ",
        ),
    )


_LO = "interval == 'wilson' ? datum.wilson_low : max(0, datum.laplace_mean - datum.beta_sd)"
_HI = "interval == 'wilson' ? datum.wilson_high : min(1, datum.laplace_mean + datum.beta_sd)"
_MID = "interval == 'wilson' ? datum.rate : datum.laplace_mean"


def rate_rows(rows: Rows, keys: Sequence[str]) -> list[dict[str, Any]]:
    """Rate rows (k, k_tie, n, laplace_mean, beta_sd, wilson_*) → long rows for stacked bars plus one `ci` row each.

    Bars show k/n split into clean and tie-decided parts (field `share`: never a name a grouping may use, such as
    `value`, which once made the win-rates chart plot cell names and bar lengths on one axis); the `ci` row
    carries the interval fields.
    """
    out: list[dict[str, Any]] = []
    for r in rows:
        n = r.get("n") or 0
        k = r.get("k") or 0
        k_tie = r.get("k_tie") or 0
        base = {key: r.get(key) for key in keys}
        stats = {
            "n": n,
            "k": k,
            "k_tie": k_tie,
            "rate": (k / n) if n else None,
            "laplace_mean": r.get("laplace_mean"),
            "beta_sd": r.get("beta_sd"),
            "wilson_low": r.get("wilson_low"),
            "wilson_high": r.get("wilson_high"),
        }
        if not n:
            continue
        out.append({**base, **stats, "kind": "bar", "part": CLEAN, "order": 0, "share": (k - k_tie) / n})
        out.append({**base, **stats, "kind": "bar", "part": TIE, "order": 1, "share": k_tie / n})
        out.append({**base, **stats, "kind": "ci"})
    return out


def _rate_tooltip(y: str, y_title: str) -> list[alt.Tooltip]:
    return [
        alt.Tooltip(f"{y}:N", title=y_title),
        alt.Tooltip("k:Q", title="wins", format=","),
        alt.Tooltip("k_tie:Q", title="of which after a tie-break", format=","),
        alt.Tooltip("n:Q", title="games", format=","),
        alt.Tooltip("rate:Q", title="observed rate", format=".1%"),
        alt.Tooltip("laplace_mean:Q", title="Beta posterior mean", format=".1%"),
        alt.Tooltip("beta_sd:Q", title="Beta posterior sd", format=".2p"),
        alt.Tooltip("wilson_low:Q", title="Wilson 95% low", format=".1%"),
        alt.Tooltip("wilson_high:Q", title="Wilson 95% high", format=".1%"),
    ]


def _rate_layers(
    y: str, y_title: str, x_title: str, *, y_offset: str | None = None, color_ci: bool = False, href: bool = False
) -> list[alt.Chart]:
    """Stacked clean/tie bars plus the switchable error bar, over rows made by `rate_rows`."""
    tooltip = _rate_tooltip(y, y_title)
    y_enc = alt.Y(f"{y}:N", title=y_title, axis=alt.Axis(labelLimit=320))
    bar_enc: dict[str, Any] = {
        "x": alt.X("share:Q", stack="zero", title=x_title, scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        "y": y_enc,
        "color": alt.Color("part:N", scale=PART_SCALE, title="win (tie-decided part hatched)"),
        "fill": alt.condition(
            f"datum.part == '{TIE}'", alt.value(TIE_HATCH), alt.Fill("part:N", scale=PART_SCALE, legend=None)
        ),
        "stroke": alt.value("#3b6fb6"),
        "strokeWidth": alt.value(0.6),
        "order": alt.Order("order:Q"),
        "tooltip": tooltip,
    }
    if href:
        bar_enc["href"] = alt.Href("link:N")
    ci_enc: dict[str, Any] = {"x": "lo:Q", "x2": "hi:Q", "y": y_enc, "tooltip": tooltip}
    mid_enc: dict[str, Any] = {"x": "mid:Q", "y": y_enc, "tooltip": tooltip}
    if y_offset:
        bar_enc["yOffset"] = alt.YOffset(f"{y_offset}:N")
        ci_enc["yOffset"] = alt.YOffset(f"{y_offset}:N")
        mid_enc["yOffset"] = alt.YOffset(f"{y_offset}:N")
    base = alt.Chart()
    bars = (
        base.mark_bar(height={"band": 0.75}, cursor="pointer" if href else "default")
        .encode(**bar_enc)
        .transform_filter("datum.kind == 'bar'")
    )
    ci = base.transform_filter("datum.kind == 'ci'").transform_calculate(lo=_LO, hi=_HI, mid=_MID)
    # A white halo under the dark interval: over the solid bar it would otherwise not show, and the interval would
    # read as one-sided (its part over the bar hidden).
    halo = ci.mark_rule(color="white", strokeWidth=4.4, opacity=0.9).encode(
        **{k: v for k, v in ci_enc.items() if k != "tooltip"})
    rule = ci.mark_rule(color="#1d2330", strokeWidth=1.6).encode(**ci_enc)
    tick = ci.mark_tick(color="#1d2330", thickness=2, size=10).encode(**mid_enc)
    return [bars, halo, rule, tick]


def baseline_rows(
    baselines: Sequence[Mapping[str, Any]], *, metric: str, night_modes: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Reference-line rows from `baselines.baseline_table()`: `metric` is `town_win` or `mafia_win`; only the
    profiles whose night matches a night mode of the data (all when unknown)."""
    out = []
    for b in baselines:
        if night_modes and b.get("night") not in night_modes:
            continue
        value = float(b[metric])
        out.append(
            {
                "kind": "baseline",
                "profile": f"{b['profile']}: {value:.1%}",
                "baseline": value,
                "fraction": b.get(f"{metric}_fraction"),
                "description": b.get("description"),
            }
        )
    return out


def _baseline_layer() -> alt.Chart:
    return (
        alt.Chart()
        .transform_filter("datum.kind == 'baseline'")
        .mark_rule(color=BASELINE_COLOR, strokeWidth=1.4)
        .encode(
            x="baseline:Q",
            strokeDash=alt.StrokeDash(
                "profile:N", title="exact baseline (no skill)", legend=alt.Legend(labelLimit=400)
            ),
            tooltip=[
                alt.Tooltip("profile:N", title="baseline"),
                alt.Tooltip("fraction:N", title="exact value"),
                alt.Tooltip("description:N"),
            ],
        )
    )


def capability_chart(
    rows: Rows,
    baselines: Sequence[Mapping[str, Any]],
    *,
    capability: str,
    studies: Sequence[str],
    night_modes: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """One panel per background: each target's win rate (clean + tie part), error bar, baselines."""
    metric = "mafia_win" if capability == "deceive" else "town_win"
    data = rate_rows(rows, ["study", "background", "target_model", "link"])
    # Baseline rows carry an existing target of their panel: Vega-Lite builds the y domain from the unfiltered
    # facet data too, and a row without one would add an empty band.
    panels = {(r["study"], r["background"]): r["target_model"] for r in rows}
    for (study, background), target in sorted(panels.items()):
        for b in baseline_rows(baselines, metric=metric, night_modes=night_modes.get(study)):
            data.append({**b, "study": study, "background": background, "target_model": target})
    study = _dropdown("study", studies, "Study: ")
    x_title = "mafia win rate (target plays the mafioso)" if capability == "deceive" else "town win rate"
    layers = [*_rate_layers("target_model", "target model", x_title, href=True), _baseline_layer()]
    chart = (
        alt.layer(*layers, data=DATA)
        .properties(width=WIDTH, height=alt.Step(22))
        .facet(
            facet=alt.Facet(
                "background:N",
                title=None,
                header=alt.Header(
                    labelOrient="top",
                    labelAnchor="start",
                    labelFontWeight="bold",
                    labelLimit=900,
                    labelExpr="'background: ' + datum.value",
                ),
            ),
            columns=1,
        )
        .transform_filter("datum.study == study")
        .add_params(study, _interval_param())
        .resolve_scale(y="independent")
    )
    return _spec(chart, data)


def win_rate_chart(rows: Rows, *, dimensions: Sequence[str], variants: Sequence[str]) -> dict[str, Any]:
    """Win rates by a chosen grouping (dropdowns: variant, dimension)."""
    data = rate_rows(rows, ["variant", "dimension", "value", "team"])
    default_dim = "cell" if "cell" in dimensions else dimensions[0]
    dim = _dropdown("dimension", dimensions, "Group by: ", default_dim)
    variant = _dropdown("variant", variants, "Variant: ")
    layers = _rate_layers("value", "group", "win rate of the team shown (mafia for game groupings)")
    colorless = alt.layer(*layers, data=DATA).transform_filter(
        "datum.dimension == dimension && datum.variant == variant"
    )
    return _spec(
        colorless.add_params(dim, variant, _interval_param()).properties(width=WIDTH, height=alt.Step(20)), data
    )


def scores_chart(rows: Rows, *, studies: Sequence[str]) -> dict[str, Any]:
    """Bottom-up capability scores exp(mean z) with their 95% interval, one column per capability (log scale)."""
    study = _dropdown("study", studies, "Study: ")
    base = alt.Chart()
    y = alt.Y("target_model:N", title="target model", axis=alt.Axis(labelLimit=320))
    tooltip = [
        alt.Tooltip("target_model:N", title="model"),
        alt.Tooltip("score:Q", format=".3f"),
        alt.Tooltip("score_sd:Q", title="sd (delta method)", format=".2r"),
        alt.Tooltip("score_low:Q", title="95% low", format=".3f"),
        alt.Tooltip("score_high:Q", title="95% high", format=".3f"),
        alt.Tooltip("mean_z:Q", title="mean z", format=".3f"),
        alt.Tooltip("n_backgrounds:Q", title="backgrounds"),
        alt.Tooltip("n_games:Q", title="games"),
    ]
    x = alt.X("score:Q", title="score = exp(mean z)  (1 = average)", scale=alt.Scale(type="log"))
    rule = base.mark_rule(color="#1d2330", strokeWidth=1.6).encode(
        x=alt.X("score_low:Q", title=None), x2="score_high:Q", y=y, tooltip=tooltip
    )
    point = base.mark_point(filled=True, size=70, color="#3b6fb6").encode(x=x, y=y, tooltip=tooltip)
    ref = base.mark_rule(color="#888", strokeDash=[4, 3]).encode(x="one:Q")
    chart = (
        alt.layer(rule, point, ref, data=DATA)
        .transform_calculate(one="1")
        .properties(width=260, height=alt.Step(22))
        .facet(column=alt.Column("capability:N", title=None, header=alt.Header(labelFontWeight="bold")))
        .transform_filter("datum.study == study")
        .add_params(study)
    )
    return _spec(chart, rows)


def latent_chart(rows: Rows, *, studies: Sequence[str]) -> dict[str, Any]:
    """Top-down latent abilities with 95% intervals: m, d, v (NUTS) or a, b, c (the point-estimate fallback)."""
    study = _dropdown("study", studies, "Study: ")
    base = alt.Chart()
    y = alt.Y("model:N", title="model", axis=alt.Axis(labelLimit=320))
    tooltip = [
        alt.Tooltip("model:N"),
        alt.Tooltip("ability:N"),
        alt.Tooltip("parameter:N"),
        alt.Tooltip("method:N"),
        alt.Tooltip("estimate:Q", format=".3f"),
        alt.Tooltip("se:Q", title="standard error", format=".2r"),
        alt.Tooltip("ci_low:Q", title="95% low", format=".3f"),
        alt.Tooltip("ci_high:Q", title="95% high", format=".3f"),
        alt.Tooltip("interval:N", title="interval (robust: widened for the scatter beyond the model)"),
        alt.Tooltip("model_low:Q", title="model's 95% low", format=".3f"),
        alt.Tooltip("model_high:Q", title="model's 95% high", format=".3f"),
        alt.Tooltip("n_games:Q", title="games in this role"),
    ]
    rule = base.mark_rule(color="#1d2330", strokeWidth=1.6).encode(
        x=alt.X("plot_ci_low:Q", title="estimate (logit scale; 0 = average)"),
        x2="plot_ci_high:Q",
        y=y,
        tooltip=tooltip,
    )
    point = base.mark_point(filled=True, size=70, color="#7b4fb6").encode(x="plot_estimate:Q", y=y, tooltip=tooltip)
    ref = base.mark_rule(color="#888", strokeDash=[4, 3]).encode(x="reference:Q")
    chart = (
        alt.layer(rule, point, ref, data=DATA)
        .transform_calculate(reference="0")
        .properties(width=260, height=alt.Step(22))
        .facet(column=alt.Column("label:N", title=None, header=alt.Header(labelFontWeight="bold")))
        .transform_filter("datum.study == study")
        .add_params(study)
        .resolve_scale(x="independent", y="independent")
    )
    return _spec(chart, rows)


def exceptional_chart(rows: Rows, *, studies: Sequence[str]) -> dict[str, Any]:
    """Flagged games per cell, one bar per rule that flagged any of them; a click on a bar opens the list of exactly
    those games (`link`). Rows: (study, cell, rule, games, flags, max_surprise, link).

    Counts, not surprise: a rule gives every game it flags in a cell the same surprise (an upset's probability is
    its cell's rate), so surprise per game drew one column of points that said nothing."""
    study = _dropdown("study", studies, "Study: ")
    tooltip = [
        alt.Tooltip("cell:N"),
        alt.Tooltip("rule:N"),
        alt.Tooltip("games:Q", title="games flagged"),
        alt.Tooltip("max_surprise:Q", title="highest surprise (−ln p)", format=".2f"),
    ]
    chart = (
        alt.Chart(DATA)
        .mark_bar(cursor="pointer", height={"band": 0.9})
        .encode(
            x=alt.X("games:Q", title="games flagged (click a bar for them)", axis=alt.Axis(tickMinStep=1)),
            y=alt.Y(
                "cell:N",
                title="cell",
                sort=alt.EncodingSortField("cell_games", op="max", order="descending"),
                # the title level, above the labels' column (a vertical title beside 360-pixel labels was
                # drawn over them)
                axis=alt.Axis(labelLimit=360, titleAngle=0, titleAlign="right", titleX=-6, titleY=-8),
            ),
            yOffset=alt.YOffset("rule:N"),
            color=alt.Color("rule:N", title="rule", scale=alt.Scale(scheme="tableau10")),
            href=alt.Href("link:N"),
            tooltip=tooltip,
        )
        .transform_filter("datum.study == study")
        .add_params(study)
        # 14 pixels a bar (a rule within a cell): at 9, a cell of one rule was thinner than its label, and Vega hid
        # every other label (11 bars, 5 labels)
        .properties(width=WIDTH, height=alt.Step(14))
    )
    return _spec(chart, rows)


def _rate_interval_chart(
    rows: Rows,
    *,
    y: str,
    y_title: str,
    x_title: str,
    column: str | None = None,
    color: str | None = None,
    params: Sequence[tuple[str, Sequence[Any], str]] = (),
    extra_tooltip: Sequence[alt.Tooltip] = (),
    width: int = 300,
    href: bool = False,
    zoom: bool = False,
    column_sort: Sequence[str] | None = None,
    low: str = "wilson_low",
    high: str = "wilson_high",
) -> dict[str, Any]:
    """A point (Laplace mean) with its Wilson interval per row; optional column facet, color/offset and dropdowns.
    `low`, `high`: the bar's columns where it is not the Wilson interval (the failure rates' Wilson interval on the
    effective sample size counting games; the tooltip then gives both, and the design effect).
    `column_sort`: the facets' order (default: alphabetical, which puts "N=10" before "N=6").
    `href`: each row's `link` (the games behind it) opens on a click. `zoom`: the axis ends at the next tenth above
    the highest interval instead of 100% (rare events, a few percent, were squashed against the left edge)."""
    base = alt.Chart()
    y_enc = alt.Y(f"{y}:N", title=y_title, axis=alt.Axis(labelLimit=320))
    tooltip = [
        alt.Tooltip(f"{y}:N", title=y_title),
        *extra_tooltip,
        alt.Tooltip("k:Q", title="count"),
        alt.Tooltip("n:Q", title="out of"),
        alt.Tooltip("rate:Q", title="observed rate", format=".1%"),
        alt.Tooltip("laplace_mean:Q", title="Beta posterior mean", format=".1%"),
        alt.Tooltip("wilson_low:Q", title="Wilson 95% low", format=".1%"),
        alt.Tooltip("wilson_high:Q", title="Wilson 95% high", format=".1%"),
    ]
    if (low, high) != ("wilson_low", "wilson_high"):
        tooltip += [alt.Tooltip(f"{low}:Q", title="95% counting games, low", format=".1%"),
                    alt.Tooltip(f"{high}:Q", title="95% counting games, high", format=".1%"),
                    alt.Tooltip("design_effect:Q", title="design effect", format=".2f"),
                    alt.Tooltip("n_games:Q", title="games")]
    enc_extra: dict[str, Any] = {}
    rule_mark: dict[str, Any] = {"strokeWidth": 1.6}
    point_mark: dict[str, Any] = {"filled": True, "size": 60}
    if href:
        enc_extra["href"] = alt.Href("link:N")
        rule_mark["cursor"] = point_mark["cursor"] = "pointer"
    if color:
        enc_extra["color"] = alt.Color(f"{color}:N", title=color.replace("_", " "))
        enc_extra["yOffset"] = alt.YOffset(f"{color}:N")
    else:
        rule_mark["color"] = "#1d2330"
        point_mark["color"] = "#3b6fb6"
    rule = base.mark_rule(**rule_mark).encode(
        x=alt.X(f"{low}:Q", title=x_title, scale=alt.Scale(domain=[0, _zoomed_top(rows, high) if zoom else 1]),
                axis=alt.Axis(format="%")),
        x2=f"{high}:Q",
        y=y_enc,
        tooltip=tooltip,
        **enc_extra,
    )
    point = base.mark_point(**point_mark).encode(x="laplace_mean:Q", y=y_enc, tooltip=tooltip, **enc_extra)
    layer = alt.layer(rule, point, data=DATA).properties(width=width, height=alt.Step(20 if color else 22))
    chart: Any
    if column:
        chart = layer.facet(
            column=alt.Column(f"{column}:N", title=None, header=alt.Header(labelFontWeight="bold"),
                              sort=list(column_sort) if column_sort else alt.Undefined)
        ).resolve_scale(y="independent")
    else:
        chart = layer
    bound = [_dropdown(name, options, label) for name, options, label in params]
    if bound:
        chart = chart.transform_filter(" && ".join(f"datum.{name} == {name}" for name, _, _ in params)).add_params(
            *bound
        )
    return _spec(chart, rows)


def reasoning_chart(rows: Rows, *, variants: Sequence[str]) -> dict[str, Any]:
    """Per row's `model_label`: the model, with its prompt version where its variant was played under several; the
    bar is the Wilson interval counting games (the mart's `wilson_*_by_game`)."""
    return _rate_interval_chart(
        rows,
        y="model_label",
        y_title="model",
        x_title="failure rate",
        column="level_label",
        params=[("variant", variants, "Variant: ")],
        extra_tooltip=[alt.Tooltip("n_failures_by_fallback:Q", title="failures that were random fallbacks")],
        href=True,
        low="wilson_low_by_game",
        high="wilson_high_by_game",
    )


def _zoomed_top(rows: Rows, high: str = "wilson_high") -> float:
    """The next tenth (at least 10%) above every row's interval (`high`) and Laplace mean, at most 100%."""
    top = max([float(r.get(k) or 0) for r in rows for k in (high, "laplace_mean")] or [1.0])
    return min(1.0, max(0.1, math.ceil(top * 10 - 1e-9) / 10))


def format_failure_chart(rows: Rows, *, variants: Sequence[str]) -> dict[str, Any]:
    """Per row's `model_label`, as `reasoning_chart`."""
    return _rate_interval_chart(
        rows,
        y="model_label",
        y_title="model",
        x_title="format-failure rate",
        column="action",
        color="role",
        params=[("variant", variants, "Variant: ")],
        width=240,
        href=True,
        zoom=True,
        low="wilson_low_by_game",
        high="wilson_high_by_game",
    )


def last_speaker_chart(rows: Rows, *, variants: Sequence[str]) -> dict[str, Any]:
    return _rate_interval_chart(
        rows,
        y="role",
        y_title="role",
        x_title="win rate of the player's team",
        color="spoke_last",
        params=[("variant", variants, "Variant: ")],
        extra_tooltip=[alt.Tooltip("spoke_last:N", title="spoke last"), alt.Tooltip("advantage:Q", format="+.1%")],
    )


def name_seat_chart(
    rows: Rows, *, variants: Sequence[str], settings: Sequence[str], roles: Sequence[str]
) -> dict[str, Any]:
    return _rate_interval_chart(
        rows,
        y="value",
        y_title="name or seat",
        x_title="win rate of the player's team",
        column="dimension",
        params=[("variant", variants, "Variant: "), ("setting", settings, "Setting: "), ("role", roles, "Role: ")],
        width=260,
    )


def fallback_share_chart(rows: Rows, *, variants: Sequence[str]) -> dict[str, Any]:
    """Share of game outcomes a random fallback vote decided, per cell."""
    variant = _dropdown("variant", variants, "Variant: ")
    chart = (
        alt.Chart(DATA)
        .mark_bar(color="#d08a2c")
        .encode(
            x=alt.X(
                "share_fallback_decided:Q",
                title="share of games decided by a random fallback vote",
                axis=alt.Axis(format="%"),
            ),
            y=alt.Y("value:N", title="cell", axis=alt.Axis(labelLimit=420)),
            tooltip=[
                alt.Tooltip("value:N", title="cell"),
                alt.Tooltip("n_fallback_decided:Q", title="games decided by a fallback"),
                alt.Tooltip("n:Q", title="scored games"),
                alt.Tooltip("share_fallback_decided:Q", title="share", format=".1%"),
            ],
        )
        .transform_filter("datum.variant == variant")
        .add_params(variant)
        .properties(width=WIDTH, height=alt.Step(18))
    )
    return _spec(chart, rows)


def model_tokens_chart(rows: Rows) -> dict[str, Any]:
    """Tokens per game by model, split into input (cached and not) and output."""
    order = {"input (not cached)": 0, "input (cached)": 1, "output": 2}
    data = []
    for r in rows:
        games = r.get("n_games") or 0
        if not games:
            continue
        cached = r.get("cached_tokens") or 0
        parts = {
            "input (not cached)": (r.get("input_tokens") or 0) - cached,
            "input (cached)": cached,
            "output": r.get("output_tokens") or 0,
        }
        for part, tokens in parts.items():
            data.append(
                {
                    "model": r["model"],
                    "part": part,
                    "order": order[part],
                    "tokens_per_game": tokens / games,
                    "games": games,
                }
            )
    chart = (
        alt.Chart(DATA)
        .mark_bar()
        .encode(
            x=alt.X("tokens_per_game:Q", title="tokens per game (this model's calls)", stack="zero"),
            y=alt.Y("model:N", title="model", axis=alt.Axis(labelLimit=320)),
            color=alt.Color(
                "part:N", title="tokens", scale=alt.Scale(domain=list(order), range=["#3b6fb6", "#a9c4ea", "#d08a2c"])
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("model:N"),
                alt.Tooltip("part:N"),
                alt.Tooltip("tokens_per_game:Q", title="tokens per game", format=",.0f"),
                alt.Tooltip("games:Q"),
            ],
        )
        .properties(width=WIDTH, height=alt.Step(22))
    )
    return _spec(chart, data)


def model_cost_chart(rows: Rows) -> dict[str, Any]:
    rows = [r for r in rows if r.get("n_games")]
    chart = (
        alt.Chart(DATA)
        .mark_bar(color="#3b6fb6")
        .encode(
            x=alt.X("cost_usd_per_game:Q", title="US$ per game (this model's calls; unpriced models show 0)"),
            y=alt.Y("model:N", title="model", axis=alt.Axis(labelLimit=320)),
            tooltip=[
                alt.Tooltip("model:N"),
                alt.Tooltip("cost_usd:Q", title="total US$", format=",.4f"),
                alt.Tooltip("cost_usd_per_game:Q", title="US$ per game", format=",.4f"),
                alt.Tooltip("n_games:Q", title="games"),
                alt.Tooltip("n_calls:Q", title="calls"),
                alt.Tooltip("fully_priced:N", title="priced"),
            ],
        )
        .properties(width=WIDTH, height=alt.Step(22))
    )
    return _spec(chart, rows)


def histogram_chart(rows: Rows, *, x_title: str) -> dict[str, Any]:
    """Pre-binned rows (lo, hi, games): SQL bins them so a million games stay a few dozen data points."""
    chart = (
        alt.Chart(DATA)
        .mark_bar(color="#3b6fb6", binSpacing=1)
        .encode(
            x=alt.X("lo:Q", title=x_title, bin="binned"),
            x2="hi:Q",
            y=alt.Y("games:Q", title="games"),
            tooltip=[
                alt.Tooltip("lo:Q", title="from", format=",.0f"),
                alt.Tooltip("hi:Q", title="to", format=",.0f"),
                alt.Tooltip("games:Q"),
            ],
        )
        .properties(width=WIDTH, height=200)
    )
    return _spec(chart, rows)


def validation_chart(rows: Rows) -> dict[str, Any]:
    """Expectations per suite: failed, passed, and passed with no rows to check."""
    chart = (
        alt.Chart(DATA)
        .mark_bar()
        .encode(
            x=alt.X("expectations:Q", title="expectations", stack="zero"),
            y=alt.Y("suite:N", title="suite", sort=alt.EncodingSortField("failed_first", order="ascending")),
            color=alt.Color("outcome:N", scale=alt.Scale(domain=["failed", "passed", "no rows"],
                                                          range=["#c62828", "#5fa55a", "#c9c9c9"])),
            tooltip=[alt.Tooltip("suite:N"), alt.Tooltip("outcome:N"), alt.Tooltip("expectations:Q")],
        )
        .properties(width=WIDTH, height=alt.Step(20))
    )
    return _spec(chart, rows)


def outcomes_chart(rows: Rows) -> dict[str, Any]:
    """Games per study by outcome (index page)."""
    domain = ["mafia won", "town won", "unfinished", "failed", "invalid"]
    chart = (
        alt.Chart(DATA)
        .mark_bar()
        .encode(
            x=alt.X("games:Q", title="games", stack="zero"),
            y=alt.Y("study:N", title="study", axis=alt.Axis(labelLimit=320)),
            color=alt.Color(
                "outcome:N",
                scale=alt.Scale(domain=domain, range=["#b2182b", "#3b6fb6", "#bbbbbb", "#555555", "#e6a23c"]),
            ),
            tooltip=[alt.Tooltip("study:N"), alt.Tooltip("outcome:N"), alt.Tooltip("games:Q")],
        )
        .properties(width=WIDTH, height=alt.Step(24))
    )
    return _spec(chart, rows)


def strategema_chart(rows: Rows) -> dict[str, Any]:
    """Mafia win rate (Beta mean, Wilson 95% interval) per configuration, one column per (N players, M mafia), in
    the order of N then M (as numbers: the columns read 6, 8, 10, 12, not 10, 12, 6, 8)."""
    ordered = sorted(rows, key=lambda r: (int(r.get("n_players") or 0), int(r.get("n_mafia") or 0)))
    return _rate_interval_chart(
        rows,
        y="configuration",
        y_title="configuration",
        x_title="mafia win rate",
        column="setting",
        width=220,
        column_sort=list(dict.fromkeys(str(r["setting"]) for r in ordered)),
    )


RATING_SIDES = ["overall", "mafia", "town", "mafioso", "detective", "villager", "doctor"]


def ratings_chart(rows: Rows, *, studies: Sequence[str]) -> dict[str, Any]:
    """The leaderboard: each model's rating with the 95% interval its fit shows, one panel per side and role
    (overall, as mafia, as town, and each role where a side has special roles); models the data do not rate in grey."""
    study = _dropdown("study", studies, "Study: ")
    y = alt.Y("model:N", title="model", sort=alt.EncodingSortField("rating", order="descending"),
              axis=alt.Axis(labelLimit=320))
    tooltip = [
        alt.Tooltip("model:N"),
        alt.Tooltip("side:N"),
        alt.Tooltip("rating:Q", format=".2f"),
        alt.Tooltip("ci_low:Q", title="95% low", format=".2f"),
        alt.Tooltip("ci_high:Q", title="95% high", format=".2f"),
        alt.Tooltip("interval:N", title="interval"),
        alt.Tooltip("rank:Q"),
        alt.Tooltip("rank_low:Q", title="rank, best in 95%"),
        alt.Tooltip("rank_high:Q", title="rank, worst in 95%"),
        alt.Tooltip("n_games:Q", title="games"),
        alt.Tooltip("status:N", title="rated"),
    ]
    color = alt.Color("status:N", title=None, scale=alt.Scale(domain=["rated", "not rated"],
                                                             range=["#3b6fb6", "#b8b8b8"]),
                      legend=alt.Legend(orient="top"))  # beside three panels it would pass a laptop's width
    rule = alt.Chart().mark_rule(strokeWidth=1.6).encode(
        x=alt.X("ci_low:Q", title="rating (logit scale; 0 = the mean of the models that played there)"), x2="ci_high:Q",
        y=y, color=color, tooltip=tooltip,
    )
    point = alt.Chart().mark_point(filled=True, size=70).encode(x="rating:Q", y=y, color=color, tooltip=tooltip)
    chart = (
        alt.layer(rule, point, data=DATA)
        .properties(width=240, height=alt.Step(22))
        .facet(facet=alt.Facet("side:N", title=None, sort=RATING_SIDES, header=alt.Header(labelFontWeight="bold")),
               columns=3)
        # A model with no strength there (no games, or alone: no rating) has no point; the table says why.
        .transform_filter("datum.study == study && isValid(datum.rating)")
        .transform_calculate(status="datum.rated === false ? 'not rated' : 'rated'")
        .add_params(study)
        .resolve_scale(y="independent")
    )
    return _spec(chart, rows)


def rating_calibration_chart(rows: Rows, *, studies: Sequence[str]) -> dict[str, Any]:
    """Each rating fit's held-out predictions binned by prediction against the observed mafia win rate, with the
    observed rate's Wilson 95% interval and the diagonal of perfect calibration."""
    study = _dropdown("study", studies, "Study: ")
    x = alt.X("predicted:Q", title="predicted mafia win rate (held out)", scale=alt.Scale(domain=[0, 1]))
    y = alt.Y("observed:Q", title="observed mafia win rate", scale=alt.Scale(domain=[0, 1]))
    color = alt.Color("fit:N", title="fit", sort=["overall", "sides", "roles"])
    tooltip = [
        alt.Tooltip("fit:N"),
        alt.Tooltip("bin:Q"),
        alt.Tooltip("games:Q"),
        alt.Tooltip("predicted:Q", format=".3f"),
        alt.Tooltip("observed:Q", format=".3f"),
        alt.Tooltip("observed_low:Q", title="95% low", format=".3f"),
        alt.Tooltip("observed_high:Q", title="95% high", format=".3f"),
    ]
    diagonal = alt.Chart().mark_rule(color="#888", strokeDash=[4, 4]).encode(
        x=alt.datum(0), y=alt.datum(0), x2=alt.datum(1), y2=alt.datum(1)
    )
    bars = alt.Chart().mark_rule().encode(x=x, y="observed_low:Q", y2="observed_high:Q", color=color)
    points = alt.Chart().mark_point(filled=True, size=60).encode(x=x, y=y, color=color, tooltip=tooltip)
    chart = (
        alt.layer(diagonal, bars, points, data=DATA)
        .properties(width=360, height=360)
        .transform_filter("datum.study == study")
        .add_params(study)
    )
    return _spec(chart, rows)


def deceiver_detector_chart(rows: Rows, *, studies: Sequence[str]) -> dict[str, Any]:
    """Each model's rating as mafia (x) against its rating as town (y), with both intervals: who deceives, who
    detects, and who does both. Models are named on hover, not by labels (which pile up at a dozen models)."""
    study = _dropdown("study", studies, "Study: ")
    tooltip = [
        alt.Tooltip("model:N"),
        alt.Tooltip("mafia:Q", title="as mafia", format=".2f"),
        alt.Tooltip("mafia_low:Q", title="as mafia, 95% low", format=".2f"),
        alt.Tooltip("mafia_high:Q", title="as mafia, 95% high", format=".2f"),
        alt.Tooltip("town:Q", title="as town", format=".2f"),
        alt.Tooltip("town_low:Q", title="as town, 95% low", format=".2f"),
        alt.Tooltip("town_high:Q", title="as town, 95% high", format=".2f"),
        alt.Tooltip("mafia_games:Q", title="games as mafia"),
        alt.Tooltip("town_games:Q", title="games as town"),
    ]
    x = alt.X("mafia:Q", title="rating as mafia (deceiving)")
    y = alt.Y("town:Q", title="rating as town (detecting)")
    xerr = alt.Chart().mark_rule(color="#888").encode(x="mafia_low:Q", x2="mafia_high:Q", y=y)
    yerr = alt.Chart().mark_rule(color="#888").encode(x=x, y="town_low:Q", y2="town_high:Q")
    # No text labels: at 20 models they pile up; a point names its model on hover and the page's table below holds
    # the same figures.
    point = alt.Chart().mark_point(filled=True, size=80, color="#7b4fb6").encode(x=x, y=y, tooltip=tooltip)
    chart = (
        alt.layer(xerr, yerr, point, data=DATA)
        .properties(width=WIDTH, height=360)
        .transform_filter("datum.study == study")
        .add_params(study)
    )
    return _spec(chart, rows)


def statement_rates_chart(rows: Rows) -> dict[str, Any]:
    """Per (study, model, role): how often its statements are deceptive by its own labels, its listeners' and the
    game's claims, side by side; a bar links to the list of those statements (`href`)."""
    chart = (
        alt.Chart(DATA)
        .mark_bar()
        .encode(
            x=alt.X("rate:Q", title="share of statements", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("measure:N", title=None),
            color=alt.Color("measure:N", legend=None),
            row=alt.Row("who:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            href="href:N",
            tooltip=[alt.Tooltip("who:N", title="model · role"), alt.Tooltip("measure:N"),
                     alt.Tooltip("rate:Q", format=".0%"), alt.Tooltip("n:Q", title="labels or statements")],
        )
        .properties(width=WIDTH - 200, height=alt.Step(16))
    )
    return _spec(chart, rows)


def statement_detection_chart(rows: Rows) -> dict[str, Any]:
    """Per (listener model and team, truth): precision, recall and AUROC of its verdicts; a point links to the
    statements it judged (`href`)."""
    chart = (
        alt.Chart(DATA)
        .mark_point(filled=True, size=80)
        .encode(
            x=alt.X("value:Q", title="value", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("metric:N", title=None),
            color=alt.Color("truth:N", title="scored against"),
            row=alt.Row("who:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            href="href:N",
            tooltip=[alt.Tooltip("who:N", title="listener model · team"), alt.Tooltip("truth:N"),
                     alt.Tooltip("metric:N"), alt.Tooltip("value:Q", format=".2f"), alt.Tooltip("labels:Q")],
        )
        .properties(width=WIDTH - 200, height=alt.Step(16))
    )
    return _spec(chart, rows)
