"""The paper's figures 3-5: per task, the metric vs depth and the runtime vs depth.

One line per configuration (and per sequence-loop implementation when a configuration
was timed with several, e.g. the sLSTM's ``fused`` and ``loop``), error bars where
there are several seeds (mean +- sd); a runtime point is the median of its repeats, shown
with every repeat as a dot when there are at most :data:`SMALL_N` (the quartiles of 3 values
are interpolations that look one-sided), else with its interquartile range; the device in
the title. Each panel's x axis shows the depths of its own kind (trained, timed). On the
samples-to-solve panel the cells that never solved sit, hollow, at the samples they ran;
the panel is left out when no cell solved. A note under a CPU runtime panel says which
points were timed together, so which comparisons the figure supports. Cells of the grid with
no successful record are listed in the figure and returned, never an error.

Only matplotlib's object API is used (``Figure``, no pyplot), so nothing global changes.
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator

from ..atomic import save_figure
from ..results.by_depth import fastest as fastest_lines, line_names, size_names
from ..results.frame import config_order
from ..results.view import FALLS, NOT_CAUSAL, UNKNOWN_CAUSAL, WITHIN_SPREAD, falling_pairs, unresolved_pairs
from ..vocab import ANCHOR_NAMES, TIMED_PASS
from .grid import cell_status
from .styles import SPREAD, STEP, Palette, legend_text, legend_width

IMPLEMENTATION_STYLES = ("-", "--", ":", "-.")
# Where each line names its implementation (the fastest-implementation figure), its style follows the
# name, so one configuration's implementations differ in every panel (the tLSTM's four on a GPU,
# triton, cuda-graph, fast and triton-graph, take the four styles).
IMPLEMENTATION_ORDER = ("triton", "cuda-graph", "fast", "cudnn", "fused", "wavefront", "eager", "triton-graph", "loop")

TASK_TITLES = {
    "runtime": "Runtime",
    "enwik8": "Wikipedia (enwik8)",
    "addition": "Addition",
    "memorization": "Memorization",
    "mnist": "Sequential MNIST",
    "pmnist": "Sequential pMNIST",
}
# A runtime cell with at most this many repeats shows each repeat (a dot), not its quartiles.
SMALL_N = 5
NOTE_CHARS_PER_INCH = 12  # the missing-cells note is wrapped to the figure's width


@dataclass
class TaskFigure:
    """What was drawn for one (sweep, task): the files and the cells it lacks."""

    sweep: str
    task: str
    paths: list[Path] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # "train 3d-ln L=4": no record at all
    failed: list[str] = field(default_factory=list)  # "runtime 2d L=7: <error>": only failed records
    unsolved: list[str] = field(default_factory=list)  # algorithmic cells that never reached 100%
    noncausal: list[str] = field(default_factory=list)  # "train 3d-ln L=2": measured not causal
    causal_unknown: list[str] = field(default_factory=list)  # records that predate the causal field
    within_spread: list[str] = field(default_factory=list)  # "3d L=1-3": two depths the data cannot order
    falls: list[str] = field(default_factory=list)  # "2d-f L=7-10": the deeper faster at the same M
    lines: list[str] = field(default_factory=list)  # the legend's labels, one per line drawn
    notes: list[str] = field(default_factory=list)  # what else the caption says (what may be compared)
    panels: list[str] = field(default_factory=list)  # "metric", "samples", "runtime": the panels drawn


@dataclass
class _Lines:
    """The legend's handles, and which (config, depth) points are measured not causal."""

    causal: dict[tuple[str, int], "bool | None"]
    palette: Palette = field(default_factory=lambda: Palette([]))  # every line's colour, marker, x offset
    handles: dict[str, Line2D] = field(default_factory=dict)
    gap: float = 1.0  # this panel's smallest gap between depths: the unit of the x offsets
    named: set = field(default_factory=set)  # configurations timed with several implementations (any panel)

    def mark(self, config: str) -> str:
        values = [v for (c, _), v in self.causal.items() if c == config]
        if any(v is False for v in values):
            return NOT_CAUSAL
        return UNKNOWN_CAUSAL if any(v is None for v in values) else ""


