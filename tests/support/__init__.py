"""Helpers the tests share that are not fixtures (those are in tests/conftest.py): imported as `support.<module>`
(tests/ is on the path: pyproject's pythonpath). No test module imports another test module
(tests/project/test_test_layout.py checks it)."""
