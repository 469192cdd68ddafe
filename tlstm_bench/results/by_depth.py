"""Records as one row per line of the figures, a column per depth: ``results --by-depth``.

Runtime: a row is one configuration, implementation (and variant, for records converted from a
tool that timed several of one implementation), model size and batch, in one collection; a
column per depth holds the median per timestep with its interquartile range, and the last column
the deepest over the shallowest. It is the table beside the runtime figure (``plot``), and what
the README's GPU table is generated from (``tlstm-bench results runtime --by-depth --format
markdown``). The unit is microseconds when every median is below 10 ms (a GPU), else milliseconds.

Training: a table per collection and task, a row per configuration (and model size, learning
rate and warm-up where the rows differ in them), a column per depth with what the metric panel
of the task's figure draws, the test metric's mean over seeds (and their standard deviation),
and on an algorithmic task what its samples panel draws under it: the median samples to solve
over the seeds that solved it, or how far the run got.
"""

from __future__ import annotations

import math

import pandas as pd

from ..errors import UserError
from ..vocab import ALGORITHMIC_TASKS
from .frame import config_order
from .table import Column, TableView
from .view import (FALLS, FALLS_NOTE, NOT_CAUSAL, NOT_CAUSAL_NOTE, WITHIN_SPREAD, WITHIN_SPREAD_NOTE, batch_name,
                   config_mark, depth_marks, depth_ratio, device_name_text, line_name, metric_text, ratio_mark,
                   records_caption, size_name)


def line_names(rows: pd.DataFrame) -> pd.Series:
    """Each runtime record's line in a figure or table: its implementation, and variant if any."""
    return pd.Series([line_name(r) for _, r in rows.iterrows()], index=rows.index, dtype=object)


def size_names(rows: pd.DataFrame) -> pd.Series:
    """Each runtime record's model size: its budget (``10M``), else ``M=100``."""
    return pd.Series([size_name(r) for _, r in rows.iterrows()], index=rows.index, dtype=object)


def fastest(rows: pd.DataFrame) -> pd.DataFrame:
    """The successful runtime records of each configuration's fastest line per model size: the
    lowest sum of median ms per step over the depths every line of it has (all of a line's own
    depths where they share none)."""
    ok = rows[(rows["kind"] == "runtime") & (rows["status"] == "ok") & rows["ms_per_step"].notna()]
    if ok.empty:
        return ok
    lines, sizes = line_names(ok), size_names(ok)
    keep = []
    for _, part in ok.groupby([ok["config"], sizes], sort=False):
        line = lines[part.index]
        medians = part.groupby([line, part["depth"]])["ms_per_step"].median().unstack()
        common = medians.dropna(axis=1)
        totals = (common if common.shape[1] else medians).sum(axis=1)
        keep.append(part[line == totals.idxmin()])
    return pd.concat(keep)


def _cell(values: pd.DataFrame, scale: float) -> str:
    median = values["ms_per_step"].median() * scale
    iqr = values["ms_iqr"].dropna()
    spread = f"\n({_spread(iqr.iloc[-1] * scale, median)})" if len(iqr) else ""  # markdown: on one line
    return f"{median:.{_digits(median)}f}{spread}"


def _spread(value: float, median: float) -> str:
    """An IQR to the median's decimals, or as many more as its first significant digit needs."""
    first = max(0, -math.floor(math.log10(value))) if value > 0 else 0
    return f"{value:.{max(_digits(median), first)}f}"


def _digits(value: float) -> int:
    return 0 if value >= 100 else 1 if value >= 10 else 2 if value >= 1 else 3


def provenance_parts(rows: pd.DataFrame) -> list[str]:
    """Device, driver, libraries, precision and code of the rows, each named once (several: all)."""
    def values(column: str) -> list[str]:
        if column not in rows:
            return []
        return sorted({str(v) for v in rows[column].dropna() if str(v)})

    parts = [", ".join(device_name_text(v) for v in values("device_name")) or "unknown device"]
    for column, label in (("driver_version", "driver"), ("torch_version", "torch"), ("cuda_version", "CUDA"),
                          ("triton_version", "triton"), ("dtype", "")):
        found = values(column)
        if found:
            parts.append(f"{label} {' / '.join(found)}".strip())
    tf32 = values("tf32")
    if tf32:
        parts.append("TF32 " + " / ".join("on" if v == "True" else "off" for v in tf32))
    commits = [c[:10] for c in values("git_commit")]
    if commits:
        parts.append(f"commit {', '.join(commits)}")
    return [f"{part}," for part in parts[:-1]] + parts[-1:]  # kept whole where the caption wraps


