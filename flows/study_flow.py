"""The study flow, from the checkout: `python flows/study_flow.py run|serve EXPERIMENT ...`.

A thin wrapper: the flow is package code, `mafiabench.flows.study` (so an installed mafiabench finds it too).
"""

from __future__ import annotations

import sys

from mafiabench.flows.study import StudyIncomplete, main, study_flow

__all__ = ["StudyIncomplete", "main", "study_flow"]

if __name__ == "__main__":
    sys.exit(main())
