"""Play one game: a game config (flags or TOML) -> agents per seat -> the engine's batches -> a record.

Owns the game config, the single-game runner and the plain-text transcript. May import engine, agents, backends,
record, redact and errors; nothing downstream (study, warehouse, build, quality, dashboards).
"""
