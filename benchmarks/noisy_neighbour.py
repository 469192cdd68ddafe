"""Issue 30's test of CPU timing beside a noisy neighbour: can a reader trust `time`'s L2/L1?

    python benchmarks/noisy_neighbour.py                     # the issue's experiment: 8 runs beside the hog
    python benchmarks/noisy_neighbour.py --runs 3 --no-hog   # a short look at the machine as it is
    python benchmarks/noisy_neighbour.py --save /tmp/nn      # keep every run's records (JSON)

It starts a neighbour that keeps one core busy half the time (a pure-Python loop, 1 s on,
1 s off; its own process, stopped at the end), then runs ``--runs`` fresh processes of

    tlstm-bench time 2d 3d --depths 1,2 --channels 16 --seq-len 10 --no-store --json

and reads each run's records (the ``--json`` list on stdout). Each configuration's L2/L1 and
whether it is marked ``≈`` are computed by the same functions the table uses
(``results.view.depth_ratio`` and ``results.view.unresolved``), so what is printed here is
what the table showed. The issue's three conditions, each with PASS or FAIL:

1. no unmarked L2/L1 below 1;
2. the unmarked ratios of one configuration agree within 1.5x (largest over smallest);
3. at most half of all the ratios are marked ``≈``.

Also printed: every raw ratio with its mark, the process's median share of the CPU in that
run (``cpu_share``: under 75% the machine was busy and the pair is marked), and the load
average before and after, since the machine's own load comes on top of the hog's.
Exit status: 0 when all three conditions pass, 1 when one fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

COMMAND = ["time", "2d", "3d", "--depths", "1,2", "--channels", "16", "--seq-len", "10", "--no-store", "--json"]
HOG = "import time\nwhile True:\n    t = time.perf_counter()\n    while time.perf_counter() - t < 1.0:\n" \
      "        pass\n    time.sleep(1.0)\n"
AGREE_WITHIN = 1.5


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def one_run(extra: list[str]) -> tuple[list[dict], float]:
    """The records of one fresh `time` process, and its wall seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tlstm_bench", *COMMAND, *extra], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: `tlstm-bench {' '.join(COMMAND + extra)}` exited {done.returncode}: "
                         f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}")
    return json.loads(done.stdout), time.perf_counter() - start


def ratios_of(records: list[dict]) -> dict[str, dict]:
    """Per configuration: L2/L1 as the table shows it, its mark, and the CPU shares."""
    from tlstm_bench.results.view import depth_ratio, unresolved

    by = {(r["config"], r["depth"]): r for r in records}
    out = {}
    for config in dict.fromkeys(r["config"] for r in records):
        first, second = by[config, 1], by[config, 2]
        out[config] = {"ratio": depth_ratio(first, second), "marked": unresolved(first, second),
                       "ms": [first["ms_per_step"], second["ms_per_step"]],
                       "cpu_share": [first.get("cpu_share"), second.get("cpu_share")]}
    return out


def conditions(runs: list[dict[str, dict]]) -> list[tuple[str, bool, str]]:
    """The issue's three conditions: (what, passed, the numbers behind it)."""
    every = [(config, r) for run in runs for config, r in run.items()]
    low = [f"{c} {r['ratio']:.2f}" for c, r in every if not r["marked"] and r["ratio"] < 1]
    spreads = []
    for config in dict.fromkeys(c for c, _ in every):
        clean = [r["ratio"] for c, r in every if c == config and not r["marked"]]
        if len(clean) > 1:
            spreads.append((config, max(clean) / min(clean)))
    worst = max((s for _, s in spreads), default=1.0)
    marked = sum(r["marked"] for _, r in every)
    return [
        ("no unmarked L2/L1 below 1", not low, ", ".join(low) or "none"),
        (f"unmarked ratios of a configuration agree within {AGREE_WITHIN}x", worst <= AGREE_WITHIN,
         ", ".join(f"{c} {s:.2f}x" for c, s in spreads) or "fewer than two unmarked per configuration"),
        ("at most half of the ratios marked ≈", marked <= len(every) / 2, f"{marked} of {len(every)} marked"),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--no-hog", action="store_true", help="no neighbour: the machine as it is")
    ap.add_argument("--save", type=Path, help="write every run's records there (run-N.json)")
    ap.add_argument("extra", nargs="*", help="more options for `time` (after --), e.g. -- --threads 2")
    args = ap.parse_args(argv)
    before = load_average()
    hog = None if args.no_hog else subprocess.Popen([sys.executable, "-c", HOG])
    runs, walls = [], []
    try:
        time.sleep(0 if hog is None else 2.5)  # the hog in its rhythm before the first run
        for n in range(args.runs):
            records, wall = one_run(args.extra)
            walls.append(wall)
            runs.append(ratios_of(records))
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"run-{n + 1}.json").write_text(json.dumps(records))
            line = "  ".join(f"{c} {'≈' if r['marked'] else ' '}{r['ratio']:.2f} (CPU {r['cpu_share'][0]}, "
                             f"{r['cpu_share'][1]})" for c, r in runs[-1].items())
            print(f"run {n + 1}: {line}  [{wall:.0f} s, load {load_average()}]", flush=True)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    print(f"\n`tlstm-bench {' '.join(COMMAND + args.extra)}`, {args.runs} runs, "
          f"{'no neighbour' if hog is None else 'beside a 1 s on / 1 s off one-core hog'}; "
          f"{os.cpu_count()} CPUs, load average {before} before, {load_average()} after; "
          f"a run took {min(walls):.0f}-{max(walls):.0f} s")
    results = conditions(runs)
    for what, passed, detail in results:
        print(f"{'PASS' if passed else 'FAIL'}  {what}: {detail}")
    return 0 if all(passed for _, passed, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