def causal_cells(rows: pd.DataFrame) -> dict[tuple[str, int], "bool | None"]:
    """(config, depth) -> False if any record says not causal, None if any lacks the field, else True."""
    cells: dict[tuple[str, int], "bool | None"] = {}
    for config, depth, value in zip(rows["config"], rows["depth"], rows["causal"]):
        if pd.isna(depth):
            continue
        key, value = (config, int(depth)), (value if isinstance(value, (bool, np.bool_)) else None)
        old = cells.get(key, True)
        cells[key] = False if (old is False or value is False) else (None if (old is None or value is None) else True)
    return cells


def figure_name(sweep: str, task: str) -> str:
    slug = lambda s: re.sub(r"[^A-Za-z0-9_.-]+", "_", s) or "_"  # noqa: E731
    return slug(sweep) if task == sweep else f"{slug(sweep)}-{slug(task)}"


def draw_task(rows: pd.DataFrame, sweep: str, task: str, out: Path,
              expected: "dict[str, tuple[list[str], list[int]]] | None" = None, *, fastest: bool = False) -> TaskFigure:
    """Draw one figure (PNG and PDF) for the records of one sweep and task.

    ``expected``: {kind: (configs, depths)} of the sweep's spec, when known (missing cells).
    ``fastest``: the runtime of each configuration's fastest implementation only
    (:func:`tlstm_bench.results.by_depth.fastest`: the lines of ``results --by-depth --fastest``),
    named in the legend, into ``<sweep>-<task>-fastest``: the paper's
    runtime figure from a sweep that timed several implementations.
    """
    fig, result = task_figure(rows, sweep, task, expected, fastest=fastest)
    if fig is not None:
        result.paths = save(fig, out, figure_name(sweep, task) + ("-fastest" if fastest else ""))
    return result


def task_figure(rows: pd.DataFrame, sweep: str, task: str,
                expected: "dict[str, tuple[list[str], list[int]]] | None" = None, *,
                fastest: bool = False) -> "tuple[Figure | None, TaskFigure]":
    """The figure of one sweep and task, not saved (None: records of an unknown kind, nothing to
    draw), and what it shows."""
    result = TaskFigure(sweep, f"{task} (fastest implementation)" if fastest else task)
    train = rows[rows["kind"] == "train"]
    runtime = rows[rows["kind"] == "runtime"]
    if fastest:
        train, runtime = train.iloc[0:0], fastest_lines(runtime)
    panels = _panels(train, runtime)
    result.panels = [panel for panel, _ in panels]
    if not panels:
        return None, result
    statuses = _cell_statuses(result, train, runtime, expected or {})
    if fastest:  # the figure of every implementation lists what is missing or failed
        result.missing, result.failed = [], []
    lines = _Lines(causal_cells(rows[rows["status"] == "ok"]), Palette(rows["config"]))
    timed = runtime[runtime["status"] == "ok"]
    lines.named = {c for c, part in _by_config(timed) if line_names(part).nunique() > 1} if len(timed) else set()
    _list_causality(result, train, runtime)
    result.within_spread = runtime_overlaps(runtime)
    result.falls = runtime_falls(runtime)
    result.notes += [n for n in (_unsolved_note(train, result), runtime_trust(runtime)) if n]

    width = 4.6 * len(panels) + 1.6  # inches: the panels and the legend
    note = _note(result, int(width * NOTE_CHARS_PER_INCH))
    note_lines = note.count("\n") + 1 if note else 0
    fig = Figure(figsize=(width, 4.3 + 0.2 * note_lines), layout="constrained")
    grid = fig.add_gridspec(2 if note else 1, len(panels),
                            height_ratios=[4.3, 0.2 * note_lines] if note else [1])
    for i, (panel, part) in enumerate(panels):
        _draw_panel(fig.add_subplot(grid[0, i]), panel, part, lines, statuses, result, name_all=fastest)
    _legend(fig, lines, result)
    fig.set_figwidth(4.6 * len(panels) + legend_width(result.lines))  # the panels keep their width
    what = "each configuration's fastest implementation" if fastest else _panel_names(panels, train)
    panels_width = 4.6 * len(panels)  # the title is centred over the panels, clear of the legend
    fig.suptitle(f"{TASK_TITLES.get(task, task)}: {what} vs depth (sweep '{sweep}')\n"
                 f"{_devices(train, runtime)}", fontsize="medium", x=panels_width / 2 / fig.get_figwidth())
    if note:
        note_ax = fig.add_subplot(grid[1, :])
        note_ax.axis("off")
        note_ax.text(0, 1, note, va="top", ha="left", color="firebrick", fontsize="small",
                     transform=note_ax.transAxes)
    return fig, result


