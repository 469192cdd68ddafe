"""The workspace and its results store: JSON records written atomically, one a file.

Workspace: one folder for everything the tool writes, ``--results-dir`` or
``$TLSTM_BENCH_RESULTS``, else ``./results`` under the current directory (never the
installed package's folder)::

    <workspace>/store/<collection>/<record id>.json   records (a sweep's name, ``training``, ``timing``)
    <workspace>/figures/                              plot and visualize output, tables.md
    <workspace>/baselines/                            regress --update's baselines

A record is written to a temporary file in the same folder and renamed into place
(``os.replace`` is atomic on POSIX), so a crash or a second writer never leaves a
half-written record, and two writers of the same id leave one whole record.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_write
from ..errors import UserError

ENV_RESULTS = "TLSTM_BENCH_RESULTS"
DEFAULT_WORKSPACE = "results"
_PARTS = {"store", "figures", "baselines", "evidence"}


@dataclass(frozen=True)
class Workspace:
    """The folder the tool writes to, and its parts."""

    root: Path

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def baselines(self) -> Path:
        return self.root / "baselines"


def workspace(results_dir: "str | Path | None" = None) -> Workspace:
    """``results_dir``, else ``$TLSTM_BENCH_RESULTS``, else ``./results``.

    A folder that holds records directly (``<dir>/<collection>/*.json``, the layout before
    workspaces had a ``store/``) is a one-line error naming the folder to give instead.
    """
    root = Path(results_dir if results_dir is not None else os.environ.get(ENV_RESULTS) or DEFAULT_WORKSPACE)
    if not (root / "store").exists() and root.is_dir():
        holders = [p for p in root.iterdir() if p.is_dir() and p.name not in _PARTS and any(p.glob("*.json"))]
        if holders:
            raise UserError(f"{root} holds records directly ({holders[0].name}/*.json); a results folder keeps "
                            f"them under store/: move them to {root / 'store'}/, or give --results-dir "
                            f"{root.parent} if {root.name}/ is the store of that folder")
    return Workspace(root)


def default_root() -> Path:
    """The store of the default workspace."""
    return workspace().store


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
    """Atomically write ``record`` as ``<root>/<collection>/<record_id>.json`` and return the path.

    ``root`` is a store (default: the default workspace's).
    """
    folder = Path(root if root is not None else default_root()) / collection
    folder.mkdir(parents=True, exist_ok=True)
    record_id = record_id or record.get("id") or uuid.uuid4().hex[:16]
    record = {**record, "id": record_id, "collection": collection}
    path = folder / f"{record_id}.json"
    atomic_write(path, lambda fh: json.dump(_clean(record), fh, indent=1, sort_keys=True, default=str))
    return path


def read_record(path: "str | Path") -> dict:
    """One record; a one-line error naming the file when it is not a JSON object."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"corrupt result record {path}: {exc}; delete or fix that file") from None
    if not isinstance(record, dict):
        raise UserError(f"corrupt result record {path}: not a JSON object; delete or fix that file")
    return record


def collections(root: "str | Path") -> list[str]:
    """The collections of a store that hold at least one record."""
    base = Path(root)
    return sorted(p.name for p in base.glob("*") if p.is_dir() and any(p.glob("*.json")))


def load_records(collection: str | None = None, *, root: "str | Path | None" = None) -> list[dict]:
    """Every record under ``root`` (or one collection), as stored, in file-name order."""
    base = Path(root if root is not None else default_root())
    folders = [base / collection] if collection else [base / name for name in collections(base)]
    return [read_record(path) for folder in folders for path in sorted(folder.glob("*.json"))]
