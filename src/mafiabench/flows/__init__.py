"""The Prefect flows, as package code so an installed mafiabench runs them from any folder: `study` (play and land
an experiment, then optionally build, gate and render) and `imports` (land an external dataset).

They read like a table of contents: all logic lives in `study`, `publish` and `importers`, tested without Prefect.
May import study, publish, importers, warehouse and errors. `flows/*.py` in the checkout are thin wrappers kept for
`python flows/study_flow.py serve ...`.
"""
