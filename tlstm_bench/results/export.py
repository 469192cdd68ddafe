"""Export a results frame: CSV, JSON, Markdown or Parquet (what ``tlstm-bench results`` writes).

CSV, JSON and Parquet hold every column unless ``columns`` picks some; Markdown holds the
default columns of each kind of record (:mod:`.view`) unless ``wide`` or ``columns``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from ..atomic import atomic_write
from ..errors import UserError
from .view import check_columns, default_columns, present_columns

FORMATS = ("table", "csv", "json", "markdown", "parquet")


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
        if isinstance(v, (dict, list)):
            v = json.dumps(v, sort_keys=True)
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def _json(frame: pd.DataFrame) -> str:
    records = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    return json.dumps(records, indent=1, default=str) + "\n"


def export_columns(frame: pd.DataFrame, fmt: str, *, columns: "list[str] | None" = None,
                   wide: bool = False) -> list[str]:
    """The columns a format writes: ``columns`` if given; Markdown: the kinds' defaults unless ``wide``."""
    if columns:
        return check_columns(frame, columns)
    if fmt == "markdown" and not wide:
        kinds = [k for k in dict.fromkeys(frame["kind"]) if isinstance(k, str)]
        shown = ["collection", "kind", "task"] + [c for kind in kinds for c in default_columns(kind)]
        return [c for c in dict.fromkeys(shown) if c in frame.columns] + (["causal"] if "causal" in frame else [])
    return present_columns(frame) if fmt == "markdown" else list(frame.columns)


def export(frame: pd.DataFrame, fmt: str, out: "str | Path | None" = None, *, columns: "list[str] | None" = None,
           wide: bool = False) -> str | None:
    """Write ``frame`` as csv/json/markdown/parquet to ``out``, or return the text if no ``out``."""
    if fmt not in FORMATS or fmt == "table":
        raise UserError(f"unknown export format {fmt!r}; use one of {', '.join(f for f in FORMATS if f != 'table')}")
    frame = frame[export_columns(frame, fmt, columns=columns, wide=wide)]
    if fmt == "parquet":
        if out is None:
            raise UserError("--format parquet writes a binary file: give --out FILE.parquet")
        try:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            _flat(frame, lists=True).to_parquet(out, index=False)
        except ImportError:
            raise UserError("parquet needs pyarrow: pip install 'tlstm-bench[parquet]'") from None
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
        return None
    if fmt == "markdown":
        text = _markdown(frame)
    elif fmt == "json":
        text = _json(frame)
    else:
        buffer = io.StringIO()
        _flat(frame, lists=False).to_csv(buffer, index=False)
        text = buffer.getvalue()
    if out is None:
        return text
    try:
        atomic_write(out, lambda fh: fh.write(text))  # a failed write leaves the old file, not half a new one
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    return None
