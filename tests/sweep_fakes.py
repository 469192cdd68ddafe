"""Cell functions the sweep tests inject (``--cell-fn sweep_fakes:cell``); stdlib only, so
the cell processes start fast. A helper module, not a test file: the cell processes (and SLURM
jobs) import it by this name from tests/ (``fake_env`` in conftest.py puts it on PYTHONPATH).

Behaviour per configuration, from ``$FAKE_PLAN`` (JSON, config -> what): ``raise`` (an exception,
as a NaN loss would), ``crash`` (the process dies), ``hang`` (sleeps past any timeout), ``nan``
(returns a NaN metric), ``kill-parent`` (kills the process that runs the cell, then dies: in a
SLURM job, as the OOM killer or a node failure would kill the job; never use it with the local
executor, whose parent is the sweep), ``fill`` (fills the disk of the file ``$FAKE_FILL``, then
returns a result: its own result file no longer fits), ``readonly`` (bind-mounts the folder ``$FAKE_MOUNT``
read-only over itself, then returns a result; needs root); anything else returns a result. Every call appends the cell's
(config, depth, seed) to ``$FAKE_LOG`` so tests can count executions. ``$FAKE_WAIT_FOR``: a file the
cell waits for (up to a minute) before it acts, so a test can order two processes' cells.
"""

import json
import os
import signal
import subprocess
import time


def _fill(path: str) -> None:
    """Write zeros to ``path`` until its disk is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 16, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def cell(spec: dict) -> dict:
    with open(os.environ["FAKE_LOG"], "a") as fh:
        fh.write(json.dumps([spec["kind"], spec["config"], spec["depth"], spec["seed"]]) + "\n")
    what = json.loads(os.environ.get("FAKE_PLAN", "{}")).get(spec["config"])
    deadline = time.time() + 60
    while os.environ.get("FAKE_WAIT_FOR") and not os.path.exists(os.environ["FAKE_WAIT_FOR"]) \
            and time.time() < deadline:
        time.sleep(0.05)
    if what == "hang":
        time.sleep(3600)
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    if what == "raise":
        raise FloatingPointError("loss is nan at step 3")
    if what == "crash":
        os._exit(3)
    if what == "kill-parent":
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(9)
    if what == "fill":
        _fill(os.environ["FAKE_FILL"])
    if what == "readonly":
        folder = os.environ["FAKE_MOUNT"]  # files already open (the cell's log) stay writable
        subprocess.run(["mount", "--bind", folder, folder], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", folder], check=True)
    value = float("nan") if what == "nan" else 1.0 + spec["depth"]
    if spec["kind"] == "runtime":
        return {"ms_per_step": value, "ms_iqr": 0.1, "samples": [value, value], "channels": 8, "params": 1000,
                "implementation": "fake", "seq_len": spec["seq_len"]}
    return {"metric": "accuracy", "valid_metric": None, "test_metric": value / 10, "samples_to_solve": 100,
            "samples_seen": 100, "solved": True, "status": "ok", "error": None, "channels": 8, "params": 1000}


def environment(spec: dict) -> dict:
    """A cell that returns how its process's OpenMP threads wait (tests/test_omp_wait.py)."""
    return {"omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