def _panels(train: pd.DataFrame, runtime: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(panel, rows) side by side: the metric, samples to solve (accuracy tasks), the runtime."""
    panels = []
    if len(train):
        panels.append(("metric", train))
        if is_accuracy(train) and _solved(train).any():  # else the panel would hold nothing
            panels.append(("samples", train))
    for _, part in runtime_sizes(runtime):  # one panel per model size (M = 100, 10M, ...)
        panels.append(("runtime", part))
    return panels


def runtime_sizes(runtime: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The runtime records split by model size: fixed widths (``M=100``) first, then budgets."""
    if not len(runtime):
        return []
    labels = size_names(runtime).map(lambda size: size if size.startswith("M=") else f"{size} parameters")
    if labels.str.startswith("M=").all():  # fixed widths only: one panel, as before sizes were split
        return [("", runtime)]
    order = sorted(set(labels), key=lambda label: (not label.startswith("M="), len(label), label))
    return [(label, runtime[labels == label]) for label in order]


def several_implementations(rows: pd.DataFrame) -> bool:
    """Whether some configuration's runtime was measured with more than one implementation."""
    ok = rows[(rows["kind"] == "runtime") & (rows["status"] == "ok")]
    return bool(len(ok)) and bool((line_names(ok).groupby(ok["config"]).nunique() > 1).any())


def _cell_statuses(result: TaskFigure, train: pd.DataFrame, runtime: pd.DataFrame, expected: dict) -> dict:
    """{kind: CellStatus}; the missing, failed and unsolved cells are listed in ``result``."""
    statuses = {kind: cell_status(part, expected.get(kind))
                for kind, part in (("train", train), ("runtime", runtime)) if len(part)}
    for kind, status in statuses.items():
        result.missing += [f"{kind} {c} L={d}" for c, d in status.missing]
        result.failed += [f"{kind} {c} L={d}: {status.errors[c, d]}" for c, d in status.failed]
    if len(train) and is_accuracy(train):
        result.unsolved = unsolved_cells(train)
    return statuses


def _draw_panel(ax, panel: str, part: pd.DataFrame, lines: "_Lines", statuses: dict, result: TaskFigure, *,
                name_all: bool = False) -> None:
    kind = "runtime" if panel == "runtime" else "train"
    depths = sorted(set(statuses[kind].depths))
    lines.gap = float(np.diff(depths).min()) if len(depths) > 1 else 1.0
    if panel == "runtime":
        _runtime_panel(ax, part, lines, name_all=name_all)
    elif panel == "samples":
        _samples_panel(ax, part, lines)
    else:
        _metric_panel(ax, part, lines)
    ax.set_xlabel(depth_label(kind, depths))
    ax.xaxis.set_major_locator(FixedLocator(depths))
    if depths:
        pad = max(0.3, 0.06 * (depths[-1] - depths[0])) + (SPREAD / 2 + STEP) * lines.gap  # the dodged points
        ax.set_xlim(depths[0] - pad, depths[-1] + pad)
    ax.grid(True, alpha=0.3)


def _legend(fig: Figure, lines: "_Lines", result: TaskFigure) -> None:
    """One legend for every panel, in the paper's order of configurations."""
    handles = lines.handles
    result.lines = sorted(handles, key=lambda label: config_order(label.split(" ")[0].rstrip(NOT_CAUSAL + UNKNOWN_CAUSAL))
                          + (label,))
    if handles:
        fig.legend([handles[k] for k in result.lines], [legend_text(k) for k in result.lines],
                   loc="outside right upper", fontsize="small", title="configuration")


def _panel_names(panels: list, train: pd.DataFrame) -> str:
    names = {"metric": metric_label(train) if len(train) else "", "samples": "samples to solve", "runtime": "runtime"}
    shown = list(dict.fromkeys(names[panel] for panel, _ in panels))  # a runtime panel per size: one name
    return ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]


def _devices(train: pd.DataFrame, runtime: pd.DataFrame) -> str:
    devices = {kind: device_line(part) for kind, part in (("training", train), ("runtime", runtime)) if len(part)}
    return (next(iter(devices.values())) if len(set(devices.values())) == 1
            else "; ".join(f"{kind}: {line}" for kind, line in devices.items()))


