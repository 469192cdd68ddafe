"""The paper's tables 1-3 as Markdown, the paper's rows beside ours.

Ours: for each sweep and configuration, the depth that did best on the task (lowest
BPC; highest accuracy, then fewest samples to solve), the mean over seeds (+- sd when
there are several). A quick sweep's small models are not the paper's full-scale runs;
the notes under each table say which settings produced which rows.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..atomic import atomic_write
from ..results.frame import config_order
from ..results.view import NOT_CAUSAL, NOT_CAUSAL_NOTE, UNKNOWN_CAUSAL, UNKNOWN_CAUSAL_NOTE, config_mark
from ..vocab import ANCHOR_NAMES, PAPER_NAMES
from .figures import accuracy_scale, causal_cells, device_line
from .paper import PAPER_SETTINGS, PAPER_TABLES

# The tasks of each table (tlstm_bench.vocab.TASK_NAMES spells them; records carry those names).
WIKI_TASKS = ("enwik8",)
ADDITION_TASKS = ("addition",)
MEMORIZATION_TASKS = ("memorization",)
MNIST_TASKS = ("mnist",)
PMNIST_TASKS = ("pmnist",)
# The shipped sweep of a task, where its name is not the task's (the notes say which to run).
SWEEP_OF_TASK = {"enwik8": "wiki"}


def _name(config: str) -> str:
    """The paper's name of a configuration; an anchor's says it is not one of the paper's."""
    return PAPER_NAMES.get(config) or ANCHOR_NAMES.get(config) or config


def write_tables(frame: pd.DataFrame, out: Path) -> Path:
    """Write ``tables.md`` under ``out`` and return its path."""
    train = frame[(frame["kind"] == "train") & (frame["status"] == "ok")]
    text = "\n".join([
        "# The paper's tables beside ours",
        "",
        "Written by `tlstm-bench plot` from the results store. Paper rows are copied from the",
        f"paper ({PAPER_TABLES['table1']['source'].split(',')[0]}); ours are the best depth per "
        "configuration and sweep.",
        "",
        table1(train), table2(train), table3(train),
    ])
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tables.md"
    atomic_write(path, lambda fh: fh.write(text))  # fresh: a link in its place is replaced, not followed
    return path


# ---- the three tables ----------------------------------------------------------------
def table1(train: pd.DataFrame) -> str:
    spec = PAPER_TABLES["table1"]
    rows = [[name, "paper", bpc, params] for name, bpc, params in spec["rows"]]
    ours = _best(train, WIKI_TASKS, lower_is_better=True)
    for (sweep, config), cell in ours.items():
        label = f"{_name(config)} (M={cell['channels']})"
        rows.append([label, f"ours ({sweep})", cell["value"], cell["params"]])
    return _section(spec, ["model", "source", *spec["columns"]], rows, train, [WIKI_TASKS], _marks(ours))


def table2(train: pd.DataFrame) -> str:
    spec = PAPER_TABLES["table2"]
    rows = [[name, "paper", *cols] for name, *cols in spec["rows"]]
    addition = _best(train, ADDITION_TASKS, lower_is_better=False)
    memorization = _best(train, MEMORIZATION_TASKS, lower_is_better=False)
    for key in sorted(set(addition) | set(memorization), key=lambda k: (k[0], config_order(k[1]))):
        sweep, config = key
        cells = []
        for best in (addition, memorization):
            cell = best.get(key)
            cells += [cell["value"], cell["samples"]] if cell else ["-", "-"]
        rows.append([_name(config), f"ours ({sweep})", *cells])
    return _section(spec, ["model", "source", *spec["columns"]], rows, train, [ADDITION_TASKS, MEMORIZATION_TASKS],
                    _marks(addition, memorization))


def table3(train: pd.DataFrame) -> str:
    spec = PAPER_TABLES["table3"]
    rows = [[name, "paper", *cols] for name, *cols in spec["rows"]]
    mnist = _best(train, MNIST_TASKS, lower_is_better=False)
    pmnist = _best(train, PMNIST_TASKS, lower_is_better=False)
    for key in sorted(set(mnist) | set(pmnist), key=lambda k: (k[0], config_order(k[1]))):
        sweep, config = key
        cells = [b[key]["value"].replace("%", "") if key in b else "-" for b in (mnist, pmnist)]
        rows.append([_name(config), f"ours ({sweep})", *cells])
    return _section(spec, ["model", "source", *spec["columns"]], rows, train, [MNIST_TASKS, PMNIST_TASKS],
                    _marks(mnist, pmnist))


# ---- helpers -------------------------------------------------------------------------
def _marks(*bests: dict) -> set[str]:
    return {cell["mark"] for best in bests for cell in best.values()}


