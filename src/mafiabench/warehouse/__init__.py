"""The DuckDB warehouse's raw layer: raw tables (one per grain), records -> rows, atomic raw files, the writer lock.

Owns `raw_*` tables and landing, idempotent by game id, and the build bookkeeping tables (`builds`). May import
record, redact and errors only; the build, the gate and the dashboards read what lands here.
"""