NOT_CAUSAL_NOTE = f"{NOT_CAUSAL} measured not causal (it sees later inputs): not comparable"


def draw_runs(rows: pd.DataFrame, sweep: str, task: str, out: Path, *, select, draw, what: str,
              suffix: str) -> "TaskFigure | None":
    """A per-run figure of one sweep and task (PNG and PDF) into ``out``, named
    ``<sweep>-<task><suffix>``: ``select`` picks the training records it can draw (None when
    none), ``draw(runs, title, device)`` makes the figure; ``what`` names it in the report."""
    runs = select(rows[rows["kind"] == "train"])
    if not len(runs):
        return None
    fig = draw(runs, f"{TASK_TITLES.get(task, task)} (sweep '{sweep}')", device_line(runs))
    result = TaskFigure(sweep, f"{task} ({what})", lines=sorted(runs["config"].unique(), key=config_order))
    result.paths = save(fig, out, figure_name(sweep, task) + suffix)
    return result


def save(fig: Figure, out: Path, name: str) -> list[Path]:
    """The figure as PNG and PDF, without dates in them (the same records give the same files)."""
    out.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, out / name)


def _list_causality(result: TaskFigure, train: pd.DataFrame, runtime: pd.DataFrame) -> None:
    """Name the cells measured not causal, and those whose records predate the measurement."""
    for kind, part in (("train", train), ("runtime", runtime)):
        cells = causal_cells(part[part["status"] == "ok"])
        for (config, depth), value in sorted(cells.items(), key=lambda item: (config_order(item[0][0]), item[0][1])):
            if value is not True:
                (result.noncausal if value is False else result.causal_unknown).append(f"{kind} {config} L={depth}")


# ---- panels --------------------------------------------------------------------------
def _metric_panel(ax, rows: pd.DataFrame, lines: _Lines) -> None:
    ok = rows[rows["status"] == "ok"]
    column = "test_metric" if ok["test_metric"].notna().any() else "valid_metric"
    accuracy = is_accuracy(rows)
    scale = accuracy_scale(ok[column]) if accuracy else 1.0
    seeds = False
    for config, part in _by_config(ok):
        stats = part.groupby("depth")[column].agg(["mean", "std", "count"]).dropna(subset=["mean"])
        if stats.empty:
            continue
        seeds |= bool((stats["count"] > 1).any())
        err = (stats["std"] * scale).fillna(0).to_numpy() if (stats["count"] > 1).any() else None
        _line(ax, lines, config, None, stats.index.to_numpy(), stats["mean"].to_numpy() * scale, err)
    split = "test" if column == "test_metric" else "validation"
    shown = ok[column].dropna() * scale
    if accuracy and len(shown):  # keep a flat or near-100% curve readable: pad, but stay within 0..100
        ax.set_ylim(max(-4.0, shown.min() - 5), min(104.0, shown.max() + 5))  # room for a ring at 100%
    if accuracy:
        ax.set_ylabel(f"{split} accuracy (%)")
        ax.set_title("accuracy (higher is better)" + (", mean $\\pm$ sd over seeds" if seeds else ""), fontsize="small")
    else:
        ax.set_ylabel(f"{split} {metric_label(rows)}")
        ax.set_title(f"{metric_label(rows)} (lower is better)" + (", mean $\\pm$ sd over seeds" if seeds else ""),
                     fontsize="small")
    _empty_note(ax, ok, column)


def _samples_panel(ax, rows: pd.DataFrame, lines: _Lines) -> None:
    """Solved cells: the median over solved seeds (and their range); cells that did not solve:
    hollow, at the samples they ran (the run's cap), so the panel shows what was not solved."""
    ok = rows[rows["status"] == "ok"]
    solved = ok[_solved(ok)]
    seeds = False
    for config, part in _by_config(solved):
        stats = part.groupby("depth")["samples_to_solve"].agg(["median", "min", "max", "count"])
        seeds |= bool((stats["count"] > 1).any())
        err = None
        if (stats["count"] > 1).any():
            err = np.array([stats["median"] - stats["min"], stats["max"] - stats["median"]])
        _line(ax, lines, config, None, stats.index.to_numpy(), stats["median"].to_numpy(), err)
    caps = _unsolved_points(ax, ok[~_solved(ok)], lines)
    shown = pd.concat([solved["samples_to_solve"], pd.Series(caps, dtype=float)])
    if len(shown) and shown.min() > 0 and shown.max() / shown.min() > 20:
        ax.set_yscale("log")
    elif len(shown):
        ax.set_ylim(0, shown.max() * 1.12)  # from 0: a count, and the cap above the solved points
    cells = ok.groupby(["config", "depth"]).ngroups
    done = solved.groupby(["config", "depth"]).ngroups
    ax.set_ylabel("training samples to solve")
    ax.set_title(f"samples until 100% test accuracy: {done} of {cells} cells solved"
                 + ("\nmedian and range over solved seeds" if seeds else ""), fontsize="small")


