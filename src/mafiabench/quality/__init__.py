"""The quality gate: expectation suites over raw tables and marts, run in DuckDB; a failed one blocks publishing.

`suites` reads the rules declared in the models' YAML (`meta.gx`, Great Expectations' expectations by name), `gate`
runs them as queries (`expectations` compiles each to SQL), `delta` proves the raw tables' suites from the rows of
an increment that only adds games, `validator` is GX on a frame, the reference the SQL is tested against. May
import warehouse (where its results table is defined) and errors; it reads tables through the connection it is
given, and the YAML as the pipeline passes it.
"""
