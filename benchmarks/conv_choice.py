"""Which cross-layer convolution for the fast tLSTM path on a CPU: gather, conv, or unfold?

The tLSTM step's cross-layer convolution (SPEC section 3 step 3) at batch 1, M=100,
L=10 (2D: P=10 locations; 3D: P x P = 100), timed three ways with the same FLOPs:

* gather: ``index_select`` of every location's K^(D-1) window + one ``addmm`` (what
  ``fast`` does; works for any D and K);
* conv: ``conv1d`` (2D) / ``conv2d`` (3D) over the padded Hcat grid (D <= 4 only);
* unfold: ``Tensor.unfold`` (2D) / ``F.unfold`` (3D) + ``mm``.

Forward only, and forward + the gradient w.r.t. the input (what the backward loop does
each step; the weight gradient is deferred to one product in every variant). Repeats
are interleaved; medians in microseconds per step. Usage: python benchmarks/conv_choice.py
"""

from __future__ import annotations

import statistics
import time

import torch
from torch.nn import functional as F

from tlstm_bench.models import build_model


def variants(dims: int, m: int = 100, depth: int = 10, k: int = 3):
    model = build_model("2d" if dims == 2 else "3d", depth, vocab=5, channels=m)
    p, n, kd, gc = model.tensor_size, model.num_locations, k ** (dims - 1), model.gate_channels
    hidx = model.hidden_index.reshape(-1)
    w2 = model.w_h.detach().reshape(kd * m, gc).contiguous()
    b_h = model.b_h.detach()
    src = torch.randn(1, 2 + n, m)
    grid = torch.randn(1, m, *([p + 2] * (dims - 1)))  # Hcat with one pad on each side
    wconv = torch.randn(gc, m, *([k] * (dims - 1)))
    da = torch.randn(n, gc)
    dgrid = torch.randn(1, gc, *([p] * (dims - 1)))
    conv = F.conv1d if dims == 2 else F.conv2d
    conv_t = F.conv_transpose1d if dims == 2 else F.conv_transpose2d

    def gather_fwd():
        torch.addmm(b_h, src.index_select(1, hidx).view(n, kd * m), w2)

    def gather_fwd_bwd():
        gather_fwd()
        torch.zeros(1, 2 + n, m).index_add_(1, hidx, torch.mm(da, w2.t()).view(1, n * kd, m))

    def conv_fwd():
        conv(grid, wconv, b_h)

    def conv_fwd_bwd():
        conv_fwd()
        conv_t(dgrid, wconv)

    def unfold_fwd():
        if dims == 2:
            cols = grid.unfold(2, k, 1)[0].permute(1, 2, 0).reshape(p, k * m)  # (P, K*M)
        else:
            cols = F.unfold(grid, k)[0].t()  # (P*P, M*K*K)
        torch.addmm(b_h, cols, w2)

    def unfold_fwd_bwd():
        unfold_fwd()
        dcols = torch.mm(da, w2.t())
        if dims == 2:
            torch.zeros(1, 2 + n, m).index_add_(1, hidx, dcols.view(1, n * kd, m))  # fold has no 1D form
        else:
            F.fold(dcols.t().unsqueeze(0), (p + 2, p + 2), k)

    return {"gather": (gather_fwd, gather_fwd_bwd), "conv": (conv_fwd, conv_fwd_bwd),
            "unfold": (unfold_fwd, unfold_fwd_bwd)}


def main(rounds: int = 15, inner: int = 50) -> None:
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    for dims in (2, 3):
        fns = variants(dims)
        samples = {(name, part): [] for name in fns for part in ("fwd", "fwd+dinput")}
        for fn_pair in fns.values():
            for fn in fn_pair:
                for _ in range(5):
                    fn()
        for _ in range(rounds):
            for name, (fwd, fwd_bwd) in fns.items():
                for part, fn in (("fwd", fwd), ("fwd+dinput", fwd_bwd)):
                    t0 = time.perf_counter()
                    for _ in range(inner):
                        fn()
                    samples[name, part].append((time.perf_counter() - t0) / inner * 1e6)
        print(f"{dims}D tLSTM, L=10, M=100, batch 1, one thread: us per step (median of {rounds})")
        for part in ("fwd", "fwd+dinput"):
            line = ", ".join(f"{name} {statistics.median(samples[name, part]):.0f}" for name in fns)
            print(f"  {part:11s} {line}")


if __name__ == "__main__":
    main()