def _unsolved_points(ax, rows: pd.DataFrame, lines: _Lines) -> list[float]:
    """Hollow markers at the samples each unsolved cell ran (the most over its seeds), not joined
    by lines; a dotted line and a key at the cap when every run had the same one. Returns them."""
    ran = rows["samples_seen"].where(rows["samples_seen"].notna(), rows.get("max_samples"))
    rows = rows.assign(_ran=pd.to_numeric(ran, errors="coerce")).dropna(subset=["_ran", "depth"])
    caps = []
    for config, part in _by_config(rows):
        most = part.groupby("depth")["_ran"].max()
        x = _dodged(lines, config, None, "-", most.index.to_numpy(dtype=float))
        colour, marker = lines.palette.style(config)
        ax.scatter(x, most.to_numpy(), marker=marker, s=36, facecolors="white", edgecolors=colour,
                   linewidths=1.3, zorder=4)
        _ring(ax, lines, config, most.index.to_numpy(), x, most.to_numpy())
        caps += [float(v) for v in most]
    if caps:
        one = len(set(caps)) == 1
        if one:
            ax.axhline(caps[0], color="gray", linestyle=":", linewidth=1, zorder=1)
        key = Line2D([], [], marker="o", linestyle="none", markerfacecolor="white", markeredgecolor="gray")
        text = f"not solved by {caps[0]:,.0f} samples (the cap)" if one else "not solved: at the samples it ran"
        ax.legend([key], [text], loc="lower right", fontsize="x-small", framealpha=0.9)
    return caps


def _runtime_lines(rows: pd.DataFrame):
    """(name, depth -> record) of each runtime line: a configuration and implementation at one
    model size (M = 100 and 10M records of one depth are never pooled)."""
    ok = rows[(rows["status"] == "ok") & rows["ms_per_step"].notna()]
    for size, sized in runtime_sizes(ok):
        for config, part in _by_config(sized):
            implementations = line_names(part)
            several = implementations.nunique() > 1
            for impl, series in part.groupby(implementations, sort=True):
                yield f"{config}{f' ({impl})' if several else ''}{f' {size}' if size else ''}", _depth_records(series)


def runtime_overlaps(rows: pd.DataFrame) -> list[str]:
    """The runtime lines whose adjacent depths the data cannot order, as ``3d L=1-3``: the rule of
    ``time`` and ``results`` (:func:`~tlstm_bench.results.view.unresolved`) where a depth has one
    record, else the overlap of its pooled quartiles (the error bars drawn)."""
    return [f"{name} L={a}-{b}" for name, records in _runtime_lines(rows) for a, b in unresolved_pairs(records)]


def runtime_falls(rows: pd.DataFrame) -> list[str]:
    """The runtime lines whose adjacent depths the data order the wrong way, the deeper faster at
    the same M (:func:`~tlstm_bench.results.view.falls`), as ``2d-f L=7-10``."""
    return [f"{name} L={a}-{b}" for name, records in _runtime_lines(rows) for a, b in falling_pairs(records)]


def _depth_records(series: pd.DataFrame) -> dict:
    """Depth -> its record, or where a depth has several, their pooled median and quartiles."""
    by_depth = {}
    for depth, cell in series.groupby("depth"):
        m, lo, hi = runtime_summary(cell)
        pooled = {"ms_per_step": m, "ms_q25": lo, "ms_q75": hi}
        if "channels" in cell and cell["channels"].nunique(dropna=False) == 1:
            pooled["channels"] = cell["channels"].iloc[0]
        by_depth[int(depth)] = cell.iloc[0] if len(cell) == 1 else pooled
    return by_depth


