"""The command line: the supervisor by default, the worker with --worker, or --plan."""

from __future__ import annotations

import argparse
import os

from . import __doc__ as OVERVIEW
from .common import RUN_START, START_WALL
from .plan import print_plan
from .provenance import code_hash
from .settings import make_settings
from .supervisor import supervise
from .worker import worker_main


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=OVERVIEW.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=OVERVIEW)
    ap.add_argument("--out", help="folder for the (at most 8) output files; must be empty or new")
    ap.add_argument("--budget-s", type=float, default=420.0, help="wall-clock budget of the whole run, seconds")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--tiny", action="store_true", help="CPU dry-run sizes (well under a minute)")
    ap.add_argument("--commit", default=os.environ.get("TLSTM_BENCH_COMMIT"),
                    help="the commit to record where git is absent (the device copy has no .git)")
    ap.add_argument("--print-code-hash", action="store_true", help="print the code hash recorded in runs and exit")
    ap.add_argument("--plan", action="store_true", help="print the plan with its prior time estimates and exit")
    ap.add_argument("--skip", default="", help="comma-separated steps to leave out (a second run after a cut "
                    "one): b1, b1x, b2, b2x, b3, b4, b5, c:<run>, d, e; part a cannot be skipped: a run's timings "
                    "are valid only with its own correctness checks")
    ap.add_argument("--test-inject-wrong", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--test-inject-failing", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--test-crash-unit", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--test-stop-after-units", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--state-file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.budget_s <= 0:
        ap.error("--budget-s must be > 0")
    if not (args.out or args.plan or args.print_code_hash):
        ap.error("--out is required")
    steps = make_settings(args.tiny).order
    args.skip = [s.strip() for s in args.skip.split(",") if s.strip()]
    unknown = [s for s in args.skip if s not in steps or s == "a"]
    if unknown:
        ap.error(f"--skip: cannot skip {', '.join(unknown)}; steps are {', '.join(s for s in steps if s != 'a')}")
    return args

def main(argv=None, start: float | None = None) -> int:
    """``start``: when the script started (the budget counts from it)."""
    if start is not None:
        START_WALL[0] = RUN_START[0] = start
    args = parse_args(argv)
    if args.print_code_hash:
        print(code_hash())
        return 0
    if args.plan:
        print_plan(args.device, args.tiny, args.budget_s, args.skip)
        return 0
    if args.worker:
        if args.deadline is None:
            args.deadline = START_WALL[0] + args.budget_s
        RUN_START[0] = args.deadline - args.budget_s
        return worker_main(args)
    return supervise(args)
