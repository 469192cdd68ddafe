"""Figures 3-5 and tables 1-3 of the paper, drawn from the results store only.

This package reads the JSON records with pandas and draws with matplotlib; it never
imports torch or a model (a test checks), so plotting works on a machine without a GPU
stack and never changes a result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .figures import TaskFigure, draw_task
from .grid import sweep_file_grid
from .records import read_records, store_root
from .tables import write_tables

__all__ = ["PlotReport", "TaskFigure", "plot_results", "read_records"]


@dataclass
class PlotReport:
    """What ``plot_results`` wrote: one entry per (sweep, task) figure, and the tables."""

    figures: list[TaskFigure] = field(default_factory=list)
    tables: Path | None = None
    records: int = 0


def plot_results(sweeps: "list[str] | None" = None, *, out: "str | Path" = "results/figures",
                 root: "str | Path | None" = None) -> PlotReport:
    """Draw one figure per sweep and task, and the paper's tables, under ``out``.

    Args:
        sweeps: the sweeps (store collections) to draw; default every sweep in the store.
        out: the folder for ``<sweep>[-<task>].png/.pdf`` and ``tables.md``.
        root: the results store (default ``$TLSTM_BENCH_RESULTS`` or ``results/store``).

    Raises UserError when there are no records to draw.
    """
    out = Path(out)
    frame = read_records(sweeps, store_root(root))
    report = PlotReport(records=len(frame))
    for sweep in dict.fromkeys(frame["sweep"]):
        rows = frame[frame["sweep"] == sweep]
        expected = sweep_file_grid(sweep)
        for task in sorted(rows["task"].unique(), key=lambda t: (t != "runtime", t)):
            report.figures.append(draw_task(rows[rows["task"] == task], sweep, task, out, expected))
    report.tables = write_tables(frame, out)
    return report
