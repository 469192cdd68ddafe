"""Learning curves: every training run's evaluations against the samples it had seen.

The paper's figures give one number a run (the final metric, the samples to solve). Whether a
run stopped at its cap while still learning, or sat at chance from the start, is in the curve
that each record keeps (``history``: one entry an evaluation, the test metric on the online
tasks, the validation metric on the others). One panel per depth, one line per configuration
and seed (a configuration's seeds in its colour); a run ends in its marker, filled where it
solved the task, hollow where it stopped without. Written beside the task's figure as
``<sweep>-<task>-curves``.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from ..results.frame import config_order
from ..results.view import NOT_CAUSAL
from .figures import (NOT_CAUSAL_NOTE, TaskFigure, accuracy_scale, causal_cells, draw_runs, is_accuracy,
                      metric_label)
from .styles import Palette, legend_text, legend_width

PANEL_W, PANEL_H = 3.6, 3.0  # inches a panel
MAX_COLUMNS = 4
MIN_WIDTH = 6.0  # inches for the panels, however few
TITLE_CHARS_PER_INCH = 10  # at the title's medium font
X_MARGIN = 1.03  # the shared x axis ends this far past the longest run


def draw_curves(rows: pd.DataFrame, sweep: str, task: str, out: Path) -> "TaskFigure | None":
    """Draw the learning curves of one sweep and task (PNG and PDF) into ``out``; None when no
    training record of theirs kept an evaluation."""
    return draw_runs(rows, sweep, task, out, select=curve_runs, draw=_figure, what="learning curves",
                     suffix="-curves")


def curve_runs(train: pd.DataFrame) -> pd.DataFrame:
    """The successful training records that kept at least one evaluation."""
    if not len(train) or "history" not in train:
        return train.iloc[0:0]
    kept = train["history"].map(lambda h: isinstance(h, list) and any(_point(e) for e in h))
    return train[(train["status"] == "ok") & kept]


def curves_figure(train: pd.DataFrame, title: str, device: str) -> "Figure | None":
    """The learning-curve figure of these training records (None: no record kept a curve).
    ``title``: what the records are ('Memorization (sweep q)'); ``device``: the machine line."""
    runs = curve_runs(train)
    return _figure(runs, title, device) if len(runs) else None


def _figure(runs: pd.DataFrame, title: str, device: str) -> Figure:
    """The figure of runs that each kept a curve (:func:`curve_runs`)."""
    depths = sorted({int(d) for d in runs["depth"].dropna()})
    palette = Palette(runs["config"])
    scale = accuracy_scale(pd.Series([p[1] for h in runs["history"] for p in map(_point, h) if p])) \
        if is_accuracy(runs) else 1.0
    labels = _labels(runs)
    columns = min(len(depths), MAX_COLUMNS)
    rows = math.ceil(len(depths) / columns)
    panels = max(MIN_WIDTH, PANEL_W * columns)  # inches; the title wraps to it, centred over the panels
    fig = Figure(figsize=(panels + legend_width(list(labels.values())), PANEL_H * rows + 1.0), layout="constrained")
    # One x scale for every panel, so that how soon each depth learns compares by eye (a run
    # capped shorter than another ends short of it, not stretched to the same width).
    axes = fig.subplots(rows, columns, squeeze=False, sharex=True, sharey=True).ravel()
    handles = {}
    for ax, depth in zip(axes, depths):
        for config, part in sorted(runs[runs["depth"] == depth].groupby("config"), key=lambda g: config_order(g[0])):
            for k, (_, record) in enumerate(part.sort_values("seed").iterrows()):
                _draw_run(ax, record, palette.style(config), scale, faint=k > 0)
            colour, marker = palette.style(config)
            handles.setdefault(labels[config], Line2D([], [], color=colour, marker=marker, linewidth=1.2))
        _axes(ax, runs, depth, scale)
    for ax in axes[len(depths):]:
        ax.axis("off")
    # Set once from every run: a panel's own set_xlim(left=0) froze the shared scale at the first
    # panel's extent, cutting a deeper depth's longer curve.
    axes[0].set_xlim(0, X_MARGIN * max(p[0] for h in runs["history"] for p in map(_point, h) if p))
    order = sorted(handles, key=lambda label: config_order(label.rstrip(NOT_CAUSAL)))
    fig.legend([handles[k] for k in order], [legend_text(k) for k in order], loc="outside right upper",
               fontsize="small", title="configuration")
    seeds = "one line a seed; " if runs.groupby(["config", "depth"]).size().max() > 1 else ""
    ends = "a run ends in its marker, filled if it solved the task" if _solvable(runs) else ""
    marked = f"; {NOT_CAUSAL_NOTE}" \
        if any(label.endswith(NOT_CAUSAL) for label in labels.values()) else ""
    parts = (f"{title}: {_what(runs)} during training", device, f"{seeds}{ends}{marked}".strip("; "))
    text = "\n".join(textwrap.fill(t, int(panels * TITLE_CHARS_PER_INCH), break_on_hyphens=False)
                     for t in parts if t)
    fig.suptitle(text, fontsize="medium", x=panels / 2 / fig.get_figwidth())
    return fig


def _draw_run(ax, record: pd.Series, style: tuple[str, str], scale: float, *, faint: bool) -> None:
    """One run's curve, ending in its marker: filled if it solved the task, hollow if not."""
    colour, marker = style
    points = [p for p in map(_point, record["history"]) if p]
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float) * scale
    ax.plot(x, y, color=colour, linewidth=1.2, alpha=0.55 if faint else 0.95)
    solved = isinstance(record.get("solved"), (bool, np.bool_)) and bool(record.get("solved"))
    ax.scatter([x[-1]], [y[-1]], marker=marker, s=34, zorder=4, edgecolors=colour, linewidths=1.2,
               facecolors=colour if solved else "white")


