"""Results for a reader: one table per collection and kind of record, readable at 80 columns.

Each kind of record shows the columns that matter for it (:data:`DEFAULT_COLUMNS`);
what is the same for every row (the machine, the torch version, the code) goes into
the caption. A non-causal configuration carries a marker and a footnote (its numbers are
not comparable), a record from before causality was recorded another, and failed
records list their error under the table. ``columns`` picks any columns instead, and
``wide`` shows every column that has a value.

The tables are plain data (:class:`~tlstm_bench.results.table.TableView`: text cells, column
headers and alignment, a caption in parts); the CLI lays them out at the terminal's width
(``tlstm-bench results``, :mod:`tlstm_bench.cli.tables`).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field

import pandas as pd

from ..errors import UserError
from ..vocab import CONTENDED_SHARE
from .stats import median_interval, paired_ratios
from .table import Column, TableView

DEFAULT_COLUMNS = {
    "runtime": ("config", "depth", "implementation", "channels", "ms_per_step", "ms_iqr", "threads", "status"),
    "train": ("config", "depth", "seed", "channels", "params", "test_metric", "samples_to_solve", "status"),
}
HEADERS = {"depth": "L", "implementation": "impl", "channels": "M", "ms_per_step": "ms/step", "ms_iqr": "IQR",
           "samples_to_solve": "solved at", "test_metric": "test", "valid_metric": "valid",
           "test_by_position": "% by answer", "lr_warmup": "warm-up",
           "clip_grad_norm": "clip"}

NOT_CAUSAL = "†"
UNKNOWN_CAUSAL = "?"
NOT_CAUSAL_NOTE = (f"{NOT_CAUSAL} not causal: the separability audit of this model at this depth measures that "
                   "y_t depends on later inputs, so its numbers are not comparable with a causal model's "
                   "(docs/results.md#causality).")
WITHIN_SPREAD = "≈"
WITHIN_SPREAD_NOTE = (f"{WITHIN_SPREAD} not resolved: this measurement cannot order this depth and the next or "
                      "previous one of the same configuration (for a ratio: its two depths): the 95% interval "
                      "of their round-by-round ratio contains 1 (records timed apart: their interquartile "
                      "ranges overlap), or the machine's load hit them unequally or made several threads "
                      "wait for each other (docs/runtime.md#a-busy-machine).")
FALLS = "↓"
FALLS_NOTE = (f"{FALLS} falls with depth: this depth and the next or previous one of the same configuration and M "
              "are ordered, the deeper one faster, though its work grows with L: a kernel chosen for one "
              "shape and not the other, or a fault of the measurement; a rerun tells which "
              "(docs/runtime.md#a-runtime-that-falls-with-depth).")
UNKNOWN_CAUSAL_NOTE = (f"{UNKNOWN_CAUSAL} causality not recorded (an older record, or a benchmark that does not "
                       "audit it): "
                       "`tlstm-bench info CONFIG --depth L --json` measures it.")


LEVEL = 0.95  # the confidence at which two depths count as ordered
MIN_PAIRS = 6  # the fewest paired rounds whose sign-test interval can reach LEVEL
UNEQUAL_SHARES = 1.25  # two records' CPU shares further apart than this: the load hit them unequally


def spread_overlaps(intervals: dict) -> list[tuple]:
    """The adjacent pairs of depths (d1, d2) whose intervals (low, high) overlap: ``intervals``
    maps each depth of one configuration to its measured spread (the quartiles). Where the
    spread is as large as the difference between two depths, that difference is noise."""
    depths = sorted(intervals)
    return [(a, b) for a, b in zip(depths, depths[1:])
            if max(intervals[a][0], intervals[b][0]) <= min(intervals[a][1], intervals[b][1])]


def quartiles(record) -> tuple[float, float]:
    """A timing record's (25th, 75th) percentile: the recorded ones, else median -+ IQR/2."""
    q25, q75 = record.get("ms_q25"), record.get("ms_q75")
    if not _is_missing(q25) and not _is_missing(q75):
        return float(q25), float(q75)
    median, iqr = float(record["ms_per_step"]), record.get("ms_iqr")
    half = 0.0 if _is_missing(iqr) else float(iqr) / 2
    return median - half, median + half


def cpu_share(record) -> float | None:
    """A timing record's median share of its samples' wall time on the CPU; None if unknown."""
    share = record.get("cpu_share")
    return None if _is_missing(share) else float(share)


def contended(record) -> bool:
    """Whether a timing record's threads waited for each other on a busy machine: more than one
    thread and a ``cpu_share`` under ``CONTENDED_SHARE``. Threads that wait at every barrier for
    a peer another process holds slow some cases far more than others (2 threads beside a
    one-core hog: L2/L1 from 1.3 to 37 in six runs, several "resolved"). One thread that waits
    for a core stretches both samples of a round alike, which the paired test sees as noise
    (the same runs with one thread at 30-60% of the CPU: L2/L1 1.12-1.45). Unknown (a GPU, an
    old record): not contended."""
    share = cpu_share(record)
    threads = record.get("threads")
    return share is not None and share < CONTENDED_SHARE and not _is_missing(threads) and int(threads) > 1


