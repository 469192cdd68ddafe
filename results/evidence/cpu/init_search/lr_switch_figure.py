"""lr_switch_figure.py [DEPTH [OUT]]: a run at lr 1e-4 throughout beside its checkpoints resumed at the
paper's lr 1e-3 (lr_switch.py): test accuracy at every evaluation (the records' histories) and the recall
gradient's median at the measured checkpoints (lr-long.jsonl), against the training sequences seen.
DEPTH 7 (the default): figures/paper-size-L7-lr-switch.png, the L = 7 run and its checkpoints at 48,000
and 96,000 (runs c7lr4, c7sw2, c7sw3); 10: figures/paper-size-L10-lr-switch.png, the L = 10 run at lr
1e-4 again (seventeenth and eighteenth sessions), its checkpoints at 61,710 and 76,500 resumed at 1e-3
and the one at 76,500 at 3e-4 (runs c10lr4b, c10sw1, c10sw2, c10sw3), and at 1e-3 with the gradient's
norm clipped to 10 (nineteenth: c10clip; clip_probe.py)."""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
PROBES = HERE / "probes"
STORE = HERE.parent / "store" / "training"
FIGURES = {  # depth: (runs, the lr 1e-4 run's name, title); runs: name in lr-long.jsonl -> (its record,
    # label, colour, the samples it is drawn from: its switch)
    7: ({"c7lr4": (STORE / "paper-memorization-3d-cn-init5-L7-s0-lr1e-4-cap172500.json",
                   "lr 1e-4 throughout", "tab:brown", 46_000),
         "c7sw2": (PROBES / "paper-memorization-3d-cn-init5-L7-s0-lr1e-4-then-1e-3-from48000.json",
                   "lr 1e-4, then 1e-3 from 48,000", "tab:olive", 48_000),
         "c7sw3": (PROBES / "paper-memorization-3d-cn-init5-L7-s0-lr1e-4-then-1e-3-from96000.json",
                   "lr 1e-4, then 1e-3 from 96,000", "tab:pink", 96_000)},
        "c7lr4",
        "Memorization, 3D tLSTM+CN, L = 7, the five knobs, seed 0 (20 of 64 symbols, M = 100, batch 15):\n"
        "lr 1e-4, and its checkpoints at 48,000 and 96,000 resumed at the paper's lr 1e-3 (AMD EPYC, 1 thread)"),
    10: ({"c10lr4b": (STORE / "paper-memorization-3d-cn-init5-L10-s0-lr1e-4-cap172500.json",
                      "lr 1e-4 throughout", "tab:brown", 56_000),
          "c10sw1": (PROBES / "paper-memorization-3d-cn-init5-L10-s0-lr1e-4-then-1e-3-from61710.json",
                     "lr 1e-4, then 1e-3 from 61,710", "tab:olive", 61_710),
          "c10sw2": (PROBES / "paper-memorization-3d-cn-init5-L10-s0-lr1e-4-then-1e-3-from76500.json",
                     "lr 1e-4, then 1e-3 from 76,500", "tab:pink", 76_500),
          "c10sw3": (PROBES / "paper-memorization-3d-cn-init5-L10-s0-lr1e-4-then-3e-4-from76500.json",
                     "lr 1e-4, then 3e-4 from 76,500", "tab:cyan", 76_500),
          "c10clip": (PROBES / "paper-memorization-3d-cn-init5-L10-s0-lr1e-4-then-1e-3-clip10-from76500.json",
                      "lr 1e-4, then 1e-3 clipped at 10 from 76,500", "tab:purple", 76_500)},
         "c10lr4b",
         "Memorization, 3D tLSTM+CN, L = 10, the five knobs, seed 0 (20 of 64 symbols, M = 100, batch 15):\n"
         "lr 1e-4, its checkpoints resumed at the paper's lr 1e-3 (at 76,500 also clipped at 10) and at 3e-4 "
         "(Intel Xeon, 1 thread)"),
}


def draw(depth: int, out: Path) -> None:
    runs, base, title = FIGURES[depth]
    switches = sorted({start for run, (_, _, _, start) in runs.items() if run != base})
    rows = [json.loads(line) for line in (HERE / "lr-long.jsonl").read_text().splitlines()]
    fig, (acc, grad) = plt.subplots(1, 2, figsize=(10, 3.9))
    for run, (record, label, colour, start) in runs.items():
        evals = [e for e in json.loads(record.read_text())["history"] if e["samples"] >= start]
        acc.plot([e["samples"] / 1000 for e in evals], [100 * e["metric"] for e in evals], color=colour, label=label)
        solved = [e for e in evals if e.get("sequence_accuracy") == 1.0][:1]
        acc.plot([e["samples"] / 1000 for e in solved], [100 for _ in solved], color=colour, marker="o", linestyle="")
        measured = sorted((r for r in rows if r["run"] == run and r["samples"] >= start), key=lambda r: r["samples"])
        if run != base:  # a switched run starts where the lr 1e-4 run was measured at its switch
            measured = [r for r in rows if r["run"] == base and r["samples"] == start] + measured
        grad.semilogy([r["samples"] / 1000 for r in measured], [r["median"] for r in measured], color=colour,
                      marker=".", label=label)
    for ax in (acc, grad):
        for switch in switches:
            ax.axvline(switch / 1000, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("training sequences seen (thousands)")
        ax.grid(alpha=0.3)
    acc.set_ylabel("test accuracy (%); o: every test sequence right")
    grad.set_ylabel("recall gradient, median of the 20 answers")
    acc.legend(loc="upper left", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    draw(depth, Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "figures" / f"paper-size-L{depth}-lr-switch.png")
