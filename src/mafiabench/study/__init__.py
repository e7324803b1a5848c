"""A study: an experiment file -> design -> planned games -> shards played (in-process or in workers) -> landed.

Owns the experiment spec, design expansion, planning and preview, the budget guard, shard play and the run summary.
May import play, engine, agents, backends, record, prices and warehouse (to land); never transform, quality or
dashboards.
"""