def _runtime_panel(ax, rows: pd.DataFrame, lines: _Lines, *, name_all: bool = False) -> None:
    """One line per configuration and implementation (named where a configuration has several, or
    every one with ``name_all``): the median, and the repeats or their interquartile range."""
    ok = rows[(rows["status"] == "ok") & rows["ms_per_step"].notna()]
    counts, bars = [], False
    for config, part in _by_config(ok):
        implementations = line_names(part)  # a variant (a tuner's tile set) is a line of its own
        several = name_all or config in lines.named or implementations.nunique() > 1
        for k, (impl, series) in enumerate(part.groupby(implementations, sort=True)):
            depths, mid, low, high, dots = [], [], [], [], {}
            for depth, cell in series.groupby("depth"):
                m, lo, hi = runtime_summary(cell)
                samples = cell_samples(cell)
                counts += [len(samples)] if samples else []
                if samples and len(samples) <= SMALL_N:  # every repeat shown; no quartiles of 3 values
                    dots[depth], lo, hi = samples, m, m
                depths.append(depth), mid.append(m), low.append(m - lo), high.append(hi - m)
            has_bars = any(v > 0 for v in low + high)
            bars |= has_bars
            style, impl = _style_of(impl, k, name_all), impl if several else None
            _line(ax, lines, config, impl, np.array(depths), np.array(mid),
                  np.array([low, high]) if has_bars else None, style=style)
            _repeat_dots(ax, lines, config, impl, style, dots)
    ax.set_ylabel(f"ms per timestep ({TIMED_PASS})")
    seq = sorted({int(v) for v in ok["seq_len"].dropna()}) if "seq_len" in ok else []
    detail = f"batch 1, T={seq[0]}" if len(seq) == 1 else "batch 1"
    sizes = sorted({int(v) for v in ok["channels"].dropna()})
    budgets = sorted({str(v) for v in ok["budget"].dropna()}) if "budget" in ok else []
    if budgets:
        detail += f", {budgets[0]} parameters" if len(budgets) == 1 else ""
    else:
        detail += f", M={sizes[0]}" if len(sizes) == 1 else ""
    ax.set_title(f"runtime, {detail}\n{spread_caption(counts, bars)}", fontsize="small")
    ax.set_ylim(bottom=0)
    _empty_note(ax, ok, "ms_per_step")


def _style_of(implementation: str, k: int, by_name: bool) -> str:
    """The line style: the k-th implementation of a configuration's, or (``by_name``) the name's own."""
    if by_name:
        implementation = implementation.split(" ")[0]  # a variant keeps its implementation's style
        known = IMPLEMENTATION_ORDER.index(implementation) if implementation in IMPLEMENTATION_ORDER else None
        k = known if known is not None else sum(map(ord, implementation))
    return IMPLEMENTATION_STYLES[k % len(IMPLEMENTATION_STYLES)]


def spread_caption(counts: list[int], bars: bool) -> str:
    """What a runtime point and its marks are: 'median of 3 repeats; dots: each repeat'."""
    if not counts:
        return "median and interquartile range" if bars else "median"
    n = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
    marks = []
    if min(counts) <= SMALL_N:
        marks.append("dots: each repeat")
    if bars:
        marks.append(f"bars: interquartile range{' (> ' + str(SMALL_N) + ' repeats)' if marks else ''}")
    return f"median of {n} repeat{'' if n == '1' else 's'}" + (f"; {', '.join(marks)}" if marks else "")


def _repeat_dots(ax, lines: _Lines, config: str, implementation, style: str, dots: dict) -> None:
    """Each repeat of a small runtime cell as a small dot beside its median."""
    colour, _ = lines.palette.style(config)
    for depth, samples in dots.items():
        x = _dodged(lines, config, implementation, style, np.array([float(depth)]))[0]
        ax.scatter([x] * len(samples), samples, s=9, color=colour, alpha=0.55, linewidths=0, zorder=3)


def unsolved_cells(train: pd.DataFrame) -> list[str]:
    """'config L=d' for each successful cell where no seed solved the task."""
    ok = train[train["status"] == "ok"]
    solved = ok["solved"].astype(object).where(ok["solved"].notna(), None)
    unsolved = []
    for (config, depth), flags in solved.groupby([ok["config"], ok["depth"]]):
        known = [f for f in flags if f is not None]
        if known and not any(bool(f) for f in known):
            unsolved.append((config, int(depth)))
    return [f"{c} L={d}" for c, d in sorted(unsolved, key=lambda cd: (config_order(cd[0]), cd[1]))]


