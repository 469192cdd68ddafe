"""What every part of the evidence run shares: its names, its clock, its two files."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_evidence.py"  # what the supervisor starts as its worker
START_WALL = [time.time()]  # the script's start (the budget counts from it); set by cli.main
RUN_START = [START_WALL[0]]  # the supervisor's start; a worker sets it from --deadline - --budget-s

RECORDS, LOG, SUMMARY = "records.jsonl", "log.txt", "summary.md"
FIGURES = {"m100": "runtime_m100.png", "wiki": "runtime_wiki.png", "training": "training.png"}
MAX_FILES = 8
PRIORITY_CONFIGS = ("slstm", "2d", "3d-cn", "2d-m", "2d-f", "3d", "3d-ln")  # the paper's headline ones first
TINY_TIMED_CONFIGS = ("slstm", "2d")  # the dry run times fewer: each group starts its worker processes
EXTRA_MODULES = ("tlstm_bench.models.triton_tlstm",)  # may register more implementations (issue 9)
ORACLE = {"tlstm": "eager", "slstm": "loop"}
ORACLE_CHAIN = ("eager", "loop", "reference")  # the oracles (``reference`` checks ``eager`` in CI): not timed as rows
CORE_TLSTM = ("fast", "cuda-graph")  # b1/b2; every other passing tLSTM implementation is "extra" (b1x/b2x)
PAPER_SAMPLES = {"memorization": 54_000, "addition": 298_000}  # paper Table 2, 3D tLSTM+CN
TARGET_FACTOR = 1.5  # issue 8: solved within 1.5x the paper's samples
SAFETY = 1.25  # a unit starts only if SAFETY x its estimate fits
EXIT_STOPPED_TERM, EXIT_STOPPED_INT, EXIT_CUDA_BROKEN, EXIT_CRASHED = 143, 130, 75, 3
# Under Triton's interpreter (the CPU dry run) a triton run takes seconds, not milliseconds:
# the dry run checks it on a small subset and does not time it (timing is the same code for
# every implementation, and the dry run's groups already show it).
INTERPRETED_CONFIGS = ("2d",)
INJECTED = "wrong-test"  # --test-inject-wrong registers this deliberately wrong implementation
FAILING = "failing-test"  # --test-inject-failing: right in part a, kills its process when timed
RESERVED = ("d", "e")  # parts whose time is kept back from the start until they have run
TIME_CHECK = {"config": "2d", "implementation": "fast", "size": "m100", "agree_within": 0.10}


def interpreted(impl: str) -> bool:
    """Whether ``impl`` runs under Triton's CPU interpreter here (the dry run; never on a GPU)."""
    return impl == "triton" and os.environ.get("TRITON_INTERPRET") == "1"

class Stop(KeyboardInterrupt):
    """Raised in the worker by SIGTERM: stop now, keep what is written (train() re-raises it)."""

def _raise_stop(signum, frame):
    raise Stop(f"signal {signum}")

def clean(value):
    """JSON-safe: NaN/inf become None, tuples lists, unknown objects their str."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)

def read_records(path: Path) -> list[dict]:
    """Every whole record of a JSON-lines file (a half-written last line is ignored)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out

class Log:
    """Timestamped lines to log.txt and stdout (the device tool shows the end of stdout)."""

    def __init__(self, path: Path, who: str):
        self.path, self.who = path, who

    def __call__(self, message: str) -> None:
        line = f"[{time.time() - RUN_START[0]:7.1f}s {self.who}] {message}"
        print(line, flush=True)
        with open(self.path, "a") as fh:
            fh.write(line + "\n")

class Records:
    """records.jsonl: one record a line, appended, flushed and synced as it is written."""

    def __init__(self, path: Path, provenance: dict):
        self.path, self.provenance = path, provenance

    def write(self, kind: str, part: str, **fields) -> dict:
        record = {"kind": kind, "part": part, "t_s": round(time.time() - RUN_START[0], 3), **fields,
                  "provenance": self.provenance}
        line = json.dumps(clean(record), sort_keys=True)
        with open(self.path, "a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return record

def _num(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)

def _fmt_ms(ms) -> str:
    return "-" if ms is None else f"{ms:.4f}" if ms < 0.1 else f"{ms:.3f}"

def _latest(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["kind"] == kind]
