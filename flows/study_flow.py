"""The study flow's commands, from the checkout: `python flows/study_flow.py run|serve EXPERIMENT ...` is
`mafiabench run|serve EXPERIMENT ...` (same options, same output).

A thin wrapper: the flow is package code (`mafiabench.flows.study`) and the commands are its entry points; nothing is
imported before the command runs, since Prefect reads its settings when first imported.
"""

from __future__ import annotations

import sys

from mafiabench.cli import main

if __name__ == "__main__":
    if sys.argv[1:2] not in (["run"], ["serve"]):
        print("usage: python flows/study_flow.py run|serve EXPERIMENT [OPTIONS]  (= mafiabench run|serve)",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
