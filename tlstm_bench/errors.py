"""Errors a user can cause, and how a run is stopped.

Every such error is a :class:`UserError`: the CLI prints its message on one line and
exits with code 2, never a traceback. Library callers can catch it like a ValueError.

A long job (a sweep, ``train``) stops on Ctrl-C as on ``KeyboardInterrupt``; inside
:func:`term_interrupts`, SIGTERM (``kill``, ``scancel``, a caller's timeout) stops it the same
way: it says where it will resume (its last checkpoint) instead of dying mid-line.
"""

import contextlib
import signal
import threading


class UserError(ValueError):
    """Bad input from the user; the message says what to do instead."""


@contextlib.contextmanager
def term_interrupts():
    """SIGTERM raises ``KeyboardInterrupt`` in the main thread while this is open (elsewhere,
    where no handler can be set, it does nothing); the old handler comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
