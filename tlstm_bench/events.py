"""How the core reports progress: one small callback protocol for training, sweeps and timing.

The core never prints. A long-running function takes ``progress``, a callable that receives
:class:`Event` objects, and calls it as work happens; the CLI passes a renderer that draws
them with rich (:mod:`tlstm_bench.cli.render`), a library user passes nothing and gets
silence, or ``True`` for plain lines on stderr, or any function of their own::

    train("2d", task="memorization", depth=2, channels=8, progress=lambda e: print(e.message))

Five kinds of event:

* ``start``: a counted piece of work begins: ``message`` names it, ``total`` is how many
  units it has (samples, cells), ``done`` how many are done already (a resumed run);
* ``advance``: ``done`` units of it are done now; ``message`` is a short status (the loss);
  ``left_s``, if the producer knows better than the average rate (a sweep, whose cells of
  one kind take seconds and of another minutes), its estimate of the seconds left, and
  ``left_floor`` whether that counts only part of what is left (at least that long);
* ``note``: a line for the log (resuming, a cell finished, a warm-up started); ``level``
  says its tone: ``info``, ``ok``, ``warning``, ``error`` or ``detail``;
* ``status``: a transient line (what a waiting sweep waits for), replaced by the next one;
* ``end``: the counted piece of work is over (a renderer closes its bar).

Messages are plain text (no markup): a renderer may style them, by ``level``, but need not.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, TextIO, Union


@dataclass(frozen=True)
class Event:
    """One report from the core (see the module docstring)."""

    kind: str
    message: str = ""
    done: int | None = None
    total: int | None = None
    level: str = "info"
    left_s: float | None = None
    left_floor: bool = False


Reporter = Callable[[Event], None]
# What the core's ``progress`` arguments take: a reporter, True (plain lines on stderr) or
# None / False (silence).
Progress = Union[Reporter, bool, None]


def silent(event: Event) -> None:
    """The default reporter: the core says nothing."""


def plain(stream: TextIO | None = None) -> Reporter:
    """A reporter that writes each ``note`` as one line to ``stream`` (default: stderr at call
    time) and ignores progress counts and transient status lines."""
    def report(event: Event) -> None:
        if event.kind == "note" and event.message:
            out = stream if stream is not None else sys.stderr
            print(event.message, file=out, flush=True)
    return report


def reporter(progress: Progress) -> Reporter:
    """The reporter that ``progress`` asks for: a callable as it is, True: :func:`plain`,
    None or False: :func:`silent`."""
    if callable(progress):
        return progress
    return plain() if progress else silent


def note(report: Reporter, message: str, level: str = "info") -> None:
    """Send one ``note`` event."""
    report(Event("note", message, level=level))
