"""Saving what a command measured: into the store, or, if that fails after the work, somewhere safe.

The commands check their output folders before any work starts (:mod:`tlstm_bench.checks`),
but a folder can still fail at the end (the disk fills, a folder is made read-only or
replaced meanwhile). A result that took minutes or hours must not be lost then: the
records not yet written go to a folder of this user's cache, one JSON file each, exactly
as the store would hold them, and the command fails (exit 1) naming both folders.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .app import fail

ENV_CACHE = "XDG_CACHE_HOME"


def kept_root() -> Path:
    """Where unsaved records go: ``$XDG_CACHE_HOME`` (else ``~/.cache``) ``/tlstm-bench/unsaved``."""
    cache = os.environ.get(ENV_CACHE) or Path.home() / ".cache"
    return Path(cache) / "tlstm-bench" / "unsaved"


def save_records(records: list[dict], collection: str, store: Path) -> list[Path]:
    """Write each record to ``store/collection``; on a failure keep the rest safe and exit 1."""
    from ..results import write_record

    written = []
    for i, record in enumerate(records):
        try:
            written.append(write_record(record, collection, root=store))
        except OSError as exc:
            kept = _keep(records[i:], collection)
            reason = exc.strerror or type(exc).__name__
            raise fail(f"could not write to {store / collection} ({reason}) after the work was done; "
                       f"{len(records) - i} record(s) kept in {kept}: move them into {store / collection} "
                       "once it is writable", 1) from None
    return written


def _keep(records: list[dict], collection: str) -> Path:
    """Write ``records`` under the first folder that takes them; the folder they went to."""
    from ..results import write_record

    for root in (kept_root(), Path(tempfile.gettempdir()) / "tlstm-bench-unsaved"):
        try:
            for record in records:
                path = write_record(record, collection, root=root)
            return path.parent
        except OSError:
            continue
    print(json.dumps(records, default=str))  # the last place left: standard output
    raise fail("could not write the records anywhere (the store, the cache folder and the temporary folder "
               "all failed); they are printed on standard output as a JSON list", 1)
