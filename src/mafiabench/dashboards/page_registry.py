"""The list of overview pages: each page module registers its builder with `@register(...)`.

`mafiabench.dashboards.pages` imports every module of its folder, so a module that registers a page is all the
navigation, the index cards and the renderer need to know about it (see the package docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mafiabench.dashboards.data import Marts
from mafiabench.dashboards.html import Page


@dataclass
class Context:
    """What every page builder gets besides its own queries."""

    marts: Marts
    transcripts: dict[str, str]  # game_id -> path of its transcript page, relative to the dashboards root
    n_games: int = 0
    transcripts_note: str = ""
    max_rows: int = 500
    build: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # shown on the index (e.g. that transcripts were sampled)


Builder = Callable[[Context], Page]
Linker = Callable[[Marts, int], list[str]]
Extra = Callable[[Context], Iterable[Page]]


@dataclass(frozen=True)
class PageSpec:
    """A registered page. `order` places it in the navigation (index 0, transcripts 100: pick a free number);
    `links(marts, max_rows)` names the games the page links, so their transcripts are always rendered;
    `extra(ctx)` yields the pages it links that are not in the navigation (e.g. one page per item), written with the
    same shell and checked by the same link test."""

    path: str
    label: str
    description: str
    build: Builder
    order: float
    links: Linker | None = None
    extra: Extra | None = None


_PAGES: dict[str, PageSpec] = {}


def register(
    path: str,
    label: str,
    description: str,
    *,
    order: float,
    links: Linker | None = None,
    extra: Extra | None = None,
) -> Callable[[Builder], Builder]:
    """Decorator: `@register("costs.html", "Cost", "What the index card says.", order=80)` on `def build(ctx)`."""

    def deco(build: Builder) -> Builder:
        if path in _PAGES and _PAGES[path].build is not build:
            raise ValueError(f"two pages registered at {path}: {_PAGES[path].build} and {build}")
        _PAGES[path] = PageSpec(path, label, description, build, order, links, extra)
        return build

    return deco


def registered() -> list[PageSpec]:
    """Every registered page in navigation order (import `mafiabench.dashboards.pages` first)."""
    return sorted(_PAGES.values(), key=lambda p: (p.order, p.path))
