"""The build: staging views, intermediate and mart tables from the SQL project, Python models, exact baselines,
and the catalogue of what the warehouse holds.

May import warehouse (to read raw tables), prices and errors; never the quality gate (the pipeline calls both) nor
the dashboards.
"""

LAYERS = ("staging", "intermediate", "marts")  # the dbt project's model folders, in data-flow order
