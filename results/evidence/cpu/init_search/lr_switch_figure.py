"""lr_switch_figure.py [OUT]: figures/paper-size-L7-lr-switch.png, the L = 7 run at lr 1e-4 throughout
beside its checkpoints at 48,000 and 96,000 samples resumed at the paper's lr 1e-3 (lr_switch.py): test
accuracy at every evaluation (the records' histories) and the recall gradient's median at the measured
checkpoints (lr-long.jsonl, runs c7lr4, c7sw2 and c7sw3), against the training sequences seen."""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
PROBES = HERE / "probes"
RUNS = {  # run name in lr-long.jsonl: (its record, label, colour, the samples it is drawn from: its switch)
    "c7lr4": (HERE.parent / "store" / "training" / "paper-memorization-3d-cn-init5-L7-s0-lr1e-4-cap172500.json",
              "lr 1e-4 throughout", "tab:brown", 46_000),
    "c7sw2": (PROBES / "paper-memorization-3d-cn-init5-L7-s0-lr1e-4-then-1e-3-from48000.json",
              "lr 1e-4, then 1e-3 from 48,000", "tab:olive", 48_000),
    "c7sw3": (PROBES / "paper-memorization-3d-cn-init5-L7-s0-lr1e-4-then-1e-3-from96000.json",
              "lr 1e-4, then 1e-3 from 96,000", "tab:pink", 96_000),
}
SWITCHES = [start for run, (_, _, _, start) in RUNS.items() if run != "c7lr4"]

rows = [json.loads(line) for line in (HERE / "lr-long.jsonl").read_text().splitlines()]
fig, (acc, grad) = plt.subplots(1, 2, figsize=(10, 3.9))
for run, (record, label, colour, start) in RUNS.items():
    evals = [e for e in json.loads(record.read_text())["history"] if e["samples"] >= start]
    acc.plot([e["samples"] / 1000 for e in evals], [100 * e["metric"] for e in evals], color=colour, label=label)
    solved = [e for e in evals if e.get("sequence_accuracy") == 1.0][:1]
    acc.plot([e["samples"] / 1000 for e in solved], [100 for _ in solved], color=colour, marker="o", linestyle="")
    measured = sorted((r for r in rows if r["run"] == run and r["samples"] >= start), key=lambda r: r["samples"])
    if run != "c7lr4":  # a switched run starts where the lr 1e-4 run was measured at its switch
        measured = [r for r in rows if r["run"] == "c7lr4" and r["samples"] == start] + measured
    grad.semilogy([r["samples"] / 1000 for r in measured], [r["median"] for r in measured], color=colour,
                  marker=".", label=label)
for ax in (acc, grad):
    for switch in SWITCHES:
        ax.axvline(switch / 1000, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("training sequences seen (thousands)")
    ax.grid(alpha=0.3)
acc.set_ylabel("test accuracy (%); o: every test sequence right")
grad.set_ylabel("recall gradient, median of the 20 answers")
acc.legend(loc="upper left", fontsize=8)
fig.suptitle("Memorization, 3D tLSTM+CN, L = 7, the five knobs, seed 0 (20 of 64 symbols, M = 100, batch 15):\n"
             "lr 1e-4, and its checkpoints at 48,000 and 96,000 resumed at the paper's lr 1e-3 (AMD EPYC, 1 thread)",
             fontsize=10)
fig.tight_layout()
out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "figures" / "paper-size-L7-lr-switch.png"
fig.savefig(out, dpi=110)
