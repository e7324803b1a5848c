"""The detector flow's command, from the checkout: `python flows/detect_flow.py EXPERIMENT [--publish]` is
`mafiabench detect EXPERIMENT [--publish]` (same options, same output).

A thin wrapper: the flow is package code (`mafiabench.flows.detect`) and the command is its entry point.
"""

from __future__ import annotations

import sys

from mafiabench.cli import main

if __name__ == "__main__":
    sys.exit(main(["detect", *sys.argv[1:]]))
