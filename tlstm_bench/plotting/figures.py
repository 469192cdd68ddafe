"""The paper's figures 3-5: per task, the metric vs depth and the runtime vs depth.

One line per configuration (and per sequence-loop implementation when a configuration
was timed with several, e.g. the sLSTM's ``fused`` and ``loop``), error bars where
there are several seeds (mean +- sd) or timing repeats (median and interquartile range
of the raw samples), the device in the title. Cells of the grid with no successful
record are listed in the figure and returned, never an error.

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
from ..results.by_depth import fastest, line_names
from ..results.frame import config_order
from ..results.view import NOT_CAUSAL, UNKNOWN_CAUSAL, WITHIN_SPREAD, spread_overlaps
from ..vocab import ANCHOR_NAMES
from .grid import cell_status

# The seven configurations keep one colour and marker in every figure (SPEC section 6 order).
CONFIG_STYLES = {
    "slstm": ("black", "o"),
    "2d": ("tab:blue", "s"),
    "2d-m": ("tab:cyan", "v"),
    "2d-f": ("tab:green", "^"),
    "3d": ("tab:red", "D"),
    "3d-ln": ("tab:purple", "P"),
    "3d-cn": ("tab:orange", "*"),
}
OTHER_COLOURS = ("tab:brown", "tab:pink", "tab:olive", "tab:gray", "darkblue", "darkgreen")
IMPLEMENTATION_STYLES = ("-", "--", ":", "-.")
# Where each line names its implementation (the fastest-implementation figure), its style follows the
# name, so one configuration's implementations differ in every panel.
IMPLEMENTATION_ORDER = ("triton", "cuda-graph", "fast", "cudnn", "fused", "wavefront", "eager", "loop")

TASK_TITLES = {
    "runtime": "Runtime",
    "enwik8": "Wikipedia (enwik8)",
    "addition": "Addition",
    "memorization": "Memorization",
    "mnist": "Sequential MNIST",
    "pmnist": "Sequential pMNIST",
}
DODGE = 0.012  # x shift per configuration, as a fraction of the depth range
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
    within_spread: list[str] = field(default_factory=list)  # "3d L=1-3": runtime IQRs of two depths overlap
    lines: list[str] = field(default_factory=list)  # the legend's labels, one per line drawn


@dataclass
class _Lines:
    """The legend's handles, and which (config, depth) points are measured not causal."""

    causal: dict[tuple[str, int], "bool | None"]
    handles: dict[str, Line2D] = field(default_factory=dict)

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
    (:func:`fastest_rows`), named in the legend, into ``<sweep>-<task>-fastest``: the paper's
    runtime figure from a sweep that timed several implementations.
    """
    result = TaskFigure(sweep, f"{task} (fastest implementation)" if fastest else task)
    train = rows[rows["kind"] == "train"]
    runtime = rows[rows["kind"] == "runtime"]
    if fastest:
        train, runtime = train.iloc[0:0], fastest_rows(runtime)
    panels = _panels(train, runtime)
    if not panels:  # records of an unknown kind: nothing to draw
        return result
    statuses = _cell_statuses(result, train, runtime, expected or {})
    if fastest:  # the figure of every implementation lists what is missing or failed
        result.missing, result.failed = [], []
    lines = _Lines(causal_cells(rows[rows["status"] == "ok"]))
    _list_causality(result, train, runtime)
    result.within_spread = runtime_overlaps(runtime)

    width = 4.6 * len(panels) + 1.6  # inches: the panels and the legend
    note = _note(result, int(width * NOTE_CHARS_PER_INCH))
    note_lines = note.count("\n") + 1 if note else 0
    fig = Figure(figsize=(width, 4.3 + 0.2 * note_lines), layout="constrained")
    grid = fig.add_gridspec(2 if note else 1, len(panels),
                            height_ratios=[4.3, 0.2 * note_lines] if note else [1])
    for i, (panel, part) in enumerate(panels):
        _draw_panel(fig.add_subplot(grid[0, i]), panel, part, lines, statuses, result, name_all=fastest)
    _legend(fig, lines, result)
    what = "each configuration's fastest implementation" if fastest else _panel_names(panels, train)
    fig.suptitle(f"{TASK_TITLES.get(task, task)}: {what} vs depth (sweep '{sweep}')\n"
                 f"{_devices(train, runtime)}", fontsize="medium")
    if note:
        note_ax = fig.add_subplot(grid[1, :])
        note_ax.axis("off")
        note_ax.text(0, 1, note, va="top", ha="left", color="firebrick", fontsize="small",
                     transform=note_ax.transAxes)
    result.paths = _save(fig, out, figure_name(sweep, task) + ("-fastest" if fastest else ""))
    return result


def _panels(train: pd.DataFrame, runtime: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(panel, rows) side by side: the metric, samples to solve (accuracy tasks), the runtime."""
    panels = []
    if len(train):
        panels.append(("metric", train))
        if _is_accuracy(train):
            panels.append(("samples", train))
    for _, part in runtime_sizes(runtime):  # one panel per model size (M = 100, 10M, ...)
        panels.append(("runtime", part))
    return panels


