"""Cell functions the sweep tests inject (``--cell-fn sweep_fakes:cell``); stdlib only, so
the cell processes start fast. A helper module, not a test file: the cell processes (and SLURM
jobs) import it by this name from tests/ (``fake_env`` in conftest.py puts it on PYTHONPATH).

Behaviour per configuration, from ``$FAKE_PLAN`` (JSON, config -> what): ``raise`` (an exception,
as a NaN loss would), ``crash`` (the process dies), ``hang`` (sleeps past any timeout), ``nan``
(returns a NaN metric), ``kill-parent`` (kills the process that runs the cell, then dies: in a
SLURM job, as the OOM killer or a node failure would kill the job; never use it with the local
executor, whose parent is the sweep); anything else returns a result. Every call appends the cell's
(config, depth, seed) to ``$FAKE_LOG`` so tests can count executions. ``$FAKE_WAIT_FOR``: a file the
cell waits for (up to a minute) before it acts, so a test can order two processes' cells.
"""

import json
import os
import signal
import time


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
    value = float("nan") if what == "nan" else 1.0 + spec["depth"]
    if spec["kind"] == "runtime":
        return {"ms_per_step": value, "ms_iqr": 0.1, "samples": [value, value], "channels": 8, "params": 1000,
                "implementation": "fake", "seq_len": spec["seq_len"]}
    return {"metric": "accuracy", "valid_metric": None, "test_metric": value / 10, "samples_to_solve": 100,
            "samples_seen": 100, "solved": True, "status": "ok", "error": None, "channels": 8, "params": 1000}
