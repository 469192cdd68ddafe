#!/usr/bin/env python3
"""Ship a device run's tuning rows: merge a ``table.json`` into the Triton tuning table.

``benchmarks/triton_session.py`` (and ``triton_tune.py``) write ``table.json``: per shape the
fastest triton variant that passed its float64 check, on that GPU. The shipped table,
``tlstm_bench/models/triton_tlstm/tuning.json``, is what the dispatcher reads (``tiles.choose``)
and what lets ``train`` pick triton by itself (``tiles.beats_fast``). This merges the new rows
into it, one shape at a time (``tiles.table_key``: M, locations, Kd, batch, dtype, precision,
norm, memory-cell convolution): a new row replaces the shipped row of its shape, the shapes it
does not measure keep theirs. Every row is checked first, and nothing is written unless all
are right:

* the fields the dispatcher reads, ``us_per_step`` a positive number;
* a tile set the compile check compiles for its dtype (``tiles.FLOAT32_MENU``, ``fp64``): any
  other the dispatcher would ignore;
* one row per shape (two would leave the choice to the order of the file);
* the new rows name their device (``device``), a GPU: a table says where it was measured, and
  a CPU dry run's rows (the interpreter's times) are not timings to choose by.

    python benchmarks/tuning_table.py results/evidence/gpu/DATE-CARD/tsession/table.json \\
        --source results/evidence/gpu/DATE-CARD/tsession
    python benchmarks/tuning_table.py NEW.json --dry-run          # what would change

Exit status 0 merged (or nothing to change), 2 a row or file is wrong (one line; the table
is left as it was).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the checkout's package, not an installed one
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tlstm_bench.errors import UserError  # noqa: E402

REQUIRED = ("m", "n", "kd", "batch", "dtype", "menu", "persistent", "us_per_step", "device")


def _tiles():
    from tlstm_bench.models.triton_tlstm import tiles  # imports Triton (the gpu extra)

    return tiles


def read_table(path: Path) -> dict:
    """A table file, its ``entries`` a list of objects; a one-line UserError where it is missing
    or malformed."""
    try:
        table = json.loads(path.read_text())
        entries = table["entries"]
    except FileNotFoundError:
        raise UserError(f"no table at {path}; give the table.json a device run wrote") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise UserError(f"{path} is not a tuning table (a JSON object with 'entries'): {exc}") from None
    if not isinstance(entries, list) or not all(isinstance(r, dict) for r in entries):
        raise UserError(f"{path}: 'entries' must be a list of objects")
    return table


def check_rows(rows: list[dict], where: str) -> None:
    """Every row right (module docstring), else a UserError naming the first wrong one."""
    tiles = _tiles()
    seen: dict[tuple, int] = {}
    for i, row in enumerate(rows):
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise UserError(f"{where} row {i}: missing {', '.join(missing)}")
        if str(row["device"]).lower().startswith("cpu"):
            raise UserError(f"{where} row {i}: measured on {row['device']!r}, not a GPU: a dry run's rows are not "
                            "timings to ship")
        us = row["us_per_step"]
        if not isinstance(us, (int, float)) or not math.isfinite(us) or us <= 0:
            raise UserError(f"{where} row {i}: us_per_step {us!r} is not a positive number")
        allowed = tiles.FLOAT32_MENU if row["dtype"] == "float32" else ("fp64",)
        if row["menu"] not in allowed:
            raise UserError(f"{where} row {i}: tile set {row['menu']!r} is not one the compile check compiles "
                            f"for {row['dtype']} ({', '.join(allowed)})")
        key = tiles.table_key(row)
        if key in seen:
            raise UserError(f"{where} rows {seen[key]} and {i} are the same shape {key}; keep one")
        seen[key] = i


def merge(table: dict, new_rows: list[dict], source: str | None) -> tuple[dict, dict]:
    """The merged table and what changed: {"replaced": [...], "added": [...], "kept": n}."""
    tiles = _tiles()
    incoming = {tiles.table_key(r): dict(r, **({"source": source} if source else {})) for r in new_rows}
    kept, replaced = [], []
    for row in table.get("entries", []):
        (replaced if tiles.table_key(row) in incoming else kept).append(row)
    replaced_keys = {tiles.table_key(r) for r in replaced}
    entries = sorted(kept + list(incoming.values()), key=tiles.table_key)
    changes = {"replaced": sorted(replaced_keys), "added": sorted(k for k in incoming if k not in replaced_keys),
               "kept": len(kept)}
    return {**table, "entries": entries}, changes


def write_atomically(path: Path, table: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(table, indent=1) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Merge a device run's table.json into the Triton tuning table.")
    ap.add_argument("new", type=Path, help="the table.json a device run wrote")
    ap.add_argument("--table", type=Path, default=None, help="the table to update (default: the shipped tuning.json)")
    ap.add_argument("--source", default=None, help="where the rows come from, stored in each (a committed folder)")
    ap.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    args = ap.parse_args(argv)
    try:
        target = args.table or _tiles().TABLE
        new_rows = read_table(args.new)["entries"]
        check_rows(new_rows, str(args.new))
        table = read_table(target) if target.exists() else {"entries": []}  # a malformed one is never overwritten
        merged, changes = merge(table, new_rows, args.source)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for what in ("replaced", "added"):
        for key in changes[what]:
            print(f"{what}: {key}")
    print(f"{len(changes['replaced'])} replaced, {len(changes['added'])} added, {changes['kept']} kept: {target}"
          + (" (dry run: nothing written)" if args.dry_run else ""))
    if not args.dry_run and (changes["replaced"] or changes["added"]):
        write_atomically(target, merged)
    return 0


if __name__ == "__main__":
    sys.exit(main())
