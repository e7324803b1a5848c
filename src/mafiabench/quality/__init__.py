"""The quality gate: Great Expectations suites over raw tables and marts; a failed expectation blocks publishing.

`suites` reads the rules declared in the models' YAML (`meta.gx`), `gate` runs them, `validator` is GX (in a helper
process during a build). May import warehouse (where its results table is defined) and errors; it reads tables
through the connection it is given, and the YAML as the pipeline passes it.
"""