def unequal_load(first, second) -> bool:
    """Whether the load hit two records unequally: their CPU shares differ by more than
    ``UNEQUAL_SHARES`` x. A sample's wall time is its CPU time over its share, so their ratio
    carries the ratio of their shares, a bias no paired interval sees."""
    a, b = cpu_share(first), cpu_share(second)
    return a is not None and b is not None and max(a, b) > UNEQUAL_SHARES * max(min(a, b), 1e-9)


def paired_ratios_of(first, second) -> list[float] | None:
    """``second``'s samples over ``first``'s, round by round, when the two records were timed in
    the same interleaved rounds (the same ``measurement``); else None."""
    ids, samples = (first.get("measurement"), second.get("measurement")), (first.get("samples"), second.get("samples"))
    if _is_missing(ids[0]) or ids[0] != ids[1] or not all(isinstance(s, list) and s for s in samples):
        return None
    n = min(len(samples[0]), len(samples[1]))  # a case with fewer repeats left the last rounds
    a, b = samples[0][:n], samples[1][:n]
    if not all(isinstance(v, (int, float)) and v > 0 for v in a + b):
        return None
    return paired_ratios(b, a)


def depth_ratio(first, second) -> float:
    """``second`` over ``first``: the median of their round-by-round ratios where they pair,
    else the ratio of their medians."""
    ratios = paired_ratios_of(first, second)
    return statistics.median(ratios) if ratios else float(second["ms_per_step"]) / float(first["ms_per_step"])


def unresolved(first, second) -> bool:
    """THE rule of the ≈ mark (``time``, ``results`` and the figures): True when two timing
    records of one configuration cannot be ordered by their data.

    * Either was timed with several threads on a busy machine (:func:`contended`), or the load
      hit the two unequally (:func:`unequal_load`): their ratio is the load's.
    * Timed in the same rounds: their paired ratios' sign-test interval at ``LEVEL``
      (:func:`~tlstm_bench.results.stats.median_interval`) contains 1, or there are too few
      rounds for that level. The rounds are interleaved, so each pair met the same load: a
      far sharper test than two spreads, and one that an outlier round cannot fool.
    * Timed apart (older records, other runs): their interquartile ranges overlap.
    """
    if contended(first) or contended(second) or unequal_load(first, second):
        return True
    ratios = paired_ratios_of(first, second)
    if ratios is None:
        return bool(spread_overlaps({0: quartiles(first), 1: quartiles(second)}))
    if len(ratios) < MIN_PAIRS:
        return True
    _, low, high = median_interval(ratios, LEVEL)
    return low <= 1.0 <= high


def _adjacent_pairs(by_depth: dict, rule) -> list[tuple]:
    """The adjacent depths (d1, d2) whose records ``rule(first, second)`` holds for."""
    depths = sorted(by_depth)
    return [(a, b) for a, b in zip(depths, depths[1:]) if rule(by_depth[a], by_depth[b])]


def unresolved_pairs(by_depth: dict) -> list[tuple]:
    """The adjacent depths (d1, d2) of one configuration that :func:`unresolved` cannot order;
    ``by_depth`` maps each depth to its record."""
    return _adjacent_pairs(by_depth, unresolved)


def falls(first, second) -> bool:
    """True when the data order two timing records of one configuration at the same M the wrong
    way: ``second``, the deeper, is faster, and :func:`unresolved` does not hold. Its work (steps,
    locations, layers) grows with L at a fixed M, so that is a kernel chosen for one shape and not
    the other (a GPU library's choice) or a fault of the measurement, never the model: marked, not
    hidden. At different M (a budget's smaller M at a greater depth) a fall can be the model's."""
    m1, m2 = first.get("channels"), second.get("channels")
    if _is_missing(m1) or _is_missing(m2) or int(m1) != int(m2):
        return False
    return not unresolved(first, second) and depth_ratio(first, second) < 1.0


def ratio_mark(first, last) -> str:
    """The mark of a ratio ``last`` over ``first``: ≈ not resolved, ↓ falls with depth, else none."""
    return WITHIN_SPREAD if unresolved(first, last) else FALLS if falls(first, last) else ""


def depth_marks(by_depth: dict) -> dict:
    """Depth -> its marks against its adjacent depths: ≈ (:func:`unresolved`) and ↓
    (:func:`falls`), each on both depths of the pair, ≈ first; '' where it has none."""
    depths = sorted(by_depth)
    marks = {d: set() for d in depths}
    for a, b in zip(depths, depths[1:]):
        mark = ratio_mark(by_depth[a], by_depth[b])
        for depth in (a, b) if mark else ():
            marks[depth].add(mark)
    return {d: "".join(m for m in (WITHIN_SPREAD, FALLS) if m in marks[d]) for d in depths}


