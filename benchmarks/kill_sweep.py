"""Kill sweeps with SIGKILL at random moments and count what is lost, duplicated or left behind.

    python benchmarks/kill_sweep.py                                  # 30 kills, prints the figures
    python benchmarks/kill_sweep.py --kills 10 --seed 1 --out results/evidence/cpu/reliability

Issue 11's attack on the sweep runner, at length (``tests/test_sweep_kills.py`` runs a short
version in the suite). Each round starts one or two ``tlstm-bench sweep`` processes on the
same store (two: they share the work, and each waits for the cells the other runs), and
SIGKILLs each at a random moment, its own process only, so its cell processes would be
orphans if they did not die with it. Rounds go on until ``--kills`` sweeps have been killed
mid-run; then one last sweep runs to the end. The cells are the stdlib fake of
``tests/sweep_fakes.py`` (each sleeps ``--cell-s``), so the runner's logic is what is
timed, not a model.

Counted: kills; orphans (cells of a killed sweep still alive ``--orphan-wait-s`` after the
kill); early exits (a sweep that exited 0 while a cell it was to run had no record: half the
kills are followed at once by a sweep of just the cells the killed one held, the case issue
11 saw, and every sweep that ends by itself is checked); and at the end: records, cells without one, cells with more than one record (a
duplicate), cells run more than once (killed mid-run, then rerun: expected, not a loss), and
locks left. ``--out`` writes ``kill_sweep.json`` and ``kill_sweep.md`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
sys.path.insert(0, str(TESTS))  # the sweep tests' helpers: the fake cell and readers of what a sweep left

from sweep_helpers import cell_processes, records  # noqa: E402

from tlstm_bench.sweeps import lock as locks  # noqa: E402
SPEC = """
task = "runtime"
configs = ["slstm", "2d", "2d-m", "3d", "3d-cn"]
depths = [1, 2, 3, 4]
seeds = [0, 1]
channels = 8
timeout_s = 120
[runtime]
seq_len = 5
repeats = 2
"""
CELLS = 5 * 4 * 2


def start_sweep(spec: Path, root: Path, jobs: int, env: dict, only: list[str] = ()) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tlstm_bench", "sweep", str(spec), "--results-dir", str(root.parent),
                             "--cell-fn", "sweep_fakes:cell", "--jobs", str(jobs),
                             *(["--only", "id=" + ",".join(only)] if only else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def claimed_by(root: Path, pid: int) -> list[str]:
    """The cells whose lock names ``pid`` as its owner."""
    return [path.stem for path in (root / "kill" / ".locks").glob("*.lock")
            if (locks.read_lock(path) or {}).get("pid") == pid]


def kill(proc: subprocess.Popen, spec: Path, root: Path, env: dict, rng: random.Random, args, figures: Counter):
    """SIGKILL one sweep (its own process); count its cells still alive after ``--orphan-wait-s``;
    half the time, rerun at once just the cells it held, and count an exit 0 without their records."""
    cells, held = cell_processes(root, parent=proc.pid), claimed_by(root, proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    figures["kills"] += 1
    time.sleep(args.orphan_wait_s)
    figures["orphans"] += sum(map(locks.pid_alive, cells))
    if held and rng.random() < 0.5:
        rerun = start_sweep(spec, root, 2, env, only=held)
        rerun.wait(timeout=600)
        figures["immediate reruns of the killed sweep's cells"] += 1
        missing = [i for i in held if not (root / "kill" / f"{i}.json").exists()]
        figures["early exits (0 with a record missing)"] += rerun.returncode == 0 and bool(missing)


def attack(args: argparse.Namespace, folder: Path) -> dict:
    spec = folder / "kill.toml"
    spec.write_text(SPEC)
    root = folder / "ws" / "store"
    log = folder / "executions.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "FAKE_LOG": str(log), "FAKE_SLEEP": str(args.cell_s), "TLSTM_BENCH_CODE_VERSION": "kill-test"}
    rng = random.Random(args.seed)
    figures = Counter({"early exits (0 with a record missing)": 0})
    start = time.monotonic()
    while figures["kills"] < args.kills and figures["rounds"] < 5 * args.kills:
        figures["rounds"] += 1
        sweeps = [(start_sweep(spec, root, rng.choice([1, 2, 3]), env), rng.uniform(args.min_s, args.max_s))
                  for _ in range(rng.choice([1, 1, 2]))]
        begun = time.monotonic()
        for proc, kill_at in sorted(sweeps, key=lambda pair: pair[1]):
            try:
                proc.wait(timeout=max(0.0, kill_at - (time.monotonic() - begun)))
            except subprocess.TimeoutExpired:
                kill(proc, spec, root, env, rng, args, figures)
            else:
                figures["runs that ended by themselves"] += 1
                figures["early exits (0 with a record missing)"] += proc.returncode == 0 and len(records(root, "kill")) < CELLS
    final = start_sweep(spec, root, 2, env)
    final.wait(timeout=600)
    got = records(root, "kill")
    keys = Counter(r["key"] for r in got)
    runs = Counter(log.read_text().splitlines()) if log.exists() else Counter()
    return {
        **{name: figures[name] for name in ("kills", "rounds", "runs that ended by themselves", "orphans",
                                            "immediate reruns of the killed sweep's cells",
                                            "early exits (0 with a record missing)")},
        "final exit code": final.returncode, "cells": CELLS, "records": len(got),
        "cells without a record": CELLS - len(keys), "cells with duplicate records": sum(n > 1 for n in keys.values()),
        "failed records": sum(r["status"] != "ok" for r in got),
        "cell executions": sum(runs.values()), "cells run more than once": sum(n > 1 for n in runs.values()),
        "locks left": len(list((root / "kill" / ".locks").glob("*.lock"))),
        "orphans at the end": len(cell_processes(root)),
        "wall time s": round(time.monotonic() - start, 1),
    }


def markdown(result: dict, args: argparse.Namespace) -> str:
    lines = [f"# Sweep kill attack ({time.strftime('%Y-%m-%d')})", "",
             f"`python benchmarks/kill_sweep.py --kills {args.kills} --seed {args.seed} --cell-s {args.cell_s} "
             f"--min-s {args.min_s} --max-s {args.max_s} --orphan-wait-s {args.orphan_wait_s}` on {platform.node()} ({os.cpu_count()} CPUs, shared with "
             f"other jobs); {CELLS} fake cells of {args.cell_s} s, 1 or 2 sweeps at once with --jobs 1-3, each "
             f"SIGKILLed (its own process only) at a random moment in [{args.min_s}, {args.max_s}] s; an orphan is a "
             f"cell of a killed sweep alive {args.orphan_wait_s} s after the kill.", "",
             "| figure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in result.items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30, help="sweeps to kill mid-run (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--cell-s", type=float, default=2.0, help="seconds each fake cell takes")
    parser.add_argument("--orphan-wait-s", type=float, default=0.5,
                        help="how long a killed sweep's cells may take to die (well under --cell-s)")
    parser.add_argument("--min-s", type=float, default=0.2, help="earliest kill, seconds after the start")
    parser.add_argument("--max-s", type=float, default=4.0, help="latest kill, seconds after the start")
    parser.add_argument("--out", type=Path, default=None, help="folder for kill_sweep.json and kill_sweep.md")
    args = parser.parse_args()
    if not Path("/proc").is_dir():
        parser.error("needs Linux (/proc) to find orphaned cell processes")
    with tempfile.TemporaryDirectory(prefix="kill-sweep-") as tmp:
        result = attack(args, Path(tmp))
    text = markdown(result, args)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kill_sweep.json").write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                                              **result}, indent=1) + "\n")
        (args.out / "kill_sweep.md").write_text(text)
    bad = (result["orphans"] + result["early exits (0 with a record missing)"] + result["cells without a record"]
           + result["cells with duplicate records"] + result["orphans at the end"] + result["locks left"])
    return 1 if bad or result["final exit code"] != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
