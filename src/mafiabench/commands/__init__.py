"""CLI subcommands: each module here defines `register(subparsers)`; `mafiabench.cli` discovers them all."""
