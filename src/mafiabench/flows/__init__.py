"""The Prefect flows, as package code so an installed mafiabench runs them from any folder: `study` (play and land
an experiment, then optionally build, gate and render), `detect` (the Mafia Detector) and `imports` (land an
external dataset), with the tasks they share (`tasks`) and the plain after-landing steps (`pipeline`).

They read like a table of contents: all logic lives in `study`, `publish`, `detect` and `importers`, tested without
Prefect. No flow module has a command line (the `mafiabench` commands are the entry points, and `flows/*.py` in the
checkout hand their arguments to them) or manages a server (`mafiabench.prefect_server` keeps the local one).
May import study, publish, importers, detect, warehouse, redact and errors.
"""
