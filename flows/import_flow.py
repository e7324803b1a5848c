"""The import flow, from the checkout: `python flows/import_flow.py FORMAT PATH`.

A thin wrapper: the flow is package code, `mafiabench.flows.imports`.
"""

from __future__ import annotations

import sys

from mafiabench.flows.imports import import_dataset, import_flow

__all__ = ["import_dataset", "import_flow"]

if __name__ == "__main__":
    import_flow(*sys.argv[1:3])
