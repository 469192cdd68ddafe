"""merge_kept.py RUN DEPTH LR OUT AFTER [WARMUP]: append RUN's measured kept checkpoints (RUN/kept.jsonl, from
measure_once.sh or measure_list.sh) past AFTER samples to OUT (lr-early.jsonl or lr-long.jsonl), in
its format: the test accuracy, loss and training loss of the last evaluation at or before the
checkpoint (from its own history; none before the first, at 1,500) and, for lr-early.jsonl, the norm
of every parameter; with WARMUP (the run's --lr-warmup, as its record writes it), an ``lr_warmup``
field. Rows OUT has already are skipped; prints each row it adds."""
import json
import sys
from pathlib import Path

import torch

run, depth, lr, out, after = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5])
warmup = sys.argv[6] if len(sys.argv) > 6 else None
have = {(d["run"], d["samples"]) for d in map(json.loads, out.read_text().splitlines())}
measured = {}
for d in map(json.loads, (run / "kept.jsonl").read_text().splitlines()):
    measured.setdefault(d["file"], d)  # a checkpoint measured twice (two processes) counts once
rows = []
for name, d in sorted(measured.items()):
    samples = int(name.removeprefix("checkpoint-").removesuffix(".pt"))  # kept_path's name: no load to skip it
    if samples <= after or (run.name, samples) in have:
        continue
    payload = torch.load(run / "C" / "kept" / name, map_location="cpu", weights_only=True)
    assert payload["counters"]["samples"] == samples, name
    last = payload["counters"]["history"][-1] if payload["counters"]["history"] else {}
    row = {"run": run.name, "depth": depth, "lr": lr, "file": name, "samples": samples,
           "last_eval_samples": last.get("samples"), "test_metric": last.get("metric"), "test_loss": last.get("loss"),
           "train_loss": last.get("train_loss"), "first": d["first"], "median": d["median"], "last": d["last"],
           "per_answer": d["per_answer"]}
    if warmup is not None:
        row["lr_warmup"] = warmup
    if out.name == "lr-early.jsonl":
        row["param_norms"] = {k: v.norm().item() for k, v in payload["model"].items()}
    rows.append(row)
with out.open("a") as fh:
    for row in rows:
        fh.write(json.dumps(row) + "\n")
for row in rows:
    acc = "-" if row["test_metric"] is None else f"{100 * row['test_metric']:.2f}%"
    print(row["run"], row["samples"], acc, f"{row['first']:.1e} {row['median']:.1e} {row['last']:.1e}")
