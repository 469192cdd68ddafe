"""Deterministic work counters of one timed run: the gate's noise-free half (issue 12).

For one forward + loss (``fwd``) and one backward (``bwd``) of the run that
:mod:`~tlstm_bench.timing.protocol` times (batch 1, T timesteps), a
:class:`~torch.utils._python_dispatch.TorchDispatchMode` sees every ATen operator call and
counts, per pass:

* ``ops``: operator calls that are not views (a view makes no kernel and no memory). At
  batch 1 each is about one kernel launch on a GPU, which is what decides GPU runtime
  there; on a CPU each costs a dispatch. The mode sees the calls made inside the fast
  tLSTM's TorchScript loops and under its ``_AutoDispatchBelowADInplaceOrView`` guard:
  that guard skips the autograd keys only, and the Python dispatch key sits below them
  (checked by ``tests/test_counters.py``, which finds the loop's per-step calls);
* ``flops``: floating-point operations of the matrix products, counted as
  :class:`torch.utils.flop_counter.FlopCounterMode` counts them (2 per multiply-add, the
  bias add of ``addmm`` not counted, a backward product 2x its forward), plus the fused
  RNN layer kernels it does not know (``mkldnn_rnn_layer`` on a CPU, ``_cudnn_rnn`` on a
  GPU: the four-gate input and recurrent products of every step). Pointwise work is not
  counted, as in FlopCounterMode;
* ``bytes``: bytes of the tensors that operators create (a return that the schema does
  not mark as aliasing an input), summed over the pass: the allocation traffic, not the
  peak. Scratch memory a kernel allocates without dispatching is not seen.

The counts are integers and exactly reproducible: they depend on the code, the torch
version (its kernels and decompositions choose which ATen calls run), the device kind
(CPU and CUDA pick different kernels, e.g. ``mkldnn_rnn_layer`` vs ``_cudnn_rnn``), the
dtype and the gate's settings (M, T, configuration, depth), and on nothing else: not
the machine's speed or load, not the thread count. The gate compares them exactly.

Per timestep: the totals divided by T, like the runtime. For a tLSTM the per-step calls
are the same at every depth (the T + L - 1 sequential steps cost the same calls each);
for the fused sLSTM each layer is one more call of the fused layer kernel, linear in L
(``tests/test_counters.py`` asserts both shapes, the paper's claim in countable form).
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..vocab import TIMING_VOCAB, torch_device
from .protocol import Case, StepRun, cpu_settings

COUNTERS = ("ops_fwd", "ops_bwd", "flops_fwd", "flops_bwd", "bytes_fwd", "bytes_bwd")
_aten = torch.ops.aten


def _shape(t) -> tuple[int, ...]:
    return tuple(t.shape)


def _mm_flops(a, b) -> int:
    """2 n k m for (n, k) @ (k, m)."""
    (n, k), (_, m) = _shape(a), _shape(b)
    return 2 * n * k * m


def _bmm_flops(a, b) -> int:
    (batch, n, k), (_, _, m) = _shape(a), _shape(b)
    return 2 * batch * n * k * m


def _rnn_layer_flops(inp, w_ih, w_hh) -> int:
    """Every step's input and recurrent products: rows x (I + H) x gates, 2 per multiply-add.

    ``rows`` = steps x batch whatever the layout; ``w_ih`` (G, I), ``w_hh`` (G, H), G = 4H.
    """
    rows = inp.numel() // inp.shape[-1]
    return 2 * rows * (w_ih.shape[1] + w_hh.shape[1]) * w_ih.shape[0]


def _cudnn_rnn_flops(inp, weights, stride) -> int:
    """``_cudnn_rnn`` with its flat weight list, ``stride`` tensors per layer (w_ih, w_hh, ...)."""
    rows = inp.numel() // inp.shape[-1]
    return sum(2 * rows * (weights[i].shape[1] + weights[i + 1].shape[1]) * weights[i].shape[0]
               for i in range(0, len(weights), stride))


def op_flops(func, args) -> int:
    """FLOPs of one ATen call (0 for anything but the products listed here)."""
    packet = func.overloadpacket
    if packet is _aten.mm:
        return _mm_flops(args[0], args[1])
    if packet is _aten.addmm or packet is _aten.addmm_:  # addmm_: the fast tLSTM's deferred dW^h
        return _mm_flops(args[1], args[2])
    if packet is _aten.bmm:
        return _bmm_flops(args[0], args[1])
    if packet is _aten.baddbmm or packet is _aten.baddbmm_:
        return _bmm_flops(args[1], args[2])
    if packet is _aten.mkldnn_rnn_layer:
        return _rnn_layer_flops(args[0], args[1], args[2])
    if packet is _aten.mkldnn_rnn_layer_backward:  # input and weight gradients: 2x the forward
        return 2 * _rnn_layer_flops(args[0], args[1], args[2])
    if packet is _aten._cudnn_rnn:
        return _cudnn_rnn_flops(args[0], args[1], args[2])
    if packet is _aten._cudnn_rnn_backward:
        return 2 * _cudnn_rnn_flops(args[0], args[1], args[2])
    return 0


def _created_bytes(func, out) -> int:
    """Bytes of the returned tensors that the schema says are new (not an alias of an input)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = 0
    for ret, value in zip(func._schema.returns, outs):
        if ret.alias_info is not None:
            continue
        for t in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(t, torch.Tensor):
                total += t.untyped_storage().nbytes()
    return total


class OpCounter(TorchDispatchMode):
    """Counts operator calls, FLOPs and created bytes of everything run inside it."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in torch._dynamo.disable unless told not to;
        # nothing here is compiled, and importing torch._dynamo (and sympy) on first use
        # took 2-8 s of the gate's 30 s here.
        return False

    def __init__(self):
        super().__init__()
        self.ops = 0
        self.flops = 0
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            self.ops += 1
            self.flops += op_flops(func, args)
            self.bytes += _created_bytes(func, out)
        return out


def count_run(run: StepRun) -> dict[str, int]:
    """The counters of one forward + loss and one backward of ``run``."""
    for p in run.model.parameters():
        p.grad = None
    with OpCounter() as fwd:
        loss = run.loss()
    with OpCounter() as bwd:
        loss.backward()
    return {"ops_fwd": fwd.ops, "ops_bwd": bwd.ops, "flops_fwd": fwd.flops, "flops_bwd": bwd.flops,
            "bytes_fwd": fwd.bytes, "bytes_bwd": bwd.bytes}


def count_cases(cases: Iterable[Case], *, channels: int, seq_len: int, device: str = "cpu",
                vocab: int | None = TIMING_VOCAB, seed: int = 0) -> dict[Case, dict[str, int]]:
    """Counters of each case, built as :func:`~tlstm_bench.timing.protocol.measure_cases` builds it.

    One untimed run first, so lazy initialisation (TorchScript compilation, weight
    packing) is not counted; the count is of the steady-state run that is timed.
    """
    dev = torch_device(device)
    out = {}
    with cpu_settings(1):
        for case in cases:
            run = StepRun(case, channels=channels, budget=None, vocab=vocab, input_size=None, output_size=None,
                       seq_len=seq_len, device=dev, dtype=torch.float32, seed=seed)
            run()
            out[case] = count_run(run)
    return out
