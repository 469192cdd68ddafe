#!/usr/bin/env python3
"""GPU evidence (issues 8, 18, 23): one prepared device run under one time budget.

    PYTHONPATH=. python3 benchmarks/gpu_evidence.py --out OUT --budget-s 300 --commit SHA
    PYTHONPATH=. python3 benchmarks/gpu_evidence.py --out /tmp/ev --device cpu --tiny   # dry run, minutes
    PYTHONPATH=. python3 benchmarks/gpu_evidence.py --plan                               # the plan, no GPU

The work is done by the package ``benchmarks/evidence`` (its docstring, ``--help`` and
docs/gpu-evidence.md say what it measures); this file is its one command.
"""

import time

START = time.time()  # the budget counts from here, before any heavy import

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # a plain checkout, run as `python3 benchmarks/gpu_evidence.py`
    sys.path.insert(0, str(ROOT))

from benchmarks.evidence.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(start=START))
