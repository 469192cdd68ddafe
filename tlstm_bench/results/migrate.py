"""Bring old records up to date: ``python -m tlstm_bench.results.migrate STORE [--dry-run]``.

Records written before ``causal`` existed are read with ``causal = None`` (shown as
unknown). This measures it for each of them, with the same audit new records use
(:func:`tlstm_bench.audit.causal`: this configuration at this depth), writes it into the
record, and says so in the record's ``migrated`` field (what was added, when, by which
code version). Nothing else in a record changes; a record that already has ``causal`` is
left alone.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

from ..atomic import atomic_write
from .schema import infer_kind
from .store import collections, read_record


def add_causal(store: "str | Path", *, dry_run: bool = False) -> dict[str, int]:
    """Add ``causal`` to every record of ``store`` that lacks it; returns counts by outcome."""
    from ..audit import causal
    from .provenance import code_version

    store = Path(store)
    counts = {"added": 0, "had it": 0, "not a model record": 0}
    stamp = {"causal": f"measured {_dt.date.today().isoformat()} by tlstm_bench.results.migrate "
                       f"(code {code_version()})"}
    for name in collections(store):
        for path in sorted((store / name).glob("*.json")):
            record = read_record(path)
            if "causal" in record:
                counts["had it"] += 1
                continue
            if infer_kind(record, name) is None or record.get("config") is None or record.get("depth") is None:
                counts["not a model record"] += 1
                continue
            record["causal"] = causal(record["config"], int(record["depth"]))
            record["migrated"] = {**record.get("migrated", {}), **stamp}
            counts["added"] += 1
            if not dry_run:
                atomic_write(path, lambda fh, r=record: json.dump(r, fh, indent=1, sort_keys=True))
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tlstm_bench.results.migrate", description=__doc__.splitlines()[0])
    parser.add_argument("store", help="a results store (the store/ folder of a results folder)")
    parser.add_argument("--dry-run", action="store_true", help="count, write nothing")
    args = parser.parse_args(argv)
    counts = add_causal(args.store, dry_run=args.dry_run)
    print(", ".join(f"{n} {what}" for what, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
