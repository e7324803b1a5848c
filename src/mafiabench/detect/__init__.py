"""The Mafia Detector: a pipeline step after landing that reads finished games from the warehouse, cuts each one
after day 1, 2, ... its last day, cleanses the transcript (public day messages, votes and eliminations only, roles
redacted), asks a detector to name the k mafiosos, and lands the answers in `raw_detections` through the one writer.

Owns: cleansing (`transcript`), detectors (`detectors`: LLM over any backend, plus offline `policy/most-voted` and
`policy/random`), its prompt files (`prompts/`), running and landing (`run`). It runs unchanged on simulated and
imported games because it reads only the raw tables every source lands into.

May import: `mafiabench.engine` (events, seeds), `mafiabench.backends`, `mafiabench.warehouse`, `mafiabench.errors`,
`mafiabench.redact`. Nothing imports it except commands, flows and the study run that schedules it.
"""
