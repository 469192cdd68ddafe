"""Figures 3-5 and tables 1-3 of the paper, drawn from the results store only.

This package reads the JSON records with pandas and draws with matplotlib; it never
imports torch or a model (a test checks), so plotting works on a machine without a GPU
stack and never changes a result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..results.frame import read_frame
from ..results.store import workspace
from .curves import draw_curves
from .figures import TaskFigure, draw_task, several_implementations
from .grid import lr_line, sweep_file_grid
from .positions import draw_positions
from .tables import write_tables

__all__ = ["PlotReport", "TaskFigure", "plot_results"]


@dataclass
class PlotReport:
    """What ``plot_results`` wrote: one entry per (sweep, task) figure, and the tables."""

    figures: list[TaskFigure] = field(default_factory=list)
    tables: Path | None = None
    records: int = 0
    notes: list[str] = field(default_factory=list)  # the reader's: strangers quarantined, future dates


def plot_results(sweeps: "list[str] | None" = None, *, out: "str | Path | None" = None,
                 root: "str | Path | None" = None) -> PlotReport:
    """Draw one figure per collection and task, and the paper's tables, under ``out``.

    Args:
        sweeps: the collections of the store to draw (sweep names, ``training``,
            ``timing``); default every one.
        out: the folder for ``<sweep>[-<task>].png/.pdf`` and ``tables.md`` (default: the
            default workspace's ``figures/``).
        root: the results store (default: the default workspace's ``store/``).

    Raises UserError when there are no records to draw.
    """
    out = Path(out) if out is not None else workspace().figures
    frame = read_frame(sweeps, root=root)
    report = PlotReport(records=len(frame), notes=list(frame.attrs.get("notes", [])))
    grids = {sweep: sweep_file_grid(sweep) for sweep in dict.fromkeys(frame["collection"])}
    by_lr = {sweep for sweep, grid in grids.items() if any(" lr=" in c for c in grid.get("train", ([], []))[0])}
    frame, split = lr_lines(frame, by_lr)
    for sweep, expected in grids.items():
        rows = frame[frame["collection"] == sweep]
        if sweep in split - by_lr:  # its lines are named by lr, the spec's configurations are not
            expected = {kind: grid for kind, grid in expected.items() if kind != "train"}
        for task in sorted(rows["task"].unique(), key=lambda t: (t != "runtime", t)):
            these = rows[rows["task"] == task]
            report.figures.append(draw_task(these, sweep, task, out, expected))
            if several_implementations(these):  # the paper's figure: each configuration's fastest
                report.figures.append(draw_task(these, sweep, task, out, expected, fastest=True))
            for extra in (draw_curves(these, sweep, task, out),  # every training run's evaluations
                          draw_positions(these, sweep, task, out)):  # the answer positions of each
                if extra is not None:
                    report.figures.append(extra)
    report.tables = write_tables(frame, out)
    return report


def lr_lines(frame: pd.DataFrame, sweeps: "set[str]" = frozenset()) -> tuple[pd.DataFrame, set]:
    """The frame with the training records of a collection and task that ran at several learning
    rates or warm-ups (or of ``sweeps``: specs that list several) named by theirs (``3d-cn
    lr=0.0001``, ``3d-cn lr=0.001 warmup=linear:10000``), and those collections: a figure or table
    would otherwise draw two runs that differ in ``--lr`` as two seeds of one configuration."""
    if "lr" not in frame or not len(frame):
        return frame, set()
    frame, split = frame.copy(), set()
    train = frame[(frame["kind"] == "train") & frame["lr"].notna()]
    for (collection, _), part in train.groupby(["collection", "task"], sort=False):
        warmups = part["lr_warmup"] if "lr_warmup" in part else [None] * len(part)
        settings = [(lr, w if isinstance(w, str) else None) for lr, w in zip(part["lr"], warmups)]  # NaN: none
        if len(set(settings)) > 1 or collection in sweeps:
            frame.loc[part.index, "config"] = [lr_line(c, lr, w) for c, (lr, w) in zip(part["config"], settings)]
            split.add(collection)
    return frame, split