def cell_samples(cell: pd.DataFrame) -> list[float]:
    """Every finite raw sample (ms per step) of a runtime cell's records."""
    return [float(v) for s in cell["samples"] if isinstance(s, (list, tuple)) for v in s
            if v is not None and math.isfinite(float(v))]


def runtime_summary(cell: pd.DataFrame) -> tuple[float, float, float]:
    """Median, 25th and 75th percentile of a cell's timing: the raw samples when stored,
    else the recorded medians (several records) or median -+ IQR/2 (one record)."""
    samples = cell_samples(cell)
    if samples:
        q25, q50, q75 = np.percentile(samples, [25, 50, 75])
        return float(q50), float(q25), float(q75)
    medians = cell["ms_per_step"].dropna().to_numpy(dtype=float)
    if len(medians) > 1:
        q25, q50, q75 = np.percentile(medians, [25, 50, 75])
        return float(q50), float(q25), float(q75)
    iqr = cell["ms_iqr"].dropna()
    half = float(iqr.iloc[0]) / 2 if len(iqr) else 0.0
    return float(medians[0]), float(medians[0]) - half, float(medians[0]) + half


# ---- helpers -------------------------------------------------------------------------
def _by_config(rows: pd.DataFrame):
    for config in sorted(rows["config"].unique(), key=config_order):
        yield config, rows[rows["config"] == config]


def _dodged(lines: _Lines, config: str, implementation, style: str, x: np.ndarray) -> np.ndarray:
    """x shifted by the line's rank in the figure, so equal values stay apart; a configuration's
    second implementation (not a solid line) half a rank further."""
    half = 0.5 * lines.palette.step if implementation and style != "-" else 0.0
    return x + (lines.palette.offset(config) + half) * lines.gap


def _ring(ax, lines: _Lines, config: str, depths, x, y) -> None:
    """A red ring on the points whose model is measured not causal (it sees later inputs)."""
    noncausal = np.array([lines.causal.get((config, int(d))) is False for d in depths], dtype=bool)
    if noncausal.any():
        ax.scatter(np.asarray(x)[noncausal], np.asarray(y)[noncausal], s=160, facecolors="none", edgecolors="red",
                   linewidths=1.6, zorder=5)


def _line(ax, lines: _Lines, config, implementation, x, y, err, *, style="-") -> None:
    colour, marker = lines.palette.style(config)
    anchor = " (not in the paper)" if config in ANCHOR_NAMES else ""  # the untied stacked LSTM
    label = config + lines.mark(config) + anchor + (f" ({implementation})" if implementation else "")
    order = np.argsort(x)
    depths, y = x[order], y[order]
    x = _dodged(lines, config, implementation, style, depths.astype(float))
    if err is not None:
        err = err[..., order]
    container = ax.errorbar(x, y, yerr=err, color=colour, marker=marker, linestyle=style, capsize=3,
                            markersize=5, linewidth=1.4, label=label)
    _ring(ax, lines, config, depths, x, y)
    lines.handles.setdefault(label, container.lines[0])


def depth_label(kind: str, depths: list[int]) -> str:
    """The x label: which depths this panel's kind has ('depth L (trained at L = 1, 2)')."""
    shown = ", ".join(map(str, depths)) if len(depths) <= 6 else f"{depths[0]}, ..., {depths[-1]}"
    return f"depth L ({'timed' if kind == 'runtime' else 'trained'} at L = {shown})" if depths else "depth L"


def _solved(rows: pd.DataFrame) -> pd.Series:
    return rows["samples_to_solve"].notna() & (rows["status"] == "ok")


def _unsolved_note(train: pd.DataFrame, result: TaskFigure) -> "str | None":
    """When no cell solved an algorithmic task: say so (the samples panel is left out)."""
    if not len(train) or not is_accuracy(train) or _solved(train).any() or not result.unsolved:
        return None
    ran = pd.to_numeric(train.loc[train["status"] == "ok", "samples_seen"], errors="coerce").dropna()
    within = f" within {int(ran.max()):,} samples" if len(ran) else ""
    return f"No cell solved the task{within} (100% test accuracy), so there is no samples-to-solve panel."


