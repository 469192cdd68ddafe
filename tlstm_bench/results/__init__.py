"""The results store: one JSON record per measurement or cell, with provenance."""

from .provenance import code_version, provenance
from .store import default_root, load_records, records_frame, write_record

__all__ = ["code_version", "default_root", "load_records", "provenance", "records_frame", "write_record"]
