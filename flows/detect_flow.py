"""The detector flow, from the checkout: `python flows/detect_flow.py EXPERIMENT [--publish]`.

A thin wrapper: the flow is package code, `mafiabench.flows.detect`.
"""

from __future__ import annotations

import sys

from mafiabench.flows.detect import detect_flow, main

__all__ = ["detect_flow", "main"]

if __name__ == "__main__":
    sys.exit(main())
