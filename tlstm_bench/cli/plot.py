"""``tlstm-bench plot``: the paper's figures 3-5 and tables 1-3 from the results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app, console, handles_user_errors


@app.command()
@handles_user_errors
def plot(
    sweeps: Annotated[Optional[list[str]], typer.Argument(help="Sweeps to draw (default: every sweep in the store).")] = None,
    out: Annotated[Path, typer.Option(help="Folder for the PNG/PDF figures and tables.md.")] = Path("results/figures"),
    results_dir: Annotated[Optional[Path], typer.Option(help="The results store (default $TLSTM_BENCH_RESULTS or results/store).")] = None,
) -> None:
    """Draw metric and runtime vs depth per task (PNG and PDF) and the paper's tables (Markdown).

    Reads only the results store. Cells of a sweep's grid with no successful record are
    listed on the figure and here; they do not stop the plot.
    """
    from ..plotting import plot_results  # matplotlib is imported only when plotting

    report = plot_results(sweeps, out=out, root=results_dir)
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
    console.print(f"tables: {report.tables}", highlight=False)
