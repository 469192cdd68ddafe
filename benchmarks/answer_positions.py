"""The test accuracy at each answer position of saved training checkpoints: what a run learned.

    python benchmarks/answer_positions.py CHECKPOINT_DIR... [--json FILE] [--figure FILE.png]

Each checkpoint (``tlstm-bench train --checkpoint-dir DIR``) names its run: configuration,
task and options, depth, M. The model is rebuilt, its parameters loaded and the task's own
evaluation run on its fixed test set, on the CPU: the numbers a record keeps as
``test_by_position`` since that field exists, here for runs whose records are older. One line a
checkpoint, the accuracy (%) at each answer position, the first answer first; ``--json`` writes
them with the run's key and samples seen. ``--figure FILE.png`` draws them as ``tlstm-bench plot``
draws a record's answer positions: one panel per run, the checkpoints of one run (copies taken
as it trained) its evaluations.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import torch

from tlstm_bench import build_model
from tlstm_bench.plotting.positions import position_runs, positions_figure
from tlstm_bench.results.view import whole_percents
from tlstm_bench.tasks import make_task
from tlstm_bench.training.checkpoint import checkpoint_path, load_checkpoint


def positions(checkpoint_dir: "str | Path") -> dict:
    """The run's key, the samples it had seen and the test evaluation of its saved parameters."""
    saved = load_checkpoint(checkpoint_path(checkpoint_dir))
    if saved is None:
        raise SystemExit(f"error: no checkpoint in {checkpoint_dir}")
    key = saved["key"]
    task = make_task(key["task"], **key["task_options"])
    if not hasattr(task, "answer"):
        raise SystemExit(f"error: {checkpoint_dir} is a {key['task']} run; answer positions are the algorithmic tasks'")
    model = build_model(key["config"], depth=key["depth"], channels=key["channels"], **task.model_io())
    model.load_state_dict(saved["model"])
    return {"checkpoint": str(checkpoint_dir), "key": key, "samples": saved["counters"]["samples"],
            **task.evaluate(model, "test")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", help="checkpoint folders (train --checkpoint-dir)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--figure", type=Path, help="also draw them into this PNG, one panel per run")
    parser.add_argument("--title", default="Memorization", help="what the runs are, for the figure's title")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = []
    for folder in args.checkpoints:
        result = positions(folder)
        results.append(result)
        key = result["key"]
        print(f"{key['config']} L={key['depth']} M={key['channels']} seed {key['seed']}, "
              f"{result['samples']:,} samples: test accuracy {100 * result['metric']:.1f}%; by answer position (%):")
        print("  " + whole_percents(result["by_position"]))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.figure is not None:
        positions_figure(runs(results), args.title, "from the runs' checkpoints").savefig(args.figure, dpi=120)


def runs(results: list[dict]) -> pd.DataFrame:
    """The results as training records with a history: one per run key, its checkpoints in order."""
    by_key: dict[str, list[dict]] = {}
    for result in results:
        by_key.setdefault(json.dumps(result["key"], sort_keys=True), []).append(result)
    rows = []
    for of_run in by_key.values():
        key = of_run[0]["key"]
        history = [{"samples": r["samples"], "by_position": r["by_position"]} for r in
                   sorted(of_run, key=lambda r: r["samples"])]
        rows.append({"config": key["config"], "depth": key["depth"], "seed": key["seed"], "status": "ok",
                     "sample_unit": "sequence", "history": history})
    return position_runs(pd.DataFrame(rows))


if __name__ == "__main__":
    main()
