"""The results layer: the workspace, the record schema, the store, one reader, exports.

* :mod:`.store`: the workspace folder (``--results-dir``, ``$TLSTM_BENCH_RESULTS``, ``./results``)
  and its store of JSON records, written atomically;
* :mod:`.schema`: what a record holds (a typed definition; ``docs/results.md`` has the table);
* :mod:`.frame`: the one reader (records -> DataFrame, newest record per cell);
* :mod:`.view`, :mod:`.export`: tables for a reader (and the ≈ rule), CSV/JSON/Markdown/Parquet;
* :mod:`.stats`: paired ratios of interleaved timings and the sign-test interval of their median;
* :mod:`.provenance`: the code version (a hash of the package source), git, machine.

Importing this package does not import torch or pandas; :mod:`.frame`, :mod:`.view` and
:mod:`.export` import pandas.
"""

from .provenance import code_version, git_info, provenance
from .schema import Record
from .store import Workspace, default_root, load_records, read_record, workspace, write_record

__all__ = ["Record", "Workspace", "code_version", "default_root", "git_info", "load_records", "provenance",
           "read_record", "workspace", "write_record"]