def runtime_trust(rows: pd.DataFrame) -> "str | None":
    """What a CPU runtime panel lets a reader compare, from which points were timed together
    (a sweep's records name their ``timing_group``: one configuration's depths, one process,
    repeats interleaved). None for other devices."""
    ok = rows[(rows["status"] == "ok") & rows["ms_per_step"].notna()] if len(rows) else rows
    if not len(ok) or set(ok["device"].dropna().astype(str)) != {"cpu"}:
        return None
    line = ok["config"].astype(str) + "/" + ok["implementation"].fillna("").astype(str)
    group = ok["timing_group"] if "timing_group" in ok else pd.Series(None, index=ok.index, dtype=object)
    drift = ("a process's speed on a shared CPU changes from run to run (several-fold), so do not compare "
             "heights across lines: only each line's rise with depth")
    if group.notna().all() and group.nunique() == 1:
        return "CPU runtime: every point was timed in one process, repeats interleaved; heights compare within it."
    if group.notna().all() and (group.groupby(line).nunique() == 1).all():
        return (f"CPU runtime: each line's depths were timed together (one process, repeats interleaved); "
                f"different lines ran in different processes, and {drift}.")
    return f"CPU runtime: the records do not say which points were timed together; {drift} (if measured together)."


def _empty_note(ax, rows, column, text="no successful cells") -> None:
    if rows.empty or rows[column].notna().sum() == 0:
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="firebrick")


def is_accuracy(rows: pd.DataFrame) -> bool:
    return _metric_name(rows) == "accuracy"


def _metric_name(rows: pd.DataFrame) -> str:
    names = rows["metric"].dropna().astype(str).unique()
    return names[0] if len(names) else "metric"


def metric_label(rows: pd.DataFrame) -> str:
    return {"bpc": "BPC"}.get(_metric_name(rows), _metric_name(rows))


def accuracy_scale(values: pd.Series) -> float:
    """Accuracies are shown in %; a store holding fractions (all <= 1) is scaled by 100."""
    values = values.dropna()
    return 100.0 if len(values) and float(values.max()) <= 1.0 else 1.0


def device_line(rows: pd.DataFrame) -> str:
    """'<device name> (<device>), torch <v>, <n> threads' for each distinct machine setting."""
    keys = rows[["device_name", "device", "torch_version", "threads"]].astype(object)
    keys = keys.where(keys.notna(), None).drop_duplicates()
    parts = []
    for name, device, version, threads in keys.itertuples(index=False):
        text = f"{name or 'unknown device'}" + (f" ({device})" if device else "")
        if version:
            text += f", torch {version}"
        if threads is not None:
            text += f", {int(threads)} thread" + ("s" if int(threads) != 1 else "")
        parts.append(text)
    if len(parts) > 2:
        parts = parts[:2] + [f"and {len(parts) - 2} more"]
    return "; ".join(parts) if parts else "device unknown"


def _note(result: TaskFigure, width: int) -> str:
    lines = []
    if result.noncausal:
        lines.append(f"{NOT_CAUSAL} red ring: not causal ({', '.join(result.noncausal)}): y_t depends on later "
                     "inputs (measured by the separability audit), so these numbers are not comparable.")
    if result.causal_unknown:
        lines.append(f"{UNKNOWN_CAUSAL} causality not recorded for {len(result.causal_unknown)} cells (records "
                     "older than the field); `tlstm-bench info CONFIG --depth L --json` measures it.")
    if result.within_spread:
        lines.append(f"{WITHIN_SPREAD} runtime not resolved (the measurement cannot order these adjacent depths; "
                     f"docs/runtime.md): {', '.join(result.within_spread)}.")
    if result.falls:
        lines.append(f"{FALLS} runtime falls with depth at the same M (a kernel chosen for one shape, or a fault "
                     f"of the measurement; docs/runtime.md): {', '.join(result.falls)}.")
    lines += result.notes
    if result.missing:
        lines.append(f"missing cells (no record): {', '.join(result.missing)}")
    if result.failed:
        lines.append("failed cells: " + "; ".join(f.split(":")[0] for f in result.failed))
    wrapped = [w for line in lines for w in textwrap.wrap(line, width)]
    if len(wrapped) > 6:
        wrapped = wrapped[:6] + ["... (the full list is printed by tlstm-bench plot)"]
    return "\n".join(wrapped)
