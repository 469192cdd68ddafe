"""What an algorithmic run has learned: the test accuracy at each answer position over training.

A run's one number (its test accuracy, 10.7%) does not say *what* it learned. The answer
positions do: a memorization model that recalls only the last symbol it read scores 1/n plus
chance, its last position at 100% and the others at chance, while one that has begun to carry
the sequence as the paper's shift register rises at every position. Each training record of
addition and memorization keeps the accuracy at each answer position at every evaluation
(``history[i]["by_position"]``). One panel per run (configuration, depth, seed): samples seen
across, answer positions down (the first answer at the top), the accuracy in colour. Written
beside the task's figure as ``<sweep>-<task>-positions``.
"""

from __future__ import annotations

import math
import numbers
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..results.frame import config_order
from ..results.view import NOT_CAUSAL
from .curves import MIN_WIDTH, TITLE_CHARS_PER_INCH, X_MARGIN, axis_count
from .figures import NOT_CAUSAL_NOTE, TaskFigure, draw_runs
from .styles import legend_text

PANEL_W, PANEL_H = 3.2, 2.4  # inches a panel
MAX_COLUMNS = 4
TITLE_CHARS = 34  # a panel title (a knob string) wraps after a comma at this width
COLOURS = "viridis"


def draw_positions(rows: pd.DataFrame, sweep: str, task: str, out: Path) -> "TaskFigure | None":
    """Draw the answer-position maps of one sweep and task (PNG and PDF) into ``out``; None when
    no training record of theirs kept the accuracy by position."""
    return draw_runs(rows, sweep, task, out, select=position_runs, draw=positions_figure, what="answer positions",
                     suffix="-positions")


def position_runs(train: pd.DataFrame) -> pd.DataFrame:
    """The successful training records whose evaluations kept the accuracy by answer position,
    in the paper's configuration order, then depth and seed."""
    if not len(train) or "history" not in train:
        return train.iloc[0:0]
    kept = train["history"].map(lambda h: bool(position_matrix(h)[0].size))
    runs = train[(train["status"] == "ok") & kept]

    def place(i):
        return (config_order(runs.at[i, "config"]),
                *(_number(runs[f].get(i)) if f in runs else 0 for f in ("depth", "seed")))

    return runs.loc[sorted(runs.index, key=place)]


def _number(value) -> float:
    """A depth or seed to sort by; a missing one last."""
    return float(value) if isinstance(value, numbers.Real) and math.isfinite(value) else math.inf


def _label(run: pd.Series) -> str:
    """'3d-cn L=4 seed 0', without what the record does not have; † where measured not causal."""
    parts = [str(run["config"]) + (NOT_CAUSAL if _not_causal(run) else "")]
    for prefix, name in (("L=", "depth"), ("seed ", "seed")):
        if math.isfinite(_number(run.get(name))):
            parts.append(f"{prefix}{int(run[name])}")
    return " ".join(parts)


def _not_causal(run: pd.Series) -> bool:
    value = run.get("causal")
    return isinstance(value, (bool, np.bool_)) and not bool(value)


def position_matrix(history) -> tuple[np.ndarray, np.ndarray]:
    """(samples, accuracy): the samples of the evaluations that kept a full ``by_position`` and the
    accuracies, one row per evaluation and one column per answer position (empty arrays if none)."""
    points = [(e["samples"], e["by_position"]) for e in history if isinstance(e, dict)
              and isinstance(e.get("samples"), (int, float)) and isinstance(e.get("by_position"), list)
              and e["by_position"]] if isinstance(history, list) else []
    widths = {len(p) for _, p in points}
    if len(widths) != 1:  # none, or evaluations that disagree on the answer's length: not one map
        return np.empty(0), np.empty((0, 0))
    return np.array([s for s, _ in points], dtype=float), np.array([p for _, p in points], dtype=float)


def positions_figure(runs: pd.DataFrame, title: str, device: str) -> Figure:
    """One panel per run of :func:`position_runs`, the accuracy (%) by answer position over training."""
    columns = min(len(runs), MAX_COLUMNS)
    rows = math.ceil(len(runs) / columns)
    width = max(MIN_WIDTH, PANEL_W * columns) + 1.0  # inches: the panels, at least the title's, and the colour bar
    fig = Figure(figsize=(width, PANEL_H * rows + 1.1), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False, sharex=True).ravel()
    maps = [position_matrix(h) for h in runs["history"]]
    image = None
    for k, (ax, (_, run), (samples, accuracy)) in enumerate(zip(axes, runs.iterrows(), maps)):
        image = _panel(ax, run, samples, accuracy, bottom=k + columns >= len(runs))  # none below it
    for ax in axes[len(runs):]:
        ax.axis("off")
    axes[0].set_xlim(0, X_MARGIN * max(samples.max() for samples, _ in maps))  # shared by every panel
    fig.colorbar(image, ax=axes.tolist(), label="test accuracy (%)", shrink=0.9)
    marked = f"; {NOT_CAUSAL_NOTE}" \
        if any(_not_causal(run) for _, run in runs.iterrows()) else ""
    text = (f"{title}: test accuracy at each answer position during training", device,
            "the first answer at the top; a memorization run that recalls only the last symbol it read "
            f"lights only the bottom row{marked}")
    fig.suptitle("\n".join(textwrap.fill(t, int(width * TITLE_CHARS_PER_INCH), break_on_hyphens=False)
                           for t in text if t), fontsize="medium")
    return fig


def _panel(ax, run: pd.Series, samples: np.ndarray, accuracy: np.ndarray, *, bottom: bool):
    """One run's map: ``accuracy`` (evaluations x answer positions) at ``samples``."""
    # Each evaluation's column reaches back to the one before it; the first as far as the gap after
    # it (from 0 for a record's evaluations, which start one interval in).
    first_gap = samples[1] - samples[0] if len(samples) > 1 else samples[0]
    edges = np.concatenate([[max(0.0, samples[0] - first_gap)], samples])
    positions = np.arange(accuracy.shape[1] + 1) + 0.5
    image = ax.pcolormesh(edges, positions, 100.0 * accuracy.T, cmap=COLOURS, vmin=0.0, vmax=100.0)
    ax.set_ylim(positions[-1], positions[0])  # the first answer at the top
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
    ax.xaxis.set_major_formatter(FuncFormatter(axis_count))
    ax.set_title(legend_text(_label(run), TITLE_CHARS, indent=""), fontsize="small")  # broken after commas
    if ax.get_subplotspec().is_first_col():
        ax.set_ylabel("answer position")
    if bottom:  # the shared x axis is labelled under the lowest panel of each column
        ax.xaxis.set_tick_params(labelbottom=True)
        unit = run.get("sample_unit")
        ax.set_xlabel(f"training {unit if isinstance(unit, str) else 'sample'}s seen")
    return image
