"""Errors a user can cause.

Every such error is a :class:`UserError`: the CLI prints its message on one line and
exits with code 2, never a traceback. Library callers can catch it like a ValueError.
"""


class UserError(ValueError):
    """Bad input from the user; the message says what to do instead."""