def _best(train: pd.DataFrame, tasks: tuple[str, ...], *, lower_is_better: bool) -> dict:
    """{(sweep, config): formatted best cell} over the records of ``tasks``.

    A best cell measured not causal keeps its place but carries the marker (see the note
    under each table): its number is not comparable.
    """
    rows = train[train["task"].isin(tasks)]
    column = "test_metric" if rows["test_metric"].notna().any() else "valid_metric"
    rows = rows[rows[column].notna()]
    if rows.empty:
        return {}
    accuracy = not lower_is_better
    scale = accuracy_scale(rows[column]) if accuracy else 1.0
    best = {}
    for (sweep, config), part in rows.groupby(["collection", "config"], sort=False):
        cells = []
        for depth, cell in part.groupby("depth"):
            values = cell[column].astype(float) * scale
            solved = cell["samples_to_solve"].dropna()
            cells.append({
                "depth": int(depth), "mean": values.mean(), "sd": values.std() if len(values) > 1 else None,
                "n": len(values), "channels": _first_int(cell["channels"]), "params": _first_int(cell["params"]),
                "solved": len(solved), "samples": solved.mean() if len(solved) else math.inf,
                "seen": _first_int(cell["samples_seen"].sort_values(ascending=False)) if "samples_seen" in cell else None,
                "mark": config_mark(causal_cells(cell).get((config, int(depth)))),
            })
        if lower_is_better:
            top = min(cells, key=lambda c: (c["mean"], c["depth"]))
        else:  # accuracy first, then fewer samples to solve
            top = min(cells, key=lambda c: (-round(c["mean"], 6), c["samples"], c["depth"]))
        best[sweep, config] = _format(top, accuracy)
    return best


def _format(cell: dict, accuracy: bool) -> dict:
    digits = 1 if accuracy else 3
    value = f"{cell['mean']:.{digits}f}" + (f" +- {cell['sd']:.{digits}f}" if cell["sd"] is not None else "")
    if accuracy:
        value += "%"
    value += f" (L={cell['depth']}" + (f", {cell['n']} seeds)" if cell["n"] > 1 else ")") + cell["mark"]
    if math.isinf(cell["samples"]):
        samples = "not solved" + (f" in {count_text(cell['seen'])}" if cell["seen"] else "")
    else:
        samples = count_text(cell["samples"]) + (f" ({cell['solved']}/{cell['n']} solved)" if cell["solved"] < cell["n"] else "")
    return {"depth": cell["depth"], "value": value, "samples": samples, "mark": cell["mark"],
            "channels": cell["channels"] if cell["channels"] is not None else "?",
            "params": count_text(cell["params"]) if cell["params"] is not None else "?"}


def _first_int(series: pd.Series):
    values = series.dropna()
    return int(values.iloc[0]) if len(values) else None


def count_text(n: float) -> str:
    """298000 -> '298K', 7500 -> '7.5K', 5000000 -> '5M', 10012345 -> '10.0M' (the paper's style)."""
    if n >= 1e6:
        return f"{n / 1e6:.3g}M" if n / 1e6 < 10 else f"{n / 1e6:.1f}M"
    if n >= 1e3:
        return f"{n / 1e3:.3g}K"
    return f"{n:.0f}"


def _section(spec: dict, header: list[str], rows: list[list[str]], train: pd.DataFrame,
             task_groups: list[tuple[str, ...]], marks: set[str]) -> str:
    lines = [f"## {spec['title']}", "", markdown_table(header, rows), ""]
    lines += [note + "\n" for mark, note in ((NOT_CAUSAL, NOT_CAUSAL_NOTE), (UNKNOWN_CAUSAL, UNKNOWN_CAUSAL_NOTE))
              if mark in marks]
    tasks = [t for group in task_groups for t in group]
    mine = train[train["task"].isin(tasks)]
    names = [SWEEP_OF_TASK.get(group[0], group[0]) for group in task_groups]
    if mine.empty:
        lines.append(f"Ours: no records for {' / '.join(names)} in the selected sweeps "
                     f"(run `tlstm-bench sweep {names[0]}`).")
    else:
        for (sweep, task), part in mine.groupby(["collection", "task"]):
            lines.append(f"Ours ({sweep}, {task}): {_settings(part)}; {device_line(part)}; git {_commits(part)}.")
    settings = "; ".join(f"{name}: {PAPER_SETTINGS[name]}" for name in names if name in PAPER_SETTINGS)
    lines += ["", f"Paper rows: {spec['source']}. The paper's sweep settings: {settings}.", ""]
    return "\n".join(lines)


def _settings(rows: pd.DataFrame) -> str:
    """What the runs were asked to do: task options, size, preset and length."""
    def values(column, fmt="{}"):
        if column not in rows:
            return []
        seen = []
        for v in rows[column]:
            if isinstance(v, dict) or (v is not None and not (isinstance(v, float) and math.isnan(v))):
                text = fmt.format(v) if not isinstance(v, dict) else fmt.format(
                    ", ".join(f"{k}={x}" for k, x in sorted(v.items()) if k not in ("test_seed", "test_size")))
                if text and text not in seen:
                    seen.append(text)
        return seen
    parts = values("task_options") + values("preset", "preset {}")
    parts += values("channels", "M={:.0f}") + values("budget", "budget {}")
    parts += values("max_samples", "at most {:,.0f} samples") + values("epochs", "at most {:.0f} epochs")
    parts += [f"{len(rows['seed'].dropna().unique())} seed(s)"]
    return ", ".join(parts)


def _commits(rows: pd.DataFrame) -> str:
    if "git_commit" not in rows:
        return "unknown"
    commits = sorted({str(c)[:8] for c in rows["git_commit"].dropna()})
    dirty = "git_dirty" in rows and bool(rows["git_dirty"].fillna(False).astype(bool).any())
    return (", ".join(commits) or "unknown") + (" (dirty)" if dirty else "")


def markdown_table(header: list[str], rows: list[list]) -> str:
    def cell(value) -> str:
        return str(value).replace("|", "\\|")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
