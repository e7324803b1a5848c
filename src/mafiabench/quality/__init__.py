"""The quality gate: Great Expectations suites over raw tables and marts; a failed expectation blocks publishing.

May import errors only; it reads tables through the connection it is given.
"""
