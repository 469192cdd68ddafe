"""Read the results store into the DataFrame the figures and tables are drawn from.

The store is :mod:`tlstm_bench.results.store` (``<root>/<sweep>/<id>.json``); reading it
imports pandas, not torch.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import UserError
from ..results.store import default_root, load_records

# Columns every frame has (None where a record lacks them), so plotting never KeyErrors.
COLUMNS = (
    "id", "key", "date", "sweep", "kind", "task", "config", "depth", "seed", "channels", "params", "status", "error",
    "spec", "metric", "valid_metric", "test_metric", "samples_to_solve", "solved", "ms_per_step", "ms_iqr",
    "samples", "implementation", "seq_len", "device", "device_name", "torch_version", "threads",
)


def store_root(root: "str | Path | None" = None) -> Path:
    """``root``, else ``$TLSTM_BENCH_RESULTS``, else ``results/store``."""
    return Path(root) if root is not None else default_root()


def available_sweeps(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("*") if p.is_dir() and any(p.glob("*.json")))


def read_records(sweeps: "list[str] | None" = None, root: "str | Path | None" = None) -> pd.DataFrame:
    """All records of ``sweeps`` (default: every sweep in the store), one row per record.

    Raises UserError when a named sweep has no records or the selection is empty.
    """
    base = store_root(root)
    present = available_sweeps(base) if base.is_dir() else []
    names = list(dict.fromkeys(sweeps)) if sweeps else present
    unknown = [n for n in names if n not in present]
    if unknown:
        there = ", ".join(present) if present else "none"
        raise UserError(f"no results for sweep {', '.join(unknown)} in {base} (sweeps there: {there}); "
                        f"run `tlstm-bench sweep {unknown[0]}` first or pass --results-dir")
    rows = []
    for name in names:
        for record in load_records(name, root=base):
            record.setdefault("sweep", name)
            rows.append(record)
    if not rows:
        raise UserError(f"no result records in {base}; run `tlstm-bench sweep` first or pass --results-dir")
    frame = newest_per_cell(pd.DataFrame(rows))
    for column in COLUMNS:
        if column not in frame:
            frame[column] = None
    frame["sweep"] = frame["sweep"].fillna("").astype(str)
    frame["task"] = frame["task"].where(frame["task"].notna(), frame["kind"]).astype(str)
    frame["config"] = frame["config"].astype(str)
    frame["depth"] = pd.to_numeric(frame["depth"], errors="coerce")
    for column in ("test_metric", "valid_metric", "samples_to_solve", "ms_per_step", "ms_iqr", "params",
                   "channels"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["status"] = frame["status"].fillna("ok").astype(str)
    return frame


def newest_per_cell(frame: pd.DataFrame) -> pd.DataFrame:
    """One record per cell: records sharing a ``key`` (the same cell measured by several
    code versions, see tlstm_bench.sweeps) keep only the newest ``date``."""
    if "key" not in frame or frame["key"].isna().all():
        return frame.reset_index(drop=True)
    dated = frame.assign(_date=pd.to_datetime(frame.get("date"), errors="coerce", utc=True))
    keyed = dated[dated["key"].notna()].sort_values("_date", na_position="first", kind="stable")
    keyed = keyed.drop_duplicates(subset=["sweep", "key"], keep="last")
    return pd.concat([keyed, dated[dated["key"].isna()]]).sort_index().drop(columns="_date").reset_index(drop=True)