def _axes(ax, runs: pd.DataFrame, depth: int, scale: float) -> None:
    ax.set_title(f"L = {depth}", fontsize="small")
    units = runs["sample_unit"].dropna().astype(str).unique() if "sample_unit" in runs else []
    ax.set_xlabel(f"training {units[0] if len(units) == 1 else 'sample'}s seen")
    ax.xaxis.set_major_formatter(FuncFormatter(axis_count))
    ax.grid(True, alpha=0.3)
    if is_accuracy(runs):
        ax.axhline(100.0 if scale == 100.0 else 1.0, color="gray", linestyle=":", linewidth=1)
        ax.set_ylim(-4.0 if scale == 100.0 else -0.04, 104.0 if scale == 100.0 else 1.04)
    if ax.get_subplotspec().is_first_col():
        ax.set_ylabel(_what(runs) + (" (%)" if scale == 100.0 else ""))


def axis_count(value: float, _position=None) -> str:
    """An axis count, short: 750, 1.5K, 60K, 2.4M."""
    for size, suffix in ((1e6, "M"), (1e3, "K")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _point(entry) -> "tuple[float, float] | None":
    """(samples, metric) of one evaluation, or None where either is missing or not finite."""
    if not isinstance(entry, dict):
        return None
    x, y = entry.get("samples"), entry.get("metric")
    if not isinstance(x, (int, float)) or not isinstance(y, (int, float)) or not math.isfinite(y):
        return None
    return float(x), float(y)


def _labels(runs: pd.DataFrame) -> dict[str, str]:
    """config -> its legend label, marked where a run of it is measured not causal."""
    noncausal = {config for (config, _), causal in causal_cells(runs).items() if causal is False}
    return {c: c + (NOT_CAUSAL if c in noncausal else "") for c in runs["config"].unique()}


def _what(runs: pd.DataFrame) -> str:
    """'test accuracy' (online tasks: the curve is the test set's) or 'validation BPC'."""
    return f"{'test' if _online(runs) else 'validation'} {metric_label(runs)}"


def _online(runs: pd.DataFrame) -> bool:
    """Whether the runs are of an online task (addition, memorization): no validation set, the
    curve is the test set's, and a run that reaches 100% has solved it."""
    return runs["valid_metric"].isna().all() if "valid_metric" in runs else True


def _solvable(runs: pd.DataFrame) -> bool:
    return _online(runs) and is_accuracy(runs)
