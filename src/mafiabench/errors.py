"""Errors a user can fix. The CLI prints them as one clear line (no traceback) and exits 2."""


class UserError(Exception):
    """Bad input (a config, a dataset, a flag), a missing key, a busy warehouse: the message says what and where."""
