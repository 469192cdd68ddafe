"""``tlstm-bench plot``: the paper's figures 3-5 and tables 1-3 from the results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from ..errors import UserError
from .app import ResultsDir, app, console, handles_user_errors
from .screen import glue, say


@app.command()
@handles_user_errors
def plot(
    sweeps: Annotated[Optional[list[str]], typer.Argument(help="Sweeps to draw (default: every sweep in the store).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Folder for the PNG/PDF figures and tables.md "
                                                     "(default: figures/ in the results folder).")] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Draw metric and runtime vs depth per task (PNG and PDF), the training runs' learning
    curves, and the paper's tables (Markdown).

    Reads only the results store. Cells of a sweep's grid with no successful record are
    listed on the figure and here; they do not stop the plot. Points measured not causal
    are ringed in red and named under the figure.
    """
    from ..plotting import plot_results  # matplotlib is imported only when plotting
    from ..checks import output_dir
    from ..results.store import workspace

    folder = workspace(results_dir)
    where = "--out" if out is not None else "the figures folder"
    target = output_dir(out if out is not None else folder.figures, where)  # before drawing anything
    try:
        report = plot_results(sweeps, out=target, root=folder.store)
    except OSError as exc:  # the folder was checked; a full disk can still fail a write
        raise UserError(f"cannot write the figures in {target}: {exc.strerror or exc}") from None
    console.print(f"read {report.records} records")
    for fig in report.figures:
        # Each list wraps between its items only (``2d-f L=1`` stays on one line), a path is never broken.
        _say(Text(f"{fig.sweep} / {fig.task}:", style="bold"), [str(p) for p in fig.paths] or ["nothing to draw"])
        if fig.missing:
            _say(Text("  missing cells (no record):"), fig.missing, "yellow")
        for failed in fig.failed:
            say(console, Text(f"  failed: {failed}", style="red"), hanging=2)
        for lead, items, style in (("not solved:", fig.unsolved, ""),
                                   ("not causal (ringed; not comparable):", fig.noncausal, "red"),
                                   ("runtime not resolved (≈):", fig.within_spread, ""),
                                   ("runtime falls with depth (↓):", fig.falls, "yellow"),
                                   ("causality not recorded:", fig.causal_unknown, "")):
            if items:
                _say(Text(f"  {lead}"), items, style)
    console.print(f"tables: {report.tables}", highlight=False)
    for note in report.notes:  # what the reader set aside or doubts (quarantined strangers, future dates)
        say(console, Text(f"note: {note}", style="yellow"), hanging=2)


def _say(lead: Text, items: list[str], style: str = "") -> None:
    """``lead`` and the items, comma-separated, in ``style``: wrapped between items only."""
    say(console, Text.assemble(lead, " ", ", ".join(glue(str(item)) for item in items), style=style), hanging=2)
