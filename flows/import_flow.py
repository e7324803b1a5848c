"""Importing a dataset, from the checkout: `python flows/import_flow.py FORMAT PATH` is `mafiabench import FORMAT
PATH` (same options, same output).

A thin wrapper: the command is the entry point (the Prefect flow `mafiabench.flows.imports` runs the same import).
"""

from __future__ import annotations

import sys

from mafiabench.cli import main

if __name__ == "__main__":
    sys.exit(main(["import", *sys.argv[1:]]))