def falling_pairs(by_depth: dict) -> list[tuple]:
    """The adjacent depths (d1, d2) of one configuration that :func:`falls` holds for."""
    return _adjacent_pairs(by_depth, falls)


def size_name(row) -> str:
    """A runtime record's model size: its budget (``10M``), else ``M=100``."""
    budget, channels = row.get("budget"), row.get("channels")
    if isinstance(budget, str) and budget:
        return budget
    return f"M={int(channels)}" if pd.notna(channels) else "-"


def line_name(row) -> str:
    """The implementation, with its variant (``triton single/persistent``) when the record has one."""
    implementation = row.get("implementation")
    text = str(implementation) if isinstance(implementation, str) else "-"
    variant = row.get("variant")
    return f"{text} {variant}" if isinstance(variant, str) and variant else text


def batch_name(row) -> str:
    batch = row.get("batch")
    return str(int(batch)) if pd.notna(batch) else "1"


def runtime_marks(rows: pd.DataFrame) -> dict:
    """Row label -> the marks of its ``ms_per_step`` (:func:`depth_marks`) for the successful
    timing rows of ``rows``, against the adjacent depths of the same line: configuration,
    implementation (and variant), model size and batch, as ``results --by-depth`` has them (a
    depth's newest row); only rows with a mark."""
    ok = rows[(rows.get("status") == "ok") & rows["ms_per_step"].notna() & rows["depth"].notna()]
    keys = [(row["config"], line_name(row), size_name(row), batch_name(row)) for _, row in ok.iterrows()]
    marked: dict = {}
    for _, group in ok.groupby(pd.Series(keys, index=ok.index, dtype=object), sort=False):
        by_depth = {}
        for label, row in group.iterrows():
            by_depth.setdefault(row["depth"], []).append(label)
        newest = {d: group.loc[labels[-1]] for d, labels in by_depth.items()}
        for depth, mark in depth_marks(newest).items():
            for label in by_depth[depth] if mark else ():
                marked[label] = mark
    return marked


def default_columns(kind: str) -> tuple[str, ...]:
    return DEFAULT_COLUMNS.get(kind, ("config", "depth", "status"))


def present_columns(frame: pd.DataFrame) -> list[str]:
    """Every column with at least one value."""
    return [c for c in frame.columns if frame[c].notna().any()]


def check_columns(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    unknown = [c for c in columns if c not in frame.columns]
    if unknown:
        raise UserError(f"unknown column {unknown[0]!r}; columns here: {', '.join(present_columns(frame))}")
    return list(columns)


def config_mark(causal) -> str:
    if causal is True or causal is False:
        return "" if causal else NOT_CAUSAL
    return UNKNOWN_CAUSAL


@dataclass
class View:
    """What ``results`` shows: tables, then footnotes (causality, failures)."""

    tables: list[TableView] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def whole_percents(fractions) -> str:
    """``2 0 94 100``: fractions (an answer position's accuracy each) as whole percents."""
    return " ".join(f"{100 * v:.0f}" for v in fractions)


def metric_text(metric, value: float) -> str:
    """A test or validation metric as every view prints it: an accuracy in percent to one
    decimal (``43.3%``), BPC (or anything else) to three decimals."""
    if metric == "accuracy":
        return f"{100 * value:.1f}%" if value <= 1 else f"{value:.1f}%"
    return f"{value:.3f}"


def format_value(column: str, value, row) -> str:
    if column == "test_by_position" and isinstance(value, list):  # the first answer first
        return whole_percents(value)
    if isinstance(value, (dict, list)):
        return f"[{len(value)} values]" if isinstance(value, list) else json.dumps(value, sort_keys=True)[:40]
    if _is_missing(value):
        if column == "samples_to_solve" and row.get("solved") is False:
            # an unsolved run says how far it got ("not by 81,000"), not a bare "no"
            seen = row.get("samples_seen")
            return "no" if _is_missing(seen) else f"not by {int(seen):,}"
        return "-"
    if column in ("test_metric", "valid_metric"):
        return metric_text(row.get("metric"), value)
    if column in ("ms_per_step", "ms_iqr", "ms_q25", "ms_q75"):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    if column in ("params", "samples_to_solve", "samples_seen"):
        return f"{int(value):,}"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _metric_header(rows: pd.DataFrame, column: str) -> str:
    metrics = set(rows["metric"].dropna().astype(str))
    name = {"accuracy": "acc", "bpc": "BPC"}.get(metrics.pop(), "") if len(metrics) == 1 else ""
    return f"{HEADERS[column]} {name}".strip()


def _short_version(version: str) -> str:
    """A git commit (old records' code version) to 10 hex digits; a source hash as it is."""
    return version[:10] if len(version) == 40 and all(c in "0123456789abcdef" for c in version) else version


def _common(rows: pd.DataFrame, column: str, fmt: str) -> list[str]:
    """``fmt`` of the column's value when every row has the same one."""
    present = rows[column].dropna() if column in rows else pd.Series([], dtype=object)
    values = present.map(lambda v: str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)).unique()
    return [fmt.format(values[0])] if len(values) == 1 and len(present) == len(rows) else []


