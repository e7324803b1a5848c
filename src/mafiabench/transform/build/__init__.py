"""The build machinery: the dbt project run in-process (`dbt_runner`), a build staged and published (`marts`), which
games and models an incremental build recomputes (`increment`), dbt's recorded statements replayed without dbt when
nothing they depend on changed (`replay`) and rehearsed on an empty copy of the warehouse while a run's games play
(`rehearsal`), and the catalogue of what the warehouse holds (`catalogue`). The metrics it
computes are in `transform.models` (Python) and `transform/sql/` (SQL)."""
