"""recall_early.py RUN: the recall gradient (tlstm-bench gradients' measure) of every checkpoint kept under RUN/snaps/, one JSON line each, appended to RUN/recall.jsonl; with its test accuracy and loss then, and the norm of every parameter."""
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from tlstm_bench.analysis.gradients import _load_checkpoint, recall_gradients, RecallSignal

RUN = Path(sys.argv[1]); out = RUN / "recall.jsonl"
done = {json.loads(l)["snapshot"] for l in out.read_text().splitlines()} if out.exists() else set()
for folder in sorted((RUN / "snaps").iterdir()):
    if folder.name in done:
        continue
    payload = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=False)
    counters = payload["counters"]
    last = counters["history"][-1] if counters["history"] else {}
    label, model, task = _load_checkpoint(folder)[:3]  # (a fourth item, the samples, since the run)
    norms = {name: p.norm().item() for name, p in model.named_parameters()}
    s = RecallSignal(label, model.depth, model.channels, True, recall_gradients(model, task))
    row = {"snapshot": folder.name, "samples": counters["samples"], "test_metric": last.get("metric"),
           "test_loss": last.get("loss"), "train_loss": last.get("train_loss"), "first": s.first,
           "median": s.median, "last": s.last, "per_answer": list(s.per_answer), "param_norms": norms}
    with out.open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(row["samples"], f"{s.first:.1e} {s.median:.1e} {s.last:.1e}", row["test_metric"], flush=True)
