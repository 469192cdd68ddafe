"""A folder of JSON records, written atomically, read into pandas.

Layout: ``<root>/<collection>/<record id>.json``, one record a file. A record is
written to a temporary file in the same folder and renamed into place
(``os.replace`` is atomic on POSIX), so a crash or a second writer never leaves a
half-written record, and two writers of the same id leave one whole record.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from pathlib import Path

import pandas as pd

from ..atomic import atomic_write
from ..errors import UserError

ENV_ROOT = "TLSTM_BENCH_RESULTS"


def default_root() -> Path:
    """``$TLSTM_BENCH_RESULTS`` or ``results/store`` under the current directory."""
    return Path(os.environ.get(ENV_ROOT, "results/store"))


def _clean(value):
    """JSON cannot hold NaN/inf: store them as null (a failed record says why elsewhere)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_record(record: dict, collection: str, *, root: "str | Path | None" = None,
                 record_id: str | None = None) -> Path:
    """Atomically write ``record`` as ``<root>/<collection>/<record_id>.json`` and return the path."""
    folder = Path(root if root is not None else default_root()) / collection
    folder.mkdir(parents=True, exist_ok=True)
    record_id = record_id or record.get("id") or uuid.uuid4().hex[:16]
    record = {**record, "id": record_id, "collection": collection}
    path = folder / f"{record_id}.json"
    atomic_write(path, lambda fh: json.dump(_clean(record), fh, indent=1, sort_keys=True, default=str))
    return path


def load_records(collection: str | None = None, *, root: "str | Path | None" = None) -> list[dict]:
    """Every record under ``root`` (or one collection), oldest file first."""
    base = Path(root if root is not None else default_root())
    folders = [base / collection] if collection else sorted(p for p in base.glob("*") if p.is_dir())
    records = []
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            try:
                record = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise UserError(f"corrupt result record {path}: {exc}; delete or fix that file") from None
            if not isinstance(record, dict):
                raise UserError(f"corrupt result record {path}: not a JSON object; delete or fix that file")
            records.append(record)
    return records


def records_frame(collection: str | None = None, *, root: "str | Path | None" = None) -> pd.DataFrame:
    """All records as a DataFrame, one row per record."""
    return pd.DataFrame(load_records(collection, root=root))