def size_label(budget, channels) -> str:
    """A runtime record's model size: its budget (``10M``: M varies with the depth), else ``M=100``."""
    if isinstance(budget, str) and budget:
        return f"{budget} parameters"
    return f"M={int(channels)}" if pd.notna(channels) else "size unknown"


def runtime_sizes(runtime: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The runtime records split by model size: fixed widths (``M=100``) first, then budgets."""
    if not len(runtime):
        return []
    labels = pd.Series([size_label(b, c) for b, c in zip(runtime["budget"], runtime["channels"])],
                       index=runtime.index)
    if labels.str.startswith("M=").all():  # fixed widths only: one panel, as before sizes were split
        return [("", runtime)]
    order = sorted(set(labels), key=lambda label: (not label.startswith("M="), len(label), label))
    return [(label, runtime[labels == label]) for label in order]


def several_implementations(rows: pd.DataFrame) -> bool:
    """Whether some configuration's runtime was measured with more than one implementation."""
    ok = rows[(rows["kind"] == "runtime") & (rows["status"] == "ok")]
    return bool(len(ok)) and bool((line_names(ok).groupby(ok["config"]).nunique() > 1).any())


def fastest_rows(runtime: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and model size, the records of its fastest implementation
    (:func:`tlstm_bench.results.by_depth.fastest`: the table ``results --by-depth --fastest``
    shows the same lines)."""
    return fastest(runtime)


def _cell_statuses(result: TaskFigure, train: pd.DataFrame, runtime: pd.DataFrame, expected: dict) -> dict:
    """{kind: CellStatus}; the missing, failed and unsolved cells are listed in ``result``."""
    statuses = {kind: cell_status(part, expected.get(kind))
                for kind, part in (("train", train), ("runtime", runtime)) if len(part)}
    for kind, status in statuses.items():
        result.missing += [f"{kind} {c} L={d}" for c, d in status.missing]
        result.failed += [f"{kind} {c} L={d}: {status.errors[c, d]}" for c, d in status.failed]
    if len(train) and _is_accuracy(train):
        result.unsolved = unsolved_cells(train)
    return statuses


def _draw_panel(ax, panel: str, part: pd.DataFrame, lines: "_Lines", statuses: dict, result: TaskFigure, *,
                name_all: bool = False) -> None:
    if panel == "runtime":
        _runtime_panel(ax, part, lines, name_all=name_all)
    elif panel == "samples":
        _samples_panel(ax, part, lines, result.unsolved)
    else:
        _metric_panel(ax, part, lines)
    depths = sorted(set(statuses["train" if panel != "runtime" else "runtime"].depths))
    ax.set_xlabel("depth L")
    ax.xaxis.set_major_locator(FixedLocator(depths))
    if depths:
        pad = max(0.3, 0.06 * (depths[-1] - depths[0]))
        ax.set_xlim(depths[0] - pad, depths[-1] + pad)
    ax.grid(True, alpha=0.3)


def _legend(fig: Figure, lines: "_Lines", result: TaskFigure) -> None:
    """One legend for every panel, in the paper's order of configurations."""
    handles = lines.handles
    result.lines = sorted(handles, key=lambda label: config_order(label.split(" ")[0].rstrip(NOT_CAUSAL + UNKNOWN_CAUSAL))
                          + (label,))
    if handles:
        fig.legend([handles[k] for k in result.lines], result.lines, loc="outside right upper", fontsize="small",
                   title="configuration")


def _panel_names(panels: list, train: pd.DataFrame) -> str:
    names = {"metric": _metric_label(train) if len(train) else "", "samples": "samples to solve", "runtime": "runtime"}
    shown = list(dict.fromkeys(names[panel] for panel, _ in panels))  # a runtime panel per size: one name
    return ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]


def _devices(train: pd.DataFrame, runtime: pd.DataFrame) -> str:
    devices = {kind: device_line(part) for kind, part in (("training", train), ("runtime", runtime)) if len(part)}
    return (next(iter(devices.values())) if len(set(devices.values())) == 1
            else "; ".join(f"{kind}: {line}" for kind, line in devices.items()))


def _save(fig: Figure, out: Path, name: str) -> list[Path]:
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
    accuracy = _is_accuracy(rows)
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
        ax.set_ylim(max(-2.0, shown.min() - 5), min(102.0, shown.max() + 5))
    if accuracy:
        ax.set_ylabel(f"{split} accuracy (%)")
        ax.set_title("accuracy (higher is better)" + (", mean $\\pm$ sd over seeds" if seeds else ""), fontsize="small")
    else:
        ax.set_ylabel(f"{split} {_metric_label(rows)}")
        ax.set_title(f"{_metric_label(rows)} (lower is better)" + (", mean $\\pm$ sd over seeds" if seeds else ""),
                     fontsize="small")
    _empty_note(ax, ok, column)


def _samples_panel(ax, rows: pd.DataFrame, lines: _Lines, unsolved: list[str]) -> None:
    ok = rows[(rows["status"] == "ok") & rows["samples_to_solve"].notna()]
    seeds = False
    for config, part in _by_config(ok):
        stats = part.groupby("depth")["samples_to_solve"].agg(["median", "min", "max", "count"])
        seeds |= bool((stats["count"] > 1).any())
        err = None
        if (stats["count"] > 1).any():
            err = np.array([stats["median"] - stats["min"], stats["max"] - stats["median"]])
        _line(ax, lines, config, None, stats.index.to_numpy(), stats["median"].to_numpy(), err)
    values = ok["samples_to_solve"]
    if len(values) and values.min() > 0 and values.max() / values.min() > 20:
        ax.set_yscale("log")
    ax.set_ylabel("training samples to solve")
    ax.set_title("samples until 100% test accuracy" + (", median and range over solved seeds" if seeds else ""),
                 fontsize="small")
    if unsolved:
        cells = rows[rows["status"] == "ok"].groupby(["config", "depth"]).ngroups
        text = (", ".join(unsolved) if len(unsolved) <= 6 else f"{len(unsolved)} of {cells} cells")
        ax.text(0.02, 0.98, "not solved: " + "\n".join(textwrap.wrap(text, 40)),
                transform=ax.transAxes, va="top", fontsize="x-small", color="dimgray")
    _empty_note(ax, ok, "samples_to_solve", "no cell solved the task")


def runtime_overlaps(rows: pd.DataFrame) -> list[str]:
    """The runtime lines whose adjacent depths' IQRs (the error bars drawn) overlap, as
    ``3d L=1-3``: there the plotted difference between the depths is within the measured spread."""
    ok = rows[(rows["status"] == "ok") & rows["ms_per_step"].notna()]
    close = []
    for config, part in _by_config(ok):
        implementations = line_names(part)
        several = implementations.nunique() > 1
        for impl, series in part.groupby(implementations, sort=True):
            intervals = {}
            for depth, cell in series.groupby("depth"):
                _, lo, hi = runtime_summary(cell)
                intervals[int(depth)] = (lo, hi)
            close += [f"{config}{f' ({impl})' if several else ''} L={a}-{b}" for a, b in spread_overlaps(intervals)]
    return close


def _runtime_panel(ax, rows: pd.DataFrame, lines: _Lines, *, name_all: bool = False) -> None:
    """One line per configuration and implementation (named where a configuration has several, or
    every one with ``name_all``), median and IQR of the samples."""
    ok = rows[(rows["status"] == "ok") & rows["ms_per_step"].notna()]
    spread = False
    for config, part in _by_config(ok):
        implementations = line_names(part)  # a variant (a tuner's tile set) is a line of its own
        several = name_all or implementations.nunique() > 1
        for k, (impl, series) in enumerate(part.groupby(implementations, sort=True)):
            depths, mid, low, high = [], [], [], []
            for depth, cell in series.groupby("depth"):
                m, lo, hi = runtime_summary(cell)
                depths.append(depth), mid.append(m), low.append(m - lo), high.append(hi - m)
            has_spread = any(v > 0 for v in low + high)
            spread |= has_spread
            _line(ax, lines, config, impl if several else None, np.array(depths), np.array(mid),
                  np.array([low, high]) if has_spread else None, style=_style_of(impl, k, name_all))
    ax.set_ylabel("ms per timestep (forward + backward)")
    seq = sorted({int(v) for v in ok["seq_len"].dropna()}) if "seq_len" in ok else []
    detail = f"batch 1, T={seq[0]}" if len(seq) == 1 else "batch 1"
    sizes = sorted({int(v) for v in ok["channels"].dropna()})
    budgets = sorted({str(v) for v in ok["budget"].dropna()})
    if budgets:
        detail += f", {budgets[0]} parameters" if len(budgets) == 1 else ""
    else:
        detail += f", M={sizes[0]}" if len(sizes) == 1 else ""
    ax.set_title(f"runtime, {detail}" + (", median and IQR" if spread else ""), fontsize="small")
    ax.set_ylim(bottom=0)
    _empty_note(ax, ok, "ms_per_step")


def _style_of(implementation: str, k: int, by_name: bool) -> str:
    """The line style: the k-th implementation of a configuration's, or (``by_name``) the name's own."""
    if by_name:
        implementation = implementation.split(" ")[0]  # a variant keeps its implementation's style
        known = IMPLEMENTATION_ORDER.index(implementation) if implementation in IMPLEMENTATION_ORDER else None
        k = known if known is not None else sum(map(ord, implementation))
    return IMPLEMENTATION_STYLES[k % len(IMPLEMENTATION_STYLES)]


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


def runtime_summary(cell: pd.DataFrame) -> tuple[float, float, float]:
    """Median, 25th and 75th percentile of a cell's timing: the raw samples when stored,
    else the recorded medians (several records) or median -+ IQR/2 (one record)."""
    samples = [float(v) for s in cell["samples"] if isinstance(s, (list, tuple)) for v in s
               if v is not None and math.isfinite(float(v))]
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


def _style(config: str) -> tuple[str, str]:
    if config in CONFIG_STYLES:
        return CONFIG_STYLES[config]
    return OTHER_COLOURS[sum(map(ord, config)) % len(OTHER_COLOURS)], "X"


def _line(ax, lines: _Lines, config, implementation, x, y, err, *, style="-") -> None:
    colour, marker = _style(config)
    anchor = " (not in the paper)" if config in ANCHOR_NAMES else ""  # the untied stacked LSTM
    label = config + lines.mark(config) + anchor + (f" ({implementation})" if implementation else "")
    order = np.argsort(x)
    x, y = x[order], y[order]
    noncausal = np.array([lines.causal.get((config, int(d))) is False for d in x], dtype=bool)
    # Dodge: shift each configuration a little along x so equal values do not hide each other.
    rank = config_order(config)[0] + (0.5 if implementation and style != "-" else 0.0)
    x = x + (rank - 3) * DODGE * max(1.0, float(np.ptp(x)) if len(x) else 1.0)
    if err is not None:
        err = err[..., order]
    container = ax.errorbar(x, y, yerr=err, color=colour, marker=marker, linestyle=style, capsize=3,
                            markersize=5, linewidth=1.4, label=label)
    if noncausal.any():  # a red ring: this point's model sees later inputs (not comparable)
        ax.scatter(x[noncausal], y[noncausal], s=160, facecolors="none", edgecolors="red", linewidths=1.6, zorder=5)
    lines.handles.setdefault(label, container.lines[0])


def _empty_note(ax, rows, column, text="no successful cells") -> None:
    if rows.empty or rows[column].notna().sum() == 0:
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="firebrick")


def _is_accuracy(rows: pd.DataFrame) -> bool:
    return _metric_name(rows) == "accuracy"


def _metric_name(rows: pd.DataFrame) -> str:
    names = rows["metric"].dropna().astype(str).unique()
    return names[0] if len(names) else "metric"


def _metric_label(rows: pd.DataFrame) -> str:
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
        lines.append(f"{WITHIN_SPREAD} runtime within the spread (the IQRs of two adjacent depths overlap, so their "
                     f"difference is not resolved): {', '.join(result.within_spread)}.")
    if result.missing:
        lines.append(f"missing cells (no record): {', '.join(result.missing)}")
    if result.failed:
        lines.append("failed cells: " + "; ".join(f.split(":")[0] for f in result.failed))
    wrapped = [w for line in lines for w in textwrap.wrap(line, width)]
    if len(wrapped) > 6:
        wrapped = wrapped[:6] + ["... (the full list is printed by tlstm-bench plot)"]
    return "\n".join(wrapped)
