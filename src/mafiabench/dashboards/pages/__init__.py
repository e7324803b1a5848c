"""One module per dashboard page: its queries, its charts, and the template it fills (`templates/<name>.html.j2`).

Every module of this folder is imported here, so registering a page with `@register(...)` in a new module is enough
for it to be rendered, put in the navigation and listed on the index. `PAGES` is the registered pages in
navigation order.
"""

from __future__ import annotations

import importlib
import pkgutil

from mafiabench.dashboards.page_registry import PageSpec, registered

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")

PAGES: list[PageSpec] = registered()
NAV: list[tuple[str, str]] = [(p.path, p.label) for p in PAGES]

__all__ = ["NAV", "PAGES", "PageSpec"]
