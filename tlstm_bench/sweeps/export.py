"""The core of ``tlstm-bench results``: the store as a DataFrame, shown or exported."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from ..errors import UserError
from ..results import records_frame

FORMATS = ("table", "csv", "markdown", "parquet")

# The columns a table shows first (when present); exports keep every column.
SHOWN = ("sweep", "kind", "task", "config", "depth", "seed", "channels", "params", "status", "metric",
         "test_metric", "samples_to_solve", "implementation", "ms_per_step", "ms_iqr", "device_name", "error")


def collections(root: "str | Path") -> list[str]:
    base = Path(root)
    return sorted(p.name for p in base.glob("*") if p.is_dir() and any(p.glob("*.json")))


def results_frame(sweep: str | None = None, *, root: "str | Path", all_versions: bool = False) -> pd.DataFrame:
    """Every record (of one sweep, or all) as a DataFrame.

    Unless ``all_versions``, a sweep cell measured by several code versions keeps only its
    newest record (by ``date``); records without a cell ``key`` are all kept.
    """
    root = Path(root)
    if sweep is not None and not (root / sweep).is_dir():
        have = collections(root)
        raise UserError(f"no results for {sweep!r} under {root}; "
                        + (f"have: {', '.join(have)}" if have else "the store is empty: run tlstm-bench sweep"))
    frame = records_frame(sweep, root=root)
    if frame.empty:
        raise UserError(f"no records under {root / sweep if sweep else root}; run tlstm-bench sweep first")
    if not all_versions and "key" in frame.columns and "date" in frame.columns:
        keyed = frame[frame["key"].notna()].sort_values("date", kind="stable")
        keyed = keyed.drop_duplicates(subset=["collection", "key"], keep="last")
        frame = pd.concat([keyed, frame[frame["key"].isna()]]).sort_index()
    sort = [c for c in ("collection", "kind", "task", "config", "depth", "seed") if c in frame.columns]
    if sort:
        frame = frame.sort_values(sort, kind="stable", key=lambda s: s.astype(str) if s.dtype == object else s)
    return frame.reset_index(drop=True)


def _flat(frame: pd.DataFrame, *, lists: bool) -> pd.DataFrame:
    """Nested values as JSON text (dicts always; lists too unless ``lists``, for parquet)."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype != object:
            continue
        nested = frame[column].map(lambda v: isinstance(v, dict) or (isinstance(v, list) and not lists))
        if nested.any():
            frame[column] = frame[column].map(
                lambda v: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v)
        if lists and frame[column].map(lambda v: isinstance(v, list)).any():
            frame[column] = frame[column].map(lambda v: v if isinstance(v, list) or v is None else [v])
    return frame


def _markdown(frame: pd.DataFrame) -> str:
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return ""
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def shown_columns(frame: pd.DataFrame) -> list[str]:
    columns = [c for c in SHOWN if c in frame.columns and frame[c].notna().any()]
    return columns or list(frame.columns)


def export(frame: pd.DataFrame, fmt: str, out: "str | Path | None" = None, *, all_columns: bool = False) -> str | None:
    """Write ``frame`` as csv/markdown/parquet to ``out``, or return the text (csv/markdown) if no ``out``."""
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if out is None:
            raise UserError("--format parquet writes a binary file: give --out FILE.parquet")
        try:
            _flat(frame, lists=True).to_parquet(out, index=False)
        except ImportError:
            raise UserError("parquet needs pyarrow: pip install 'tlstm-bench[parquet]'") from None
        return None
    if fmt == "markdown":
        text = _markdown(frame if all_columns else frame[shown_columns(frame)])
    else:
        buffer = io.StringIO()
        _flat(frame, lists=False).to_csv(buffer, index=False)
        text = buffer.getvalue()
    if out is None:
        return text
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
    return None
