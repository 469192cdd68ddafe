"""Run one cell and write its record: ``python -m tlstm_bench.sweeps.cell`` (what the runner spawns).

The child reads the cell (JSON) on stdin, calls the cell function (by default
:func:`execute`: the runtime group for runtime cells, ``train`` for training cells), writes
``{"result": ...}`` or ``{"error": "..."}`` as JSON to ``--out`` and exits 0. The runner turns
that into the cell's record (:func:`make_record`, ``status = "ok"`` or ``"failed"``). An exit
code other than 0 means the process died first (a crash, a kill, out of memory): the runner
then records the cell as failed with the last line of its log. The child imports nothing
heavy itself, so a cell function that needs no torch starts fast.

A cell process dies with the process that started it (``--parent-pid``, :func:`die_with_parent`):
a sweep killed with SIGKILL leaves no cell running on, holding its claim (issue 11).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import math
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from ..atomic import atomic_write, disk_problem
from ..vocab import default_omp_wait_policy
from .grid import Cell
from .runtime_group import GROUP_DIR

DEFAULT_CELL_FN = "tlstm_bench.sweeps.cell:execute"
# Exit code of a cell that finished but could not write its result (a full or read-only disk):
# the runner stores no record for it, so a rerun runs it again instead of keeping a failure.
UNSTORED = 75  # EX_TEMPFAIL

# Keys of a record that come from the cell, never from the function's result.
_IDENTITY = ("id", "key", "code_version", "sweep", "kind", "task", "config", "depth", "seed", "spec")
_TRAIN_FIELDS = ("metric", "valid_metric", "test_metric", "samples_to_solve", "samples_seen", "solved", "preset")
_RUNTIME_FIELDS = ("ms_per_step", "ms_iqr", "samples", "implementation", "seq_len", "repeats", "timed_with")
_FINITE = ("valid_metric", "test_metric", "ms_per_step")


def execute(spec: dict, *, checkpoint_dir: "Path | None" = None, group_dir: "Path | None" = None) -> dict:
    """The real cell function: time one model (with the other depths of its configuration,
    :mod:`tlstm_bench.sweeps.runtime_group`) or train one model, as the spec says."""
    if spec["kind"] == "runtime":
        from .runtime_group import time_runtime_cell

        return time_runtime_cell(spec, group_dir)
    size = {"channels": spec.get("channels"), "budget": spec.get("budget")}
    from ..training import TrainSettings, train

    given = {k: spec[k] for k in ("preset", "max_samples", "epochs", "batch_size", "eval_every", "early_stopping",
                                  "time_limit_s", "precision", "lr", "lr_warmup", "clip_grad_norm") if k in spec}
    return train(TrainSettings(spec["config"], spec["depth"], task=spec["task"], **size, seed=spec["seed"],
                               device=spec["device"], checkpoint_dir=checkpoint_dir, **given,
                               task_options=spec.get("options", {})))


def _provenance(device: str) -> dict:
    from ..results import provenance

    try:
        return provenance(device)
    except Exception:  # noqa: BLE001 - e.g. a cuda cell written by a runner without cuda
        return {**provenance("cpu"), "device": device.split(":")[0], "device_name": None}


def slurm_job_id() -> str | None:
    """The SLURM job this process runs in, as submitit and ``squeue`` name it (``123_4`` for a
    task of an array), or None outside SLURM."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID") or None


def make_record(cell: Cell, result: dict | None = None, *, error: str | None = None,
                 wall_time_s: float | None = None) -> dict:
    """The record of one cell (schema: :mod:`tlstm_bench.results.schema`).

    The cell's identity (id, key, code version, sweep, kind, task, configuration, depth,
    seed, spec) always wins over what the cell function returned; the function's own
    ``wall_time_s`` (training time) wins over the process's.
    """
    spec = cell.spec
    fields = _RUNTIME_FIELDS if cell.kind == "runtime" else _TRAIN_FIELDS
    result = dict(result or {})
    for key in _IDENTITY:
        result.pop(key, None)
    record = {"budget": spec.get("budget"), "channels": spec.get("channels"), "params": None,
              "causal": None, "wall_time_s": wall_time_s, **{k: spec.get(k) for k in fields}}
    record.update(_provenance(spec["device"]), slurm_job_id=slurm_job_id())
    record.update(result)
    record.update({
        "id": cell.id, "key": cell.key, "code_version": cell.code_version, "sweep": cell.sweep,
        "kind": cell.kind, "task": spec["task"], "config": spec["config"], "depth": spec["depth"],
        "seed": spec["seed"], "spec": spec,
    })
    status = result.get("status", "ok") if error is None else "failed"
    if status == "ok":
        for key in _FINITE:
            value = record.get(key)
            if isinstance(value, float) and not math.isfinite(value):
                status, error = "failed", f"non-finite {key} ({value})"
    elif error is None:
        error = result.get("error") or "the cell function reported failure without a reason"
    record["status"] = status
    record["error"] = error
    return record


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0] if text else type(exc).__name__


