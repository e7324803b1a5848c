"""Every chart the dashboards draw has titled axes whose tick labels cannot overlap, and the tie-decided part of a
win-rate bar is hatched, so it reads in grayscale print (issue 14, item 1).

Checked on the specs of a real render of the shared test study: the Vega-Lite each chart is built as (every x/y
encoding of every layer titled; label overlap handled on the axis or in the chart's axis config) and the Vega the
page embeds (every axis that draws labels has a title and an overlap strategy)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from mafiabench.dashboards import charts, html
from mafiabench.publish import render
from support.dashboards import shared_site

OVERLAP_KEYS = ("labelOverlap", "labelLimit", "labelAngle")


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(Vega-Lite, compiled Vega) of every chart of a real render; the compiler is the real one, only watched."""
    warehouse = shared_site(tmp_path_factory)[0]
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []
    compile_vega = html.compile_vega

    def watched(spec: dict[str, Any]) -> dict[str, Any]:
        compiled = compile_vega(spec)
        seen.append((spec, compiled))
        return compiled

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(html, "compile_vega", watched)
        render(warehouse, tmp_path_factory.mktemp("axes") / "dashboards")
    assert len(seen) >= 10, f"only {len(seen)} charts rendered"
    return seen


def encodings(node: Any, path: str = "") -> list[tuple[str, str, dict[str, Any]]]:
    """Every x/y encoding of a field (those draw an axis), with where it sits in the spec."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    if isinstance(node, dict):
        for channel in ("x", "y"):
            e = (node.get("encoding") or {}).get(channel)
            if isinstance(e, dict) and ("field" in e or "aggregate" in e) and e.get("axis", {}) is not None:
                out.append((path, channel, e))
        for key, value in node.items():
            if key != "datasets":
                out += encodings(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            out += encodings(item, f"{path}[{i}]")
    return out


def vega_axes(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [*[a for a in node.get("axes", []) if isinstance(a, dict)],
                *[a for k, v in node.items() if k != "data" for a in vega_axes(v)]]
    if isinstance(node, list):
        return [a for item in node for a in vega_axes(item)]
    return []


def test_every_x_and_y_encoding_is_titled_and_its_labels_cannot_overlap(specs: list[Any]) -> None:
    checked = 0
    for vl, _ in specs:
        config = (vl.get("config") or {}).get("axis") or {}
        for path, channel, e in encodings(vl):
            axis = e.get("axis") or {}
            title = e.get("title") or axis.get("title")
            assert isinstance(title, str) and title.strip(), f"{vl.get('description', '?')} {path} {channel} {e}"
            assert any(k in axis or k in config for k in OVERLAP_KEYS), f"{path} {channel}: no overlap rule"
            checked += 1
    assert checked >= 20


def test_every_drawn_axis_has_a_title_and_an_overlap_strategy(specs: list[Any]) -> None:
    n = 0
    for _, vega in specs:
        config = (vega.get("config") or {}).get("axis") or {}
        for axis in vega_axes(vega):
            if axis.get("labels", True) and not axis.get("grid"):  # grid-only axes draw no labels
                assert axis.get("title"), axis
                assert any(axis.get(k) or config.get(k) for k in ("labelOverlap", "labelLimit")), axis
                n += 1
    assert n >= 20


def test_untitled_layers_take_their_axis_title_and_unset_overlap_rules_get_the_default() -> None:
    spec = {"layer": [{"encoding": {"x": {"field": "rate", "title": "win rate"}}},
                      {"encoding": {"x": {"field": "lo"}, "x2": {"field": "hi"}}}]}
    charts._title_layers(spec)
    assert spec["layer"][1]["encoding"]["x"]["title"] == "win rate"  # not "win rate, lo"
    assert charts.AXIS_LABELS["labelOverlap"] and charts.AXIS_LABELS["labelLimit"] > 0


def luminance(hex_colour: str) -> float:
    r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_the_tie_decided_part_is_hatched_in_stripes_that_survive_grayscale(specs: list[Any]) -> None:
    fills = [
        e for vl, _ in specs
        for e in [_find(vl, "fill")] if e and "condition" in e and charts.TIE in str(e["condition"].get("test"))
    ]
    assert fills, "no capability chart with a tie-decided part was rendered"
    gradient = fills[0]["condition"]["value"]
    assert gradient["gradient"] == "linear"
    shades = [luminance(stop["color"]) for stop in gradient["stops"]]
    # stripes: dark and white alternate many times, far apart in gray (not just a lighter shade of the same fill)
    changes = sum(1 for a, b in itertools.pairwise(shades) if abs(a - b) > 0.5)
    assert changes >= 10 and max(shades) - min(shades) > 0.5


def _find(node: Any, channel: str) -> dict[str, Any] | None:
    if isinstance(node, dict):
        enc = node.get("encoding")
        if isinstance(enc, dict) and isinstance(enc.get(channel), dict):
            return enc[channel]  # type: ignore[no-any-return]
        for key, value in node.items():
            if key != "datasets" and (found := _find(value, channel)) is not None:
                return found
    elif isinstance(node, list):
        for item in node:
            if (found := _find(item, channel)) is not None:
                return found
    return None


DETECTOR_ROW = {"detector": "d", "source": "s", "day": 1, "metric": "single", "rate": 0.5, "low": 0.3, "high": 0.7,
                "baseline": 0.25, "n_games": 4, "baseline_fraction": "1/4"}


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: charts.strategema_chart([]), id="strategema"),
        pytest.param(lambda: charts.fallback_share_chart([], variants=["classic"]), id="belief-fallbacks"),
        pytest.param(lambda: charts.last_speaker_chart([], variants=["classic"]), id="last-speaker"),
        pytest.param(lambda: charts.name_seat_chart([], variants=["classic"], settings=["name"], roles=["villager"]),
                     id="name-seat"),
        pytest.param(lambda: detector_page().accuracy_chart([DETECTOR_ROW]), id="detector"),
    ],
)
def test_charts_of_pages_the_shared_study_leaves_empty_are_titled_too(build: Any) -> None:
    """Pages whose marts the shared study leaves empty (the multi-night belief study, the detector) draw no chart
    there; their builders are checked on their own (the encodings do not depend on the rows)."""
    spec = build()
    found = encodings(spec)
    assert found
    config = spec["config"]["axis"]
    for path, channel, e in found:
        axis = e.get("axis") or {}
        assert (e.get("title") or axis.get("title")), f"{path} {channel} {e}"
        assert any(k in axis or k in config for k in OVERLAP_KEYS)


def detector_page() -> Any:
    from mafiabench.dashboards.pages import detector

    return detector
