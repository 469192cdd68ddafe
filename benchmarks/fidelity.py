"""The cheap measurements behind docs/fidelity.md: what each reading of the paper changes.

    python benchmarks/fidelity.py            # seconds on a laptop CPU; prints Markdown tables

1. Parameter counting (SPEC section 7): the paper's M at 10M parameters and 205 symbols
   against the tool's solver, the full counts at the paper's M, and Table 1's 50.1M.
2. Flush inputs (SPEC section 3): the L-1 flush steps feed x = 0, so z = b^x. Feeding
   z = 0 instead changes no output of a separable model (y_t cannot see any input after
   t, flush inputs included); it does change 3D tLSTM+LN at L >= 2, which is not separable.
3. Normalisation epsilon (SPEC section 5): LN/CN divide by sqrt(var + 1e-5); the paper
   writes the standard deviation sigma. Largest change of the outputs of a random float64
   model when eps is 1e-12 instead (sigma alone is 0/0 on a constant location).
4. The loss's scale (docs/fidelity.md, "Suspects ruled out"): the tool minimises the NLL
   averaged over every position, the paper sums it over time (appendix D.1). Adam's steps
   do not depend on a constant scale of the loss unless a gradient is near its eps (1e-8):
   the parameter gradients of an untrained 3D tLSTM+CN at the paper's memorization size,
   and the fraction of a full first Adam step they get, g / (|g| + eps), under each loss.

Sections 1-3 are float64 on random models (seeded), on the eager loop; nothing here trains.
The training comparison of the two memory-cell windows is ``benchmarks/solve_small.py``
with ``--configs 3d-cn,3d-cn:window=appendix`` (docs/fidelity.md gives the numbers).
"""

from __future__ import annotations

import torch

from tlstm_bench.models import CONFIG_NAMES, build_model, count_params, solve_channels
from tlstm_bench.models import tlstm as tlstm_module

VOCAB = 205
PAPER_M = {"slstm": 1120, "2d": 901, "2d-m": 901, "2d-f": 1120, "3d": 522, "3d-ln": 522, "3d-cn": 522}


def counting() -> None:
    print("## 1. Parameter counts at 10M, 205 symbols\n")
    print("| config | paper M | tool M at 10,000,000 (L=1..4) | full count at paper M (L=4) | "
          "tool M at 10 x 2^20 (L=4) |")
    print("|---|---|---|---|---|")
    for config, paper in PAPER_M.items():
        tool = sorted({solve_channels(config, d, 10_000_000, VOCAB, VOCAB) for d in (1, 2, 3, 4)})
        full = count_params(config, 4, paper, VOCAB, VOCAB).total
        binary = solve_channels(config, 4, 10 * 2**20, VOCAB, VOCAB)
        print(f"| {config} | {paper} | {'/'.join(map(str, tool))} | {full:,} | {binary} |")
    total = count_params("3d-cn", 6, 1200, VOCAB, VOCAB).total
    print(f"\nTable 1, 3D tLSTM+CN L=6 M=1200: full count {total:,} = {total / 1e6:.2f}e6 = "
          f"{total / 2**20:.2f} x 2^20 (the paper prints 50.1M)\n")


def _outputs(model, x):
    with torch.no_grad():
        return model(x)[0]


def _random_model(config, depth, channels=8):
    torch.manual_seed(0)
    model = build_model(config, depth, input_size=3, output_size=4, channels=channels,
                        implementation="eager").double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return model


def flush() -> None:
    print("## 2. Flush steps: z = b^x (the tool) vs z = 0\n")
    print("| config | L=1 | L=2 | L=3 | L=4 |")
    print("|---|---|---|---|---|")
    x = torch.randn(2, 12, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for config in [c for c in CONFIG_NAMES if c != "slstm"]:
        gaps = []
        for depth in (1, 2, 3, 4):
            model = _random_model(config, depth)
            with_bias = _outputs(model, x)
            model.flush_input = lambda batch, m=model: m.b_x.new_zeros(batch, m.channels)
            gaps.append((with_bias - _outputs(model, x)).abs().max().item())
        print(f"| {config} | " + " | ".join(f"{g:.1e}" for g in gaps) + " |")
    print("\n(largest |y| difference over 12 steps; the sLSTM has no flush steps)\n")


def epsilon() -> None:
    print("## 3. LN/CN: sqrt(var + 1e-5) vs sqrt(var + 1e-12)\n")
    print("| config | L | largest |y| difference | largest |y| |")
    print("|---|---|---|---|")
    x = torch.randn(2, 12, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    saved = tlstm_module.NORM_EPS
    for config in ("3d-ln", "3d-cn"):
        for depth in (1, 4):
            model = _random_model(config, depth, channels=32)
            y = _outputs(model, x)
            try:
                tlstm_module.NORM_EPS = 1e-12
                y_sigma = _outputs(model, x)
            finally:
                tlstm_module.NORM_EPS = saved
            print(f"| {config} | {depth} | {(y - y_sigma).abs().max().item():.1e} | {y.abs().max().item():.2f} |")
    print()


def loss_scale() -> None:
    import torch.nn.functional as F

    from tlstm_bench.tasks import make_task

    print("## 4. The loss's scale and Adam's eps (1e-8): 3d-cn, memorization of 20 symbols, M = 100, "
          "batch 15, untrained\n")
    print("| config | L | nonzero gradients | smallest 1% of |g| | smallest first step, mean NLL | "
          "same, summed over time |")
    print("|---|---|---|---|---|---|")
    task = make_task("memorization", symbols=20)
    x, y = task.sample(15, torch.Generator().manual_seed(0))
    for config in ("3d-cn", "3d-cn:cell_kernel=shift,input_init=normal,bias_init=torch7,recurrent_scale=2"):
        for depth in (1, 4, 10):
            torch.manual_seed(0)
            model = build_model(config, depth, vocab=65, channels=100)
            logits, _ = model(x)
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
            g = torch.cat([p.grad.abs().flatten() for p in model.parameters()]).double()
            live = g[g > 0]  # exact zeros: kernel entries that read only padding; no loss moves them
            low = torch.quantile(live[torch.randperm(live.numel(), generator=torch.Generator().manual_seed(0))
                                      [:1_000_000]], 0.01).item()
            steps = [(low * k / (low * k + 1e-8)) for k in (1, x.shape[1])]
            name = config if config == "3d-cn" else "3d-cn, the four knobs"
            print(f"| {name} | {depth} | {live.numel():,} of {g.numel():,} | {low:.1e} | "
                  f"{steps[0]:.4f} | {steps[1]:.4f} |")
    print("\n(a first Adam step is g / (|g| + eps) of a full one; summed over the T = 42 positions "
          "a gradient is 42x the mean's)\n")


if __name__ == "__main__":
    torch.set_num_threads(1)
    counting()
    flush()
    epsilon()
    loss_scale()
