"""The build machinery: the dbt project run in-process (`dbt_runner`), a build staged and published (`marts`), and
the catalogue of what the warehouse holds (`catalogue`). The metrics it computes are in `transform.models` (Python)
and `transform/sql/` (SQL)."""
