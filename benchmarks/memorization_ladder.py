"""Where memorization stops learning: symbols x depth x configuration, with learning curves (issue 22).

    python benchmarks/memorization_ladder.py                          # the whole ladder, one process
    python benchmarks/memorization_ladder.py --symbols 5 --depths 1,4 --configs 3d-cn,torch-lstm
    python benchmarks/memorization_ladder.py --jobs 14 --time-limit 500   # a machine with many cores
    python benchmarks/memorization_ladder.py --figure-only               # redraw from the records
    python benchmarks/memorization_ladder.py --gradients                 # the untrained gradient probe
    python benchmarks/memorization_ladder.py --gradients --channels 100 --depths 1,4,7,10 \
        --probe-configs 3d-cn,3d-cn:input_init=normal,input_std=3       # ... of any configuration

Each cell trains one configuration at depth L on memorization of n symbols out of the
paper's 64 (batch 15, Adam, the paper's forget-gate bias 1, the tool's own training loop
``tlstm_bench.training.Trainer``) for at most ``--max-samples`` samples, evaluating the
symbol accuracy on the fixed 100-sample test set every ``--eval-every`` samples; it stops
early when the test set is solved. ``torch-lstm`` is the independent check: a plain
``torch.nn.LSTM`` (``--depths`` layers, torch's own initialisation and kernel) put into the
same Trainer, task object, stream, loss and evaluation, so a task or loop bug would show up
without any code of ``tlstm_bench.models``.

Cells run longest first; a cell whose complete record exists is skipped (the script is
resumable: run it again after a kill; a cell cut by ``--deadline`` runs again from the start).
``--jobs N`` runs N cells at once, one thread each. ``--time-limit S`` starts no new cell
after S seconds; ``--deadline S`` stops running cells after S seconds, and their records say
so (``ladder_cut``, with the samples they saw). The initialisation knobs are part of the
configuration (``--configs 3d-cn:cell_kernel=shift,input_init=normal``; docs/models.md).
Probes (not training options, named in the records through ``--variant``): ``--knobs`` passes
TrainSettings fields as JSON, ``--clip`` clips the gradient norm, ``--qbias ENTRY:VALUE``
starts one memory-cell kernel entry's bias at VALUE (``--qbias 0:3`` builds exactly
``3d-cn:cell_kernel=shift``, ``--qbias 4:3`` ``3d-cn:cell_kernel=centre``; the records of
``--knobs '{"input_init": "normal"}'``, a TrainSettings field then, are ``3d-cn:input_init=normal``).
Records go to ``OUT/records/<config>-n<symbols>-L<depth>-s<seed>[-<variant>].json``; the
figures (accuracy against samples, one panel per symbols x depth) and a Markdown summary to
``OUT/ladder*.png`` and ``OUT/summary.md``. Default OUT: results/evidence/cpu/memorization_ladder.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from pathlib import Path

DEFAULT_OUT = Path("results/evidence/cpu/memorization_ladder")
TORCH_LSTM = "torch-lstm"
DEFAULT_MAX_SAMPLES = 45_000


def torch_lstm(vocab: int, channels: int, depth: int, forget_bias: float):
    """A plain embedding + ``nn.LSTM(num_layers=depth)`` + linear readout, torch's init,
    the forget-gate bias set to ``forget_bias`` (b_ih + b_hh) as the task asks."""
    import torch
    from torch import nn

    from tlstm_bench.models.config import parse_config

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.arch = parse_config("slstm")  # what the Trainer's causal() audit reads: an LSTM is causal
            self.depth, self.channels, self.implementation = depth, channels, "torch.nn.LSTM"
            self.embed = nn.Embedding(vocab, channels)
            self.lstm = nn.LSTM(channels, channels, num_layers=depth, batch_first=True)
            self.out = nn.Linear(channels, vocab)
            with torch.no_grad():
                for name, p in self.lstm.named_parameters():
                    if name.startswith("bias"):  # gate order i, f, g, o; the two biases add up
                        p[channels:2 * channels] = forget_bias / 2

        def forward(self, x, state=None):
            h, state = self.lstm(self.embed(x), state)
            return self.out(h), state

    return Plain()


def cell_id(config: str, symbols: int, depth: int, seed: int, variant: str) -> str:
    safe = config.replace(":", "_").replace("=", "").replace(",", "_")
    return f"{safe}-n{symbols}-L{depth}-s{seed}" + (f"-{variant}" if variant else "")


def cost(cell: dict) -> float:
    """Rough relative cost of a cell (cell steps x locations), to schedule the longest first."""
    n, L, config = cell["symbols"], cell["depth"], cell["config"]
    steps = 2 * n + 2 + L
    if config in ("slstm", TORCH_LSTM):
        return steps * L
    locations = L * L if config.startswith("3d") else L
    return steps * (1 + locations / 4)


def run_cell(cell: dict) -> dict:
    """Train one cell and write its record; returns a one-line summary dict."""
    import torch

    torch.set_num_threads(1)
    from tlstm_bench.events import reporter
    from tlstm_bench.training import Trainer, TrainSettings

    started = time.monotonic()
    is_plain = cell["config"] == TORCH_LSTM
    settings, task = TrainSettings(
        "slstm" if is_plain else cell["config"], cell["depth"], task="memorization",
        task_options={"symbols": cell["symbols"], "alphabet": cell["alphabet"]}, channels=cell["channels"],
        max_samples=cell["max_samples"], eval_every=cell["eval_every"], lr=cell["lr"], seed=cell["seed"],
        device=cell["device"], **cell["knobs"]).resolve()
    trainer = Trainer(settings, task, torch.device(cell["device"]), reporter(False), started=started)
    if is_plain:
        torch.manual_seed(cell["seed"])
        model = torch_lstm(len(task.alphabet), cell["channels"], cell["depth"], task.forget_bias).to(cell["device"])
        trainer.state.model = model
        trainer.state.optimizer = torch.optim.Adam(model.parameters(), lr=cell["lr"])
        trainer.record.update(config=TORCH_LSTM, implementation=model.implementation,
                              params=sum(p.numel() for p in model.parameters()))
    if cell.get("clip"):  # a probe of this script, not a training option: clip the gradient norm
        optimizer, model_ = trainer.state.optimizer, trainer.state.model
        adam_step = optimizer.step

        def clipped_step(*a, **kw):
            torch.nn.utils.clip_grad_norm_(model_.parameters(), cell["clip"])
            return adam_step(*a, **kw)
        optimizer.step = clipped_step
    if cell.get("qbias"):  # a probe: start the memory-cell kernel's softmax away from uniform
        entry, value = cell["qbias"]
        model_ = trainer.state.model
        with torch.no_grad():
            model_.b_h[4 * model_.channels + entry] = value  # the Q channels follow G, I, F, O
    cut = False
    if cell.get("deadline") is not None:
        step = trainer.step

        def step_until_deadline():
            if time.time() > cell["deadline"]:
                raise KeyboardInterrupt("ladder deadline")
            return step()
        trainer.step = step_until_deadline
    try:
        trainer.run()
    except KeyboardInterrupt:
        cut = True  # the record says how far it got (samples_seen) and that it was cut
    record = trainer.finish()
    record.update(ladder_cell=cell, ladder_wall_s=time.monotonic() - started, ladder_cut=cut)
    path = Path(cell["out"]) / "records" / (cell["id"] + ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True, default=str))
    os.replace(tmp, path)
    return {"id": cell["id"], "solved": record["samples_to_solve"], "acc": record["test_metric"],
            "samples": record["samples_seen"], "cut": cut, "wall_s": round(time.monotonic() - started)}


def plan(args) -> list[dict]:
    from tlstm_bench.sweeps.grid import split_configs  # a knob string's overrides are comma-separated too

    cells = []
    knobs = json.loads(args.knobs) if args.knobs else {}
    skip = {tuple(item.split(":")) for item in args.skip.split(",") if item}
    for config in split_configs(args.configs):
        for symbols in (int(s) for s in args.symbols.split(",")):
            for depth in (int(d) for d in args.depths.split(",")):
                if (config, str(depth)) in skip:
                    continue
                cell = dict(config=config, symbols=symbols, depth=depth, seed=args.seed, channels=args.channels,
                            alphabet=args.alphabet, max_samples=args.max_samples, eval_every=args.eval_every,
                            lr=args.lr, device=args.device, knobs=knobs, clip=args.clip, qbias=args.qbias,
                            variant=args.variant, out=str(args.out))
                cell["id"] = cell_id(config, symbols, depth, args.seed, args.variant)
                cells.append(cell)
    done = {p.stem for p in (args.out / "records").glob("*.json")
            if not json.loads(p.read_text()).get("ladder_cut")}  # a cut cell runs again, from the start
    deadline = time.time() + args.deadline if args.deadline is not None else None
    for cell in cells:
        cell["deadline"] = deadline
    # The longest first: with several jobs that finishes soonest; alone, the order is moot.
    return sorted((c for c in cells if c["id"] not in done), key=cost, reverse=True)


def run_all(cells: list[dict], jobs: int, time_limit: float | None) -> None:
    started = time.monotonic()
    if jobs <= 1:
        for cell in cells:
            if time_limit is not None and time.monotonic() - started > time_limit:
                print(f"time limit: {len(cells) - cells.index(cell)} cells not started", flush=True)
                return
            print(run_cell(cell), flush=True)
        return
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(jobs, maxtasksperchild=1) as pool:
        pending = list(cells)
        running = []
        while pending or running:
            while pending and len(running) < jobs and (time_limit is None or time.monotonic() - started < time_limit):
                running.append(pool.apply_async(run_cell, (pending.pop(0),)))
            if time_limit is not None and time.monotonic() - started >= time_limit and pending:
                print(f"time limit: {len(pending)} cells not started", flush=True)
                pending = []
            for r in [r for r in running if r.ready()]:
                running.remove(r)
                print(r.get(), flush=True)
            time.sleep(0.5)


def load_records(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "records").glob("*.json"))]


def line_name(record: dict) -> str:
    variant = record["ladder_cell"].get("variant") or ""
    return record["config"] + (f" [{variant}]" if variant else "")


def draw(records: list[dict], out: Path, channels: int, max_samples: int) -> Path:
    """Accuracy against samples at M = ``channels`` for the cells of ``max_samples``: one panel per
    (symbols, depth), one line per configuration and variant (dashed: seed 1; dotted: cut by the
    deadline). ``OUT/ladder.png``; ``OUT/ladder-<max_samples>.png`` for other sample caps."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    records = [r for r in records if r["channels"] == channels and r["max_samples"] == max_samples]
    symbols = sorted({r["task_options"]["symbols"] for r in records})
    depths = sorted({r["depth"] for r in records})
    names = sorted({line_name(r) for r in records})
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}
    fig = Figure(figsize=(3.2 * len(depths), 2.3 * len(symbols) + 0.6), layout="constrained")
    axes = fig.subplots(len(symbols), len(depths), squeeze=False, sharex=True, sharey=True)
    for r in records:
        ax = axes[symbols.index(r["task_options"]["symbols"])][depths.index(r["depth"])]
        style = ":" if r.get("ladder_cut") else "--" if r["seed"] else "-"
        ax.plot([h["samples"] / 1000 for h in r["history"]], [h["metric"] for h in r["history"]], style,
                color=colors[line_name(r)], lw=1.2)
    for i, n in enumerate(symbols):
        for j, depth in enumerate(depths):
            ax = axes[i][j]
            ax.axhline(1 / 64, color="grey", lw=0.6, ls="--")  # chance: 1 of 64 symbols
            ax.set_title(f"{n} symbols of 64, L = {depth}", fontsize=9)
            ax.set_ylim(0, 1.02)
            if i == len(symbols) - 1:
                ax.set_xlabel("training samples (K)")
            if j == 0:
                ax.set_ylabel("test symbol accuracy")
    fig.suptitle(f"Memorization, M = {channels}, batch 15, Adam 1e-3, at most {max_samples:,} samples "
                 "(grey: chance)", fontsize=10)
    fig.legend(handles=[Line2D([], [], color=colors[n], label=n) for n in names], loc="outside lower center",
               ncol=min(len(names), 5), fontsize=8)
    path = out / ("ladder.png" if max_samples == DEFAULT_MAX_SAMPLES else f"ladder-{max_samples}.png")
    fig.savefig(path, dpi=110)
    return path


