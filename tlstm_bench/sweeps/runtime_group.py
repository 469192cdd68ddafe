"""A sweep's runtime cells are timed a configuration at a time: all its depths together.

A runtime figure compares depths: t(L) against t(1). Timed one cell per process, each depth
was measured at its own moment, and on a machine whose load changed in between the curve
could fall with depth (issue 20: 3d at 0.327 ms for L=1 and 0.104 for L=3). So the first cell
of a group (one configuration, implementation, size and seed: every runtime cell of the
section that differs only in its depth) times every depth of the group in one
:func:`~tlstm_bench.timing.measure_cases` call, rounds interleaved, and leaves the other
depths' records in the group's file, ``<store>/<sweep>/.timed/<group>-<code>.json``; each
sibling cell, when the runner gets to it, takes its record from there instead of timing
again. Each cell still has its own claim and its own record, and resumes on its own: a
sweep killed after the group was timed finds the siblings' measurements in the file; one
killed before it times the group again. A corrupt or foreign file is ignored (timed
again), never trusted. The record says which depths were timed with it (``timed_with``)
and in which measurement (``timing_group``; ``measurement`` pairs their samples round by round).

On a CPU each sample lasts at least ``vocab.CPU_MIN_SAMPLE_S`` (back-to-back runs: a small
model's run lasts about a millisecond, and one scheduler preemption was then the whole sample),
and a spec without ``threads`` is timed with ``vocab.CPU_THREADS`` (one). Whether two depths are
ordered is decided by ``results.view.unresolved`` from the records, as for ``time``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..atomic import atomic_write
from ..results.provenance import code_version
from ..results.schema import stable_hash
from ..vocab import CPU_MIN_SAMPLE_S, CPU_THREADS, DEFAULT_PRECISION

GROUP_DIR = ".timed"  # beside .checkpoints and .locks in a sweep's store folder


def group_key(spec: dict) -> str:
    """The group of a runtime cell: its spec without the depth."""
    return stable_hash({k: v for k, v in spec.items() if k != "depth"})


def group_depths(spec: dict) -> list[int]:
    """The depths timed together with this cell (the section's, in the spec since grid.expand)."""
    return sorted(set(spec.get("timed_with") or [spec["depth"]]) | {spec["depth"]})


def time_runtime_cell(spec: dict, group_dir: Path | None = None) -> dict:
    """The record of one runtime cell: from its group's file, or by timing the whole group."""
    depth, group = spec["depth"], group_key(spec)
    path = Path(group_dir) / f"{group}-{code_version()}.json" if group_dir is not None else None
    measured = _read(path, group)
    if measured is None or str(depth) not in measured["records"]:
        measured = _measure(spec, group)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda fh: json.dump(measured, fh))
    if str(depth) in measured["failed"]:
        raise RuntimeError(measured["failed"][str(depth)])
    return measured["records"][str(depth)]


def _measure(spec: dict, group: str) -> dict:
    from ..timing import Case, measure_cases

    depths = group_depths(spec)
    implementation = None if spec["implementation"] == "default" else spec["implementation"]
    failed: dict[str, str] = {}
    cpu = spec["device"] == "cpu"
    threads = spec.get("threads") if spec.get("threads") is not None or not cpu else CPU_THREADS
    records = measure_cases(
        [Case(spec["config"], d, implementation) for d in depths],
        channels=spec.get("channels"), budget=spec.get("budget"), vocab=spec["vocab"],
        input_size=spec["input_size"], output_size=spec["output_size"], seq_len=spec["seq_len"],
        device=spec["device"], repeats=spec["repeats"], warmup=spec["warmup"], threads=threads,
        dtype=spec["dtype"], seed=spec["seed"], min_sample_s=CPU_MIN_SAMPLE_S if cpu else 0.0,
        on_failure=lambda case, why: failed.__setitem__(str(case.depth), why.splitlines()[0]),
        precision=spec.get("precision", DEFAULT_PRECISION))
    by_depth = {str(r["depth"]): {**r, "timed_with": depths, "timing_group": group} for r in records}
    return {"group": group, "records": by_depth, "failed": failed}


def _read(path: Path | None, group: str) -> dict | None:
    """The group's measurement, if its file is there and well formed; else None (time again)."""
    if path is None or not path.is_file() or path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(data, dict) and data.get("group") == group and isinstance(data.get("records"), dict)
          and isinstance(data.get("failed"), dict))
    return data if ok else None
