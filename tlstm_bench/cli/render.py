"""Draw the core's progress events (:mod:`tlstm_bench.events`) with rich: the CLI's one renderer.

A ``start`` event opens a progress bar (the previous one, if any, is closed), ``advance``
moves it and shows its status, ``end`` closes it, a ``note`` is printed above it as a log
line, and ``status`` shows a transient line under a spinner. Piped into a file (``nohup``, a batch
job's log) a live bar draws nothing until it closes, so there a moving bar also writes a plain
line (its count, times and status) at most every :data:`LOG_EVERY_S` seconds. Use it as a
context manager, so the bar and the spinner are closed however the work ends::

    with Renderer(err_console) as report:
        train(settings, progress=report)
"""

from __future__ import annotations

import time
from typing import Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
from rich.table import Column
from rich.text import Text

from ..events import Event
from .screen import can_show, keeps_lines_whole, wrap_words

# How a note's first word is styled, by level; "detail" lines are dim as a whole.
STYLES = {"info": "bold", "ok": "green", "warning": "yellow", "error": "bold red"}
# Piped into a log, a moving bar writes a line at most this often (seconds).
LOG_EVERY_S = 60.0


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


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class CountColumn(ProgressColumn):
    """``1,500/7,500``: the units done and the total, with thousands separators."""

    def render(self, task: Task) -> Text:
        total = "?" if task.total is None else f"{int(task.total):,}"
        return Text(f"{int(task.completed):,}/{total}")


class TimesColumn(ProgressColumn):
    """``0:42 elapsed, ~1:10 left``. What is left is the producer's estimate where it gave one
    (``Event.left_s``: a sweep's, by kind of cell), counted down since it came, with ``>`` when
    it covers only part of what is left; else the average rate since the start (units done in
    this run over its elapsed time), not rich's 30-second window, which has no estimate while a
    sweep waits for a cell that takes longer than that."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        done = task.completed - task.fields.get("first", 0)
        text = f"{_clock(elapsed)} elapsed"
        if task.finished or task.stop_time is not None:  # done, or stopped early (solved, interrupted)
            return Text(text)
        given = task.fields.get("left")
        if given is not None:
            left_s, floor, at = given
            left_s = max(0.0, left_s - (elapsed - at))
            if left_s >= 1 or not floor:  # "at least 0:00" says nothing
                text += f", {'>' if floor else '~'}{_clock(left_s)} left"
        elif task.total is not None and done > 0 and elapsed > 0:
            text += f", ~{_clock(elapsed / done * (task.total - task.completed))} left"
        return Text(text)


class _TwoLines(Progress):
    """The bar on one line, the status (the loss, a sweep's counts) on the next: at 80 columns
    the count and the times stay whole, and a long status is cut at the end, not squeezed."""

    def get_renderables(self):
        for task in self.tasks:
            yield self.make_tasks_table([task])
            status = task.fields.get("status")
            if status:
                line = Text.from_markup("  " + status, overflow="ellipsis" if can_show(self.console, "…") else "crop")
                line.no_wrap = True
                yield line


class Renderer:
    """A reporter (``renderer(event)``) that draws on ``console``."""

    def __init__(self, console: Console, *, log_every: float = LOG_EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.console = console
        self.bar: Progress | None = None
        self.task = None
        self.spinner = None
        # A log (not a terminal, not a notebook) gets plain lines: a live bar draws nothing there.
        self.log_lines = not console.is_terminal and not console.is_jupyter
        self.log_every = log_every
        self.clock = clock
        self._logged = 0.0   # when the last log line was written
        self._name: str | None = None   # the bar's name, until a log line names it

    def __enter__(self) -> "Renderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the spinner and the bar. A bar that stops short of its total (a run solved early,
        or interrupted) keeps its count and elapsed time, but no longer a time left."""
        self._stop_spinner()
        if self.bar is not None:
            self.bar.stop_task(self.task)
            self.bar.stop()  # draws the bar once more, as it is now
            self.bar = None

    def __call__(self, event: Event) -> None:
        if event.kind == "start":
            self._start(event)
        elif event.kind == "advance" and self.bar is not None:
            left = None if event.left_s is None else (event.left_s, event.left_floor,
                                                      self.bar.tasks[0].elapsed or 0.0)
            self.bar.update(self.task, completed=event.done, status=escape(event.message), left=left)
            if self.log_lines:
                self._log(event)
        elif event.kind == "note":
            self._stop_spinner()
            self._print(styled(event))
        elif event.kind == "end":
            self.close()
        elif event.kind == "status":
            if self.spinner is None:
                self.spinner = self.console.status("", spinner="dots" if can_show(self.console, "⠋") else "line")
                self.spinner.start()
            self.spinner.update(Text(event.message))

    def _print(self, text: Text) -> None:
        """A log line above the bar. In a terminal (or at a COLUMNS asked for) a long line wraps
        between words, never inside one; piped into a file or a log it stays whole, for grep."""
        console = self.bar.console if self.bar is not None else self.console
        console.print(text if keeps_lines_whole(console) else wrap_words(text, console.width),
                      highlight=False, soft_wrap=True)

    def _start(self, event: Event) -> None:
        self.close()
        # The count and the times keep their width; a long name (a knob string) is cut instead.
        count = len(f"{event.total or 0:,}") * 2 + 1
        times = len("0:00:00 elapsed, ~0:00:00 left")
        room = max(8, self.console.width - count - times - 12)
        cut = "…" if can_show(self.console, "…") else "..."
        text = event.message if len(event.message) <= room else event.message[:room - len(cut)] + cut
        self.bar = _TwoLines(TextColumn("[bold]{task.description}", table_column=Column(no_wrap=True)),
                             BarColumn(bar_width=None), CountColumn(table_column=Column(no_wrap=True, min_width=count)),
                             TimesColumn(table_column=Column(no_wrap=True, min_width=times - 6)),
                             console=self.console, transient=False, expand=True, get_time=self.clock)
        self.bar.start()
        self.task = self.bar.add_task(escape(text), total=event.total, completed=event.done or 0,
                                      status="", first=event.done or 0)
        self._logged = self.clock()
        self._name = event.message

    def _log(self, event: Event) -> None:
        """The bar's count, times and status as one plain line, if ``log_every`` seconds passed
        since the last; before the first, the bar's name (a job shorter than that logs only its
        closed bar)."""
        now = self.clock()
        if now - self._logged < self.log_every:
            return
        self._logged = now
        if self._name is not None:
            self._print(Text(self._name))
            self._name = None
        task = self.bar.tasks[0]
        line = Text.assemble("  ", CountColumn().render(task), "  ", TimesColumn().render(task))
        self._print(line + (f"  {event.message}" if event.message else ""))

    def _stop_spinner(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None
