"""Draw the core's progress events (:mod:`tlstm_bench.events`) with rich: the CLI's one renderer.

A ``start`` event opens a progress bar (the previous one, if any, is closed), ``advance``
moves it and shows its status, ``end`` closes it, a ``note`` is printed above it as a log
line, and ``status`` shows a transient line under a spinner. Use it as a context manager, so the bar and the
spinner are closed however the work ends::

    with Renderer(err_console) as report:
        train(settings, progress=report)
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from ..events import Event

# How a note's first word is styled, by level; "detail" lines are dim as a whole.
STYLES = {"info": "bold", "ok": "green", "warning": "yellow", "error": "bold red"}


def styled(event: Event) -> Text:
    """The note's plain text with its tone: the first word coloured by level (``ok``, ``FAILED``,
    ``interrupted``), or the whole line dim for a ``detail``. Never read as markup."""
    text = Text(event.message)
    if event.level == "detail":
        text.stylize("dim")
    elif event.level in STYLES and event.level != "info":
        first = event.message.split(" ", 1)[0]
        text.stylize(STYLES[event.level], 0, len(first))
    return text


class Renderer:
    """A reporter (``renderer(event)``) that draws on ``console``."""

    def __init__(self, console: Console):
        self.console = console
        self.bar: Progress | None = None
        self.task = None
        self.spinner = None

    def __enter__(self) -> "Renderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._stop_spinner()
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __call__(self, event: Event) -> None:
        if event.kind == "start":
            self._start(event)
        elif event.kind == "advance" and self.bar is not None:
            self.bar.update(self.task, completed=event.done, status=escape(event.message))
        elif event.kind == "note":
            self._stop_spinner()
            (self.bar.console if self.bar is not None else self.console).print(styled(event), highlight=False,
                                                                             soft_wrap=True)
        elif event.kind == "end":
            self.close()
        elif event.kind == "status":
            if self.spinner is None:
                self.spinner = self.console.status("")
                self.spinner.start()
            self.spinner.update(Text(event.message))

    def _start(self, event: Event) -> None:
        self.close()
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[status]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                            console=self.console, transient=False)
        self.bar.start()
        self.task = self.bar.add_task(escape(event.message), total=event.total, completed=event.done or 0,
                                      status="")

    def _stop_spinner(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None