def summary(records: list[dict]) -> str:
    rows = ["| config | symbols | L | M | seed | samples seen | solved at | final acc | best acc | wall s | device |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    key = lambda r: (line_name(r), r["task_options"]["symbols"], r["depth"], r["seed"])  # noqa: E731
    for r in sorted(records, key=key):
        best = max(h["metric"] for h in r["history"])
        solved = f"{r['samples_to_solve']:,}" if r["samples_to_solve"] else "-"
        seen = f"{r['samples_seen']:,}" + (" (cut)" if r.get("ladder_cut") else "")
        rows.append(f"| {line_name(r)} | {r['task_options']['symbols']} | {r['depth']} | {r['channels']} | {r['seed']} "
                    f"| {seen} | {solved} | {r['test_metric']:.3f} | {best:.3f} "
                    f"| {r['ladder_wall_s']:.0f} | {r['device']} |")
    return "\n".join(rows) + "\n"


def gradient_probe(depths=(1, 4, 10), channels: int = 32, symbols: int = 20,
                   configs=("3d-cn", "3d")) -> str:
    """What an untrained model passes from a symbol to where it must be recalled, per depth.

    For each of ``configs`` (3D tLSTM+CN and 3D tLSTM (no CN) by default; knob strings such as
    ``3d-cn:input_init=normal`` too), M = ``channels``, one batch of 15 memorization
    samples, eager float32 and float64: the gradient norm of the NLL at the first answer
    position (t = n+1) w.r.t. the projected input of the symbol it must recall (z_1), of the
    leading ``-`` (z_0) and of its own input (z_t), and of the last answer position w.r.t.
    its symbol (z_n); and the channel std of the memory cell along the tensor's diagonal,
    input corner to output corner, at step 2n (how far a signal gets forward).
    """
    import torch

    from tlstm_bench.models import build_model
    from tlstm_bench.models.tlstm import eager_steps, run_eager
    from tlstm_bench.tasks import make_task

    torch.set_num_threads(1)
    task = make_task("memorization", symbols=symbols)
    x, y = task.sample(15, torch.Generator().manual_seed(1))
    n = symbols
    lines = [f"M = {channels}, {n} symbols; d NLL(t) / d z_s (norm over batch and channels); c std along the diagonal "
             f"at step {2 * n}", "config L dtype | t=n+1: z_1 (its symbol) z_0 ('-') z_t (own) | t=2n: z_n | c std"]
    for config in configs:
        for depth in depths:
            for dtype in (torch.float32, torch.float64):
                torch.manual_seed(0)
                model = build_model(config, depth, channels=channels, vocab=65, implementation="eager").to(dtype)
                z = model.project_inputs(x)
                h, _ = run_eager(model, z, model.zero_state(15, z))
                logp = torch.log_softmax(model.read_out(h), -1)
                nll = [torch.nn.functional.nll_loss(logp[:, t], y[:, t]) for t in (n + 1, 2 * n)]
                g0 = torch.autograd.grad(nll[0], z, retain_graph=True)[0].norm(dim=(0, 2))
                g1 = torch.autograd.grad(nll[1], z)[0].norm(dim=(0, 2))
                p = model.tensor_size
                with torch.no_grad():
                    c = next(c for s, _, c in eager_steps(model, z.detach(), model.zero_state(15, z)) if s == 2 * n)
                std = c[:, [i * p + i for i in range(p)]].std(-1).mean(0)
                lines.append(f"{config} {depth} {str(dtype)[6:]} | {g0[1]:.2e} {g0[0]:.2e} {g0[n + 1]:.2e} | "
                             f"{g1[n]:.2e} | " + " ".join(f"{v:.0e}" for v in std.tolist()))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=f"slstm,2d,3d-cn,{TORCH_LSTM}")
    parser.add_argument("--symbols", default="3,5,10,20")
    parser.add_argument("--depths", default="1,4,10")
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--alphabet", type=int, default=64)
    parser.add_argument("--max-samples", type=int, default=DEFAULT_MAX_SAMPLES)
    parser.add_argument("--eval-every", type=int, default=1_500)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--knobs", default="", help='extra TrainSettings fields as JSON, e.g. \'{"batch_size": 30}\'')
    parser.add_argument("--clip", type=float, default=None,
                        help="probe: clip the gradient norm to this before each Adam step (not a training option)")
    parser.add_argument("--qbias", type=lambda t: (int(t.split(":")[0]), float(t.split(":")[1])), default=None,
                        help="probe: ENTRY:VALUE starts the memory-cell kernel bias of that kernel entry (row-major "
                             "offsets, 4 = the centre for K = 3, D = 3) at VALUE (tLSTMs with the memory convolution)")
    parser.add_argument("--variant", default="", help="a name for the knobs, appended to the record names")
    parser.add_argument("--skip", default="", help="config:depth pairs to leave out, e.g. 3d-cn:10")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=None, help="start no cell after this many seconds")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds after which running cells stop and record how far they got (ladder_cut)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--figure-only", action="store_true")
    parser.add_argument("--gradients", action="store_true",
                        help="print the gradient probe (OUT/gradients.txt) of --depths at --channels and stop")
    parser.add_argument("--probe-configs", default="3d-cn,3d",
                        help="the gradient probe's configurations, knob strings too "
                             "(3d-cn,3d-cn:input_init=normal,input_std=3)")
    args = parser.parse_args()
    if args.gradients:
        from tlstm_bench.sweeps.grid import split_configs

        text = gradient_probe(depths=[int(d) for d in args.depths.split(",")], channels=args.channels,
                              configs=split_configs(args.probe_configs))
        (args.out / "gradients.txt").write_text(text)
        print(text)
        return
    if not args.figure_only:
        cells = plan(args)
        print(f"{len(cells)} cells to run", flush=True)
        run_all(cells, args.jobs, args.time_limit)
    records = load_records(args.out)
    if records:
        (args.out / "summary.md").write_text(summary(records))
        print(summary(records))
        for cap in sorted({r["max_samples"] for r in records if r["channels"] == args.channels}):
            print("figure:", draw(records, args.out, args.channels, cap))


if __name__ == "__main__":
    main()