def by_depth(frame: pd.DataFrame, *, only_fastest: bool = False) -> tuple[list[TableView], list[str]]:
    """(tables, notes): one table per collection of the successful runtime records of ``frame``,
    then one per collection and task of its successful training records (:func:`_train_table`);
    ``only_fastest``: each configuration's fastest runtime line per size only (:func:`fastest`)."""
    ok = frame[(frame["kind"] == "runtime") & (frame["status"] == "ok") & frame["ms_per_step"].notna()]
    if only_fastest:
        ok = pd.concat([fastest(part) for _, part in ok.groupby("collection", sort=False)]) if len(ok) else ok
    trained = frame[(frame["kind"] == "train") & (frame["status"] == "ok") & frame["test_metric"].notna()
                    & frame["depth"].notna()] if "test_metric" in frame else frame.iloc[:0]
    if ok.empty and trained.empty:
        raise UserError("no successful runtime or training records to show by depth; `tlstm-bench results` lists "
                        "what there is")
    tables = [_table(str(collection), rows) for collection, rows in ok.groupby("collection", sort=False)]
    tables += [_train_table(str(collection), str(task), rows)
               for (collection, task), rows in trained.groupby(["collection", "task"], sort=False)]
    marks = set()
    for table in tables:
        marks.update(mark for mark in (NOT_CAUSAL, WITHIN_SPREAD, FALLS) for row in table.rows
                     if any(mark in cell for cell in row))
    notes = {NOT_CAUSAL: NOT_CAUSAL_NOTE, WITHIN_SPREAD: WITHIN_SPREAD_NOTE, FALLS: FALLS_NOTE}
    return tables, [note for mark, note in notes.items() if mark in marks]


def _table(collection: str, rows: pd.DataFrame) -> TableView:
    rows = rows.assign(_line=line_names(rows), _size=size_names(rows), _batch=[batch_name(r) for _, r in rows.iterrows()])
    depths = sorted({int(d) for d in rows["depth"].dropna()})
    micro = float(rows["ms_per_step"].max()) < 10.0  # at most 4 digits in microseconds
    scale, unit = (1000.0, "us") if micro else (1.0, "ms")
    sizes, batches = sorted(set(rows["_size"])), sorted(set(rows["_batch"]))
    shown = [("size", len(sizes) > 1), ("batch", batches != ["1"])]  # a column only where rows differ
    groups = []
    for (config, line, size, batch), part in rows.groupby(["config", "_line", "_size", "_batch"], sort=False):
        by = {int(d): g for d, g in part.groupby("depth")}
        newest = {d: g.iloc[-1] for d, g in by.items()}  # the ≈ rule compares one record per depth
        marks = depth_marks(newest)
        mark = config_mark(False) if (part["causal"] == False).any() else ""  # noqa: E712 - pandas
        label = [f"{config}{mark}", line] + [v for v, (_, on) in zip((size, batch), shown) if on]
        cells = [marks[d] + _cell(by[d], scale) if d in by else "-" for d in depths]
        order = (config_order(config), not size.startswith("M="), size, batch, by[max(by)]["ms_per_step"].median())
        groups.append((order, label + cells + [_ratio(newest)]))
    common = [f"{name} {values[0]}" for (name, on), values in zip(shown, (sizes, batches)) if not on]
    common = [c.replace("size ", "") for c in common if c != "batch 1"]
    title = f"{collection}: {unit} per timestep (forward + loss + backward), median (IQR)"
    table = TableView(title=title + (f", {', '.join(common)}" if common else ""), caption=provenance_parts(rows))
    headers = ["config", "impl"] + [name for name, on in shown if on] + [f"L={d}" for d in depths]
    headers.append(f"L{depths[-1]}/L{depths[0]}" if len(depths) > 1 else "ratio")
    labels = len(headers) - len(depths) - 1
    table.columns = [Column(h, justify="left" if i < labels else "right", breaks="," if h == "config" else "")
                     for i, h in enumerate(headers)]
    table.rows = [row for _, row in sorted(groups, key=lambda g: g[0])]
    return table


# A training row's own columns, shown only where the table's rows differ in them: records that
# differ in one of these are not seeds of one run.
_TRAIN_LABELS = (("options", "_options"), ("size", "_size"), ("lr", "lr"), ("warm-up", "lr_warmup"),
                 ("clip", "clip_grad_norm"))