def records_caption(rows: pd.DataFrame) -> list[str]:
    """What every row shares, in parts each kept on one line where it fits: the settings, each
    device with its torch version (``;`` between devices), the code version."""
    settings = (_common(rows, "seq_len", "T={}") + _common(rows, "preset", "preset {}")
                + _common(rows, "lr", "lr {}") + _common(rows, "lr_warmup", "warm-up {}")
                + _common(rows, "clip_grad_norm", "clip {}"))
    unique = rows[["device_name", "device", "torch_version"]].drop_duplicates()
    devices = []
    for name, device, torch_version in unique.itertuples(index=False):
        text = f"{device_name_text(name)} ({device})" if isinstance(device, str) else device_name_text(name)
        devices.append([text] + ([f"torch {torch_version}"] if isinstance(torch_version, str) else []))
    if len(devices) > 2:
        devices = devices[:2]
        devices[-1][-1] += f" and {len(unique) - 2} more"
    groups = [settings + devices[0], *devices[1:]] if devices else [settings]
    versions = sorted({_short_version(str(v)) for v in rows["code_version"].dropna()})
    if versions:
        groups.append([f"code {versions[0]}" + (f" and {len(versions) - 1} more" if len(versions) > 1 else "")])
    groups = [group for group in groups if group]
    return [part + ("," if j < len(group) - 1 else ";" if i < len(groups) - 1 else "")
            for i, group in enumerate(groups) for j, part in enumerate(group)]


def device_name_text(name) -> str:
    return str(name) if isinstance(name, str) and name else "unknown device"


def build_view(frame: pd.DataFrame, *, columns: "list[str] | None" = None, wide: bool = False) -> View:
    """One table per (collection, kind, task), and the footnotes its rows need."""
    if columns:
        check_columns(frame, columns)
    view = View()
    marks: set[str] = set()
    for (collection, kind, task), rows in frame.groupby(["collection", "kind", "task"], sort=False, dropna=False):
        if columns:
            shown = list(columns)
        elif wide:
            shown = present_columns(rows)
        else:
            shown = [c for c in default_columns(kind) if c in rows.columns]
            for column in ("clip_grad_norm", "lr_warmup", "lr"):  # two lrs, ...: not two seeds of one run
                if column in rows and rows[column].nunique(dropna=False) > 1 and "seed" in shown:
                    shown.insert(shown.index("seed") + 1, column)
        what = f"{kind} records" + (f", task {task}" if task not in (kind, "runtime") else "")
        title = f"{collection}: {what} ({len(rows)})"
        table = TableView(title=title, caption=records_caption(rows))
        depth_mark = runtime_marks(rows) if "ms_per_step" in shown else {}
        for column in shown:
            header = _metric_header(rows, column) if column in ("test_metric", "valid_metric") else \
                HEADERS.get(column, column)
            numeric = pd.api.types.is_numeric_dtype(rows[column]) and column not in ("config", "status")
            table.columns.append(Column(header, justify="right" if numeric else "left",
                                        wrap=column in ("error", "test_by_position"),
                                        breaks="," if column == "config" else ""))
        for label, row in rows.iterrows():
            cells = []
            for column in shown:
                text = format_value(column, row[column], row)
                if column == "config":
                    mark = config_mark(row["causal"])
                    marks.add(mark)
                    text += mark
                if column == "ms_per_step" and label in depth_mark:
                    marks.update(depth_mark[label])
                    text = depth_mark[label] + text
                cells.append(text)
            table.rows.append(cells)
        view.tables.append(table)
        for _, row in rows[rows["status"] != "ok"].iterrows():
            view.notes.append(f"failed: {collection} {row['config']} L={format_value('depth', row['depth'], row)}: "
                              f"{row['error'] or 'no error message'}")
    if FALLS in marks:
        view.notes.insert(0, FALLS_NOTE)
    if WITHIN_SPREAD in marks:
        view.notes.insert(0, WITHIN_SPREAD_NOTE)
    if NOT_CAUSAL in marks:
        view.notes.insert(0, NOT_CAUSAL_NOTE)
    if UNKNOWN_CAUSAL in marks:
        view.notes.insert(0, UNKNOWN_CAUSAL_NOTE)
    return view
