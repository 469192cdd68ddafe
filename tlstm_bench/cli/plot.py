"""``tlstm-bench plot``: the paper's figures 3-5 and tables 1-3 from the results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UserError
from .app import ResultsDir, app, console, handles_user_errors


@app.command()
@handles_user_errors
def plot(
    sweeps: Annotated[Optional[list[str]], typer.Argument(help="Sweeps to draw (default: every sweep in the store).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Folder for the PNG/PDF figures and tables.md "
                                                     "(default: figures/ in the results folder).")] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Draw metric and runtime vs depth per task (PNG and PDF) and the paper's tables (Markdown).

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
        names = ", ".join(str(p) for p in fig.paths) or "nothing to draw"
        console.print(f"[bold]{fig.sweep} / {fig.task}[/]: {names}", highlight=False)
        if fig.missing:
            console.print(f"  [yellow]missing cells (no record): {', '.join(fig.missing)}[/]", highlight=False)
        for failed in fig.failed:
            console.print(f"  [red]failed: {failed}[/]", highlight=False)
        if fig.unsolved:
            console.print(f"  not solved: {', '.join(fig.unsolved)}", highlight=False)
        if fig.noncausal:
            console.print(f"  [red]not causal (ringed; not comparable): {', '.join(fig.noncausal)}[/]", highlight=False)
        if fig.within_spread:
            console.print(f"  runtime not resolved (≈): {', '.join(fig.within_spread)}",
                          highlight=False)
        if fig.causal_unknown:
            console.print(f"  causality not recorded: {', '.join(fig.causal_unknown)}", highlight=False)
    console.print(f"tables: {report.tables}", highlight=False)