def _options(value) -> str:
    """A record's task options, short: ``alphabet=64 symbols=20``."""
    return " ".join(f"{k}={v}" for k, v in sorted(value.items())) if isinstance(value, dict) and value else "-"


def _train_table(collection: str, task: str, rows: pd.DataFrame) -> TableView:
    """The training records of one collection and task, a row per configuration (and size, lr,
    warm-up where they differ), a cell per depth: the mean test metric over seeds, with their
    standard deviation under it where there are several, then (addition, memorization) the median
    samples to solve of the seeds that solved it (``2/3 solved 9,000``), or ``not by N``: the
    most samples a seed ran. What the task's figure draws, as numbers."""
    missing = pd.Series(None, index=rows.index, dtype=object)
    rows = rows.assign(_size=size_names(rows), _options=rows.get("task_options", missing).map(_options),
                       lr_warmup=rows.get("lr_warmup", missing), clip_grad_norm=rows.get("clip_grad_norm", missing))
    depths = sorted({int(d) for d in rows["depth"]})
    shown = [(header, column) for header, column in _TRAIN_LABELS
             if column in rows and rows[column].nunique(dropna=False) > 1]
    accuracy = set(rows["metric"].dropna()) == {"accuracy"}
    groups = []
    for keys, part in rows.groupby(["config"] + [column for _, column in shown], sort=False, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        mark = config_mark(False) if (part["causal"] == False).any() else ""  # noqa: E712 - pandas
        label = [f"{keys[0]}{mark}"] + [_label(value) for value in keys[1:]]
        by = {int(d): g for d, g in part.groupby("depth")}
        cells = [_train_cell(by[d], task) if d in by else "-" for d in depths]
        groups.append((config_order(keys[0]), label + cells))
    seeds = rows.groupby(["config", "depth"] + [column for _, column in shown], dropna=False).size().max()
    metrics = rows["metric"].dropna()
    what = "test accuracy" if accuracy else f"test {metrics.iloc[0] if len(metrics) else 'metric'}"
    title = f"{collection}: {task}, {what}" + (f", mean (sd) over up to {seeds} seeds" if seeds > 1 else "")
    if task in ALGORITHMIC_TASKS:
        title += "; samples to solve" + (" (median of the seeds that solved)" if seeds > 1 else "")
    table = TableView(title=title, caption=records_caption(rows))
    headers = ["config"] + [header for header, _ in shown] + [f"L={d}" for d in depths]
    labels = 1 + len(shown)
    table.columns = [Column(h, justify="left" if i < labels else "right", breaks="," if h == "config" else "")
                     for i, h in enumerate(headers)]
    table.rows = [row for _, row in sorted(groups, key=lambda g: g[0])]
    return table


def _label(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _train_cell(records: pd.DataFrame, task: str) -> str:
    """The mean test metric of a depth's seeds (as ``results`` prints one), its sd under it
    where there are several, and on an algorithmic task how soon they solved it."""
    metric = records["metric"].iloc[0]
    values = records["test_metric"].astype(float)
    text = metric_text(metric, values.mean())
    if len(values) > 1:
        text += f"\n(sd {metric_text(metric, values.std())})"
    if task not in ALGORITHMIC_TASKS:
        return text
    solved = records[records["solved"].fillna(False).astype(bool) & records["samples_to_solve"].notna()]
    if len(solved):
        share = f"{len(solved)}/{len(records)} " if len(solved) < len(records) else ""
        return text + f"\n{share}solved {int(solved['samples_to_solve'].median()):,}"
    seen = records["samples_seen"].dropna()
    return text + (f"\nnot by {int(seen.max()):,}" if len(seen) else "")


def _ratio(newest: dict) -> str:
    """The deepest over the shallowest depth (the median of their paired rounds where they were
    timed together), marked ≈ where the data cannot order them, ↓ where it falls at the same M."""
    first, last = min(newest), max(newest)
    if first == last:
        return "-"
    return f"{ratio_mark(newest[first], newest[last])}{depth_ratio(newest[first], newest[last]):.2f}"


def markdown(tables: list[TableView], notes: list[str]) -> str:
    """The tables as Markdown: each its title in bold, the table, its provenance under it."""
    out = []
    for table in tables:
        out.append(f"**{table.title}**\n")
        out.append("| " + " | ".join(c.header for c in table.columns) + " |")
        out.append("|" + "|".join("---:" if c.justify == "right" else "---" for c in table.columns) + "|")
        out += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |"
                for row in table.rows]
        out.append(f"\n{' '.join(table.caption)}\n")
    out += [f"{note}\n" for note in notes]
    return "\n".join(out)
