"""Training speed at 1 thread and at every core, with OpenMP's default wait and with PASSIVE.

`train` at 1 thread, and at every core with torch's waiting threads as GNU OpenMP leaves them
unless told (`OMP_WAIT_POLICY` unset: they spin for about 3 ms, then sleep; what every run got
before 2026-11-29) or sleeping at once (PASSIVE, what the CLI sets since), beside a busy
neighbour or none; `--active` adds ACTIVE (they spin).

    python benchmarks/omp_wait.py                      # 3 rounds, beside one busy core, then with none
    python benchmarks/omp_wait.py --rounds 5 --neighbour none
    python benchmarks/omp_wait.py --save /tmp/ow       # keep every run's record and log

Each run is a fresh process, `python -m tlstm_bench train ...`, with its own results folder (the
unset variant imports torch before the CLI, which would otherwise set PASSIVE; its record says
PASSIVE, set after OpenMP had read the variable); its
record's `samples_per_s` is the measure (the training loop's throughput: process start and
imports are not in it). The variants of a case run one after another within a round, in an order
that turns by one each round, so that a load that changes over time hits each alike; each
variant's ratio to 1 thread is taken within its round, and the median of those ratios and their
range are printed with the median samples/s. The neighbour is one pure-Python busy loop (one
core held all the time, its own process, stopped at the end). The load average before and after
each block is printed, since the machine's own load comes on top of the neighbour's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from noisy_neighbour import load_average  # benchmarks/, this script's folder, is on sys.path

CASES = {
    "small": ["2d", "-L", "2", "--preset", "memorization-small", "--max-samples", "3000"],
    "paper": ["3d-cn", "-L", "4", "--preset", "paper-memorization", "--max-samples", "150"],
}
HOG = "while True:\n    pass\n"


UNSET = "unset"  # torch loads before the CLI can set the variable: OpenMP's own default
# The CLI, started after torch has loaded (sys.argv[1:] are its arguments, as for `tlstm-bench`).
TORCH_FIRST = "import sys, torch\nfrom tlstm_bench.cli import main\nmain()\n"


def variants(cores: int, active: bool) -> dict[str, tuple[int, str | None]]:
    """name -> (threads, OMP_WAIT_POLICY or UNSET); None: the CLI's default (PASSIVE)."""
    out = {"1 thread": (1, None), f"{cores} threads, unset": (cores, UNSET),
           f"{cores} threads, PASSIVE": (cores, "PASSIVE")}
    if active:
        out[f"{cores} threads, ACTIVE"] = (cores, "ACTIVE")
    return out


def one_run(case: list[str], threads: int, policy: str | None, folder: Path) -> float:
    """samples/s of one fresh `train` process (a record left in ``folder`` by an earlier run would
    make `train` skip the run: the folder is emptied first)."""
    shutil.rmtree(folder, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy not in (None, UNSET):
        env["OMP_WAIT_POLICY"] = policy
    start = ["-c", TORCH_FIRST] if policy == UNSET else ["-m", "tlstm_bench"]
    command = [sys.executable, *start, "train", *case, "--threads", str(threads), "--results-dir", str(folder)]
    with open(folder.with_suffix(".log"), "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise SystemExit(f"error: `tlstm-bench {' '.join(command[3:])}` exited {done.returncode}; its log: {log.name}")
    (record,) = (folder / "store" / "training").glob("*.json")
    return float(json.loads(record.read_text())["samples_per_s"])


def block(name: str, case: list[str], rounds: int, cores: int, active: bool, out: Path) -> None:
    plan = variants(cores, active)
    names = list(plan)
    rates: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    print(f"  {name}: tlstm-bench train {' '.join(case)}  (load average {load_average()})", flush=True)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        got = {}
        for n in order:
            threads, policy = plan[n]
            got[n] = one_run(case, threads, policy, out / f"{name}-r{r}-{n.replace(' ', '').replace(',', '-')}")
        for n in names:
            rates[n].append(got[n])
            ratios[n].append(got[n] / got[names[0]])
    for n in names:
        print(f"    {n:<18} {statistics.median(rates[n]):8.1f} samples/s   x{statistics.median(ratios[n]):.2f} of "
              f"1 thread (rounds: {min(ratios[n]):.2f}-{max(ratios[n]):.2f})", flush=True)
    print(f"    load average after: {load_average()}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per case (3)")
    parser.add_argument("--neighbour", choices=["busy", "none", "both"], default="both",
                        help="beside one busy core, with none, or both one after the other (both)")
    parser.add_argument("--cases", default="small,paper", help="of: " + ", ".join(CASES))
    parser.add_argument("--active", action="store_true", help="also ACTIVE (threads spin while they wait)")
    parser.add_argument("--save", type=Path, default=None, help="keep every run's results folder and log here")
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if unknown := [c for c in cases if c not in CASES]:
        raise SystemExit(f"error: unknown case {unknown[0]!r}; use one of {', '.join(CASES)}")
    if args.rounds < 1:
        raise SystemExit("error: --rounds must be at least 1")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores < 2:
        raise SystemExit("error: this machine has one core: there is no second thread to wait for")
    out = args.save or Path(tempfile.mkdtemp(prefix="omp_wait-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"{cores} cores; samples/s from each run's record; {args.rounds} interleaved rounds", flush=True)
    for neighbour in (["busy", "none"] if args.neighbour == "both" else [args.neighbour]):
        hog = subprocess.Popen([sys.executable, "-c", HOG]) if neighbour == "busy" else None
        try:
            if hog is not None:
                time.sleep(2)  # the neighbour running before the first case starts
            print(f"neighbour: {'one busy core' if hog else 'none'}", flush=True)
            (out / neighbour).mkdir(exist_ok=True)
            for name in cases:
                block(name, CASES[name], args.rounds, cores, args.active, out / neighbour)
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
    if args.save:
        print(f"records and logs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