def resolve(fn: str):
    module, _, name = fn.partition(":")
    return getattr(importlib.import_module(module), name or "execute")


def cell_checkpoint_dir(root: "str | Path", sweep: str, cell_id: str) -> Path:
    """Where a training cell checkpoints (and resumes from): ``<store>/<sweep>/.checkpoints/<id>/``."""
    return Path(root) / sweep / ".checkpoints" / cell_id


def call_cell(cell: Cell, root: Path, fn: str = DEFAULT_CELL_FN) -> dict:
    """Call the cell function here, in this process; return ``{"result": ...}`` or ``{"error": ...}``."""
    checkpoints = cell_checkpoint_dir(root, cell.sweep, cell.id)
    try:
        func = resolve(fn)
        if fn == DEFAULT_CELL_FN:
            group_dir = Path(root) / cell.sweep / GROUP_DIR
            return {"result": func(cell.spec, checkpoint_dir=checkpoints, group_dir=group_dir)}
        return {"result": func(cell.spec)}
    except Exception as exc:  # noqa: BLE001 - any failure of the cell fails this cell only
        traceback.print_exc()
        return {"error": one_line(exc)}


def _jsonable(value):
    try:
        return float(value)  # numpy and torch scalars
    except (TypeError, ValueError):
        return str(value)


def cell_to_json(cell: Cell) -> str:
    return json.dumps({"sweep": cell.sweep, "spec": cell.spec, "key": cell.key, "id": cell.id,
                       "code_version": cell.code_version, "timeout_s": cell.timeout_s})


def cell_from_json(text: str) -> Cell:
    return Cell(**json.loads(text))


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_S = 1.0


def die_with_parent(parent: int) -> None:
    """End this process (and its process group, if it leads one) when ``parent`` ends.

    On Linux the kernel sends SIGKILL at the parent's death (``prctl(PR_SET_PDEATHSIG)``);
    everywhere, a thread also polls the parent pid (a dead parent's children are adopted by
    another process), which covers other systems and the cell's own children.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-parent").start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:  # checked at once: the parent may have died before prctl
        time.sleep(PARENT_POLL_S)
    if os.getpgrp() == os.getpid():   # the runner made this process a group leader: take its children along
        os.killpg(0, signal.SIGKILL)
    os._exit(137)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tlstm_bench.sweeps.cell", description=__doc__)
    parser.add_argument("--root", required=True, help="results store root")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    parser.add_argument("--fn", default=DEFAULT_CELL_FN, help="cell function as module:name")
    parser.add_argument("--parent-pid", type=int, default=None, help="end when this process ends (the runner)")
    args = parser.parse_args(argv)
    default_omp_wait_policy()  # before the cell imports torch (a SLURM job may not inherit the CLI's)
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    start = time.monotonic()
    cell = cell_from_json(sys.stdin.read())
    try:
        outcome = call_cell(cell, Path(args.root), args.fn)
    except KeyboardInterrupt:  # Ctrl-C: leave the cell undone, the runner will not record it
        return 130
    # The wall time goes with the result: a runner that collects it after this cell's sweep was
    # killed (runner.harvest) has no clock of its own for it.
    outcome["wall_time_s"] = time.monotonic() - start
    try:
        atomic_write(Path(args.out), lambda fh: json.dump(outcome, fh, default=_jsonable))
    except OSError as exc:
        try:  # the log may sit on the same full disk
            print(disk_problem(exc) or f"cannot write the result {args.out}: {exc}", file=sys.stderr, flush=True)
        except OSError:
            pass
        os._exit(UNSTORED)  # not sys.exit: flushing a full log at exit would turn this into another code
    return 0


if __name__ == "__main__":
    sys.exit(main())
