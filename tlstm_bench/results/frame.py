"""The one reader of the results store: records -> a pandas DataFrame.

``results``, ``plot``, ``visualize --best`` and the tables all read through
:func:`read_frame`, so they agree on which records count: one row per record,
normalised (:func:`tlstm_bench.results.schema.normalise`), every schema field present
as a column, and, unless ``all_versions``, only the newest record (by ``date``) of each
cell (``collection`` + ``key``): a cell measured again, by newer code or on purpose,
shows its latest result. Imports pandas, never torch.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import UserError
from ..vocab import CONFIG_NAMES
from .schema import FIELDS, normalise
from .store import collections as store_collections, default_root, load_records

NUMERIC = ("depth", "seed", "channels", "tensor_size", "params", "seq_len", "threads", "ms_per_step", "ms_q25",
           "ms_q75", "ms_iqr", "valid_metric", "test_metric", "sequence_accuracy", "samples_seen",
           "samples_to_solve", "wall_time_s")


def config_order(config: str) -> tuple:
    """Sort key: the seven presets in the paper's order (SPEC section 6), knob strings after them."""
    return (CONFIG_NAMES.index(config), "") if config in CONFIG_NAMES else (len(CONFIG_NAMES), str(config))


def read_frame(names: "str | list[str] | None" = None, *, root: "str | Path | None" = None,
               all_versions: bool = False) -> pd.DataFrame:
    """Records of the named collections (default: all) under the store ``root`` (default: the
    default workspace's), one row each.

    Raises UserError when a named collection has no records or nothing is found.
    """
    root = Path(root) if root is not None else default_root()
    present = store_collections(root) if root.is_dir() else []
    wanted = [names] if isinstance(names, str) else list(dict.fromkeys(names or present))
    unknown = [n for n in wanted if n not in present]
    if unknown:
        have = f"there: {', '.join(present)}" if present else "the store is empty"
        raise UserError(f"no results for {unknown[0]!r} in {root} ({have}); run `tlstm-bench sweep` first "
                        f"or pass --results-dir")
    rows = [normalise(record, name) for name in wanted for record in load_records(name, root=root)]
    if not rows:
        raise UserError(f"no result records in {root}; run `tlstm-bench sweep` first or pass --results-dir")
    frame = pd.DataFrame(rows)
    for column in FIELDS:
        if column not in frame:
            frame[column] = None
    for column in NUMERIC:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["config"] = frame["config"].astype(str)
    frame["task"] = frame["task"].where(frame["task"].notna(), frame["kind"]).astype(str)
    if not all_versions:
        frame = newest_per_cell(frame)
    order = frame.assign(_c=frame["config"].map(config_order))
    order = order.sort_values(["collection", "kind", "task", "_c", "depth", "seed"], kind="stable",
                              key=lambda s: s.astype(str) if s.name in ("collection", "kind", "task") else s)
    return order.drop(columns="_c").reset_index(drop=True)


def newest_per_cell(frame: pd.DataFrame) -> pd.DataFrame:
    """One record per cell (``collection`` + ``key``): the one with the newest ``date``."""
    dated = frame.assign(_date=pd.to_datetime(frame["date"], errors="coerce", utc=True))
    dated = dated.sort_values("_date", na_position="first", kind="stable")
    return dated.drop_duplicates(subset=["collection", "key"], keep="last").sort_index().drop(columns="_date")
