"""The build, in two parts: the machinery (`build/`: dbt run in-process, staging and publishing a build, the
catalogue) and the metrics it computes (`sql/`, the dbt project's SQL models; `models/`, one module per Python
model and their registry). Machinery imports models, never the other way.

May import warehouse (to read raw tables), prices and errors; never the quality gate (the pipeline calls both) nor
the dashboards.
"""

LAYERS = ("staging", "intermediate", "marts")  # the dbt project's model folders, in data-flow order
