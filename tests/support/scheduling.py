"""Which worker runs what under `make test` (`-n 2 --dist loadfile`): a file is one unit of work, so a module-scoped
fixture (a study built and rendered, a browser, the fake server) is made once, on one worker; the files that read
a study built once per session (`shared_site`, `offline_study`: the builder holds a lock the others wait on) are one
unit together, so one worker builds it while the other works on; and the files on the session's Prefect test harness
are another, so it starts once. (pytest-xdist's `loadgroup` would say this with marks, but it groups nothing on
pytest 9.2: pytest-xdist issue 1386.)"""

from __future__ import annotations

from typing import Any

# The files that read the session's shared studies (support.dashboards.shared_site, support.strategema.offline_study);
# tests/project/test_shared_study_files.py checks the list against the files.
SHARED_STUDY_FILES = frozenset({
    "tests/dashboards/test_browser.py",
    "tests/dashboards/test_browser_page_defects.py",
    "tests/dashboards/test_chart_axes.py",
    "tests/dashboards/test_dashboards.py",
    "tests/dashboards/test_figures_folder.py",
    "tests/dashboards/test_pages_per_warehouse.py",
    "tests/dashboards/test_strategema.py",
})


# The files whose tests take the session's `prefect_harness` (tests/conftest.py: Prefect's test harness, about ten
# seconds to start): on one worker, it starts once. tests/project/test_shared_study_files.py checks this list too.
PREFECT_HARNESS_FILES = frozenset({
    "tests/detect/test_detect_command.py",
    "tests/flows/test_flows.py",
})


def scheduler(config: Any, log: Any) -> Any:
    """xdist's `loadfile` scheduler with the shared-study files as one unit, and the Prefect harness's another."""
    from xdist.scheduler import LoadFileScheduling

    class SharedStudyTogether(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = str(super()._split_scope(nodeid))
            if path in SHARED_STUDY_FILES:
                return "shared-study"
            return "prefect-harness" if path in PREFECT_HARNESS_FILES else path

    return SharedStudyTogether(config, log)
