"""Samples-to-solve of the small algorithmic presets for every configuration at two depths.

    python benchmarks/solve_small.py                       # both presets, L = 1 and 2, all seven configs
    python benchmarks/solve_small.py --preset addition-small --depths 1,4 --configs 3d-cn,slstm

Each run trains one configuration with the named preset (online samples, batch 15,
Adam 1e-3, evaluation on the fixed 100-sample test set every ``eval_every`` samples)
until the test set is solved or the preset's sample cap is reached. Runs are
sequential (one thread each: on a small model and a shared CPU that is fastest).
Records go to ``<results folder>/store/training/<preset>-<config>-L<depth>-s<seed>[-cap<N>].json``
(``--results-dir``, else ``$TLSTM_BENCH_RESULTS``, else ``./results``; the committed evidence:
``--results-dir results/evidence/cpu``) and a Markdown table is printed. Where a run never solves within the cap, the table says so.
"""

from __future__ import annotations

import argparse
import time

from tlstm_bench.models import CONFIG_NAMES
from tlstm_bench.results import workspace, write_record
from tlstm_bench.training import train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", action="append", help="memorization-small and/or addition-small (default both)")
    parser.add_argument("--configs", default=",".join(CONFIG_NAMES))
    parser.add_argument("--depths", default="1,2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-samples", type=int, default=None, help="override the preset's cap")
    parser.add_argument("--results-dir", default=None,
                        help="results folder; records go to its store/training/ (default: $TLSTM_BENCH_RESULTS or ./results)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    presets = args.preset or ["memorization-small", "addition-small"]
    rows = []
    for preset in presets:
        for config in args.configs.split(","):
            for depth in (int(d) for d in args.depths.split(",")):
                started = time.monotonic()
                record = train(config, depth=depth, preset=preset, seed=args.seed, progress=False,
                               threads=args.threads, max_samples=args.max_samples)
                record_id = f"{preset}-{config}-L{depth}-s{args.seed}"
                if args.max_samples is not None:
                    record_id += f"-cap{args.max_samples}"
                write_record(record, "training", root=workspace(args.results_dir).store, record_id=record_id)
                if record["status"] != "ok":
                    rows.append(f"| {preset} | {config} | {depth} | failed: {record['error']} |")
                    print(rows[-1], flush=True)
                    continue
                solved = f"{record['samples_to_solve']:,}" if record["solved"] else \
                    f"not within {record['samples_seen']:,}"
                row = (f"| {preset} | {config} | {depth} | {record['channels']} | {record['params']:,} | {solved} "
                       f"| {100 * record['test_metric']:.1f} | {100 * record['sequence_accuracy']:.0f} "
                       f"| {time.monotonic() - started:.0f} |")
                print(row, flush=True)
                rows.append(row)
    print("\n| preset | config | L | M | params | samples to solve | test symbol acc % | test seq acc % | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
