"""The quality gate: Great Expectations suites over raw tables and marts; a failed expectation blocks publishing.

May import warehouse (where its results table is defined) and errors; it reads tables through the connection it
is given.
"""
