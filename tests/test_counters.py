"""The gate's deterministic counters: what they see, that they are exact, and their shape vs depth."""

from __future__ import annotations

import collections
import functools

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from tlstm_bench.timing.counters import COUNTERS, OpCounter, count_cases, count_run
from tlstm_bench.timing.protocol import Case, StepRun, cpu_settings

M = 8


@pytest.fixture(autouse=True, scope="module")
def _one_thread_flushed():
    """As count_cases and the timing run: one thread, subnormals flushed (else this file is slow)."""
    with cpu_settings(1):
        yield


def _run(config, depth, implementation=None, seq_len=10, channels=M):
    run = StepRun(Case(config, depth, implementation), channels=channels, budget=None, vocab=11, input_size=None,
               output_size=None, seq_len=seq_len, device=torch.device("cpu"), dtype=torch.float32, seed=0)
    run()  # as count_cases does: lazy initialisation is not counted
    return run


@functools.lru_cache(maxsize=None)
def _counts(config, depth, implementation=None, seq_len=10, channels=M):
    return count_run(_run(config, depth, implementation, seq_len, channels))


class _Names(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[str(func)] += 1
        return func(*args, **(kwargs or {}))


def test_op_counter_on_known_ops():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    with OpCounter() as c:
        out = a @ b  # mm: 2*3*4*5 FLOPs, a new 3x5 float32 tensor
        out.view(15)  # a view: no kernel, no memory
        out.add_(1.0)  # in place: a kernel, no new memory
        torch.mul(out, 2.0, out=out)  # out=: a kernel, no new memory
    assert (c.ops, c.flops, c.bytes) == (3, 2 * 3 * 4 * 5, 3 * 5 * 4)


@pytest.mark.parametrize("config", ["2d", "3d-cn"])
def test_sees_every_step_of_the_torchscript_loops_below_autograd(config):
    # The fast tLSTM's loops are TorchScript run under _AutoDispatchBelowADInplaceOrView;
    # the dispatch mode still sees each step's recurrent product (one addmm.out forward,
    # one mm backward per step), T + L - 1 steps.
    run = _run(config, 3)
    with _Names() as names:
        run()
    steps = 10 + 3 - 1
    assert names.calls["aten.addmm.out"] == steps
    assert names.calls["aten.mm.default"] >= steps


def test_counts_are_exactly_reproducible_and_thread_independent():
    cases = [Case("2d", 2), Case("3d-cn", 2), Case("slstm", 2)]
    first = count_cases(cases, channels=M, seq_len=10, vocab=11)
    assert count_cases(cases, channels=M, seq_len=10, vocab=11) == first
    torch.set_num_threads(2)
    try:
        again = {c: count_run(_run(c.config, c.depth)) for c in cases}
    finally:
        torch.set_num_threads(1)
    assert again == {c: v for c, v in first.items()}
    assert all(set(v) == set(COUNTERS) and all(isinstance(x, int) and x > 0 for x in v.values())
               for v in first.values())


def _fcm(run) -> tuple[int, int]:
    for p in run.model.parameters():
        p.grad = None
    with FlopCounterMode(display=False) as f:
        loss = run.loss()
    fwd = f.get_total_flops()
    with FlopCounterMode(display=False) as f:
        loss.backward()
    return fwd, f.get_total_flops()


@pytest.mark.parametrize("config", ["2d", "2d-m", "2d-f", "3d", "3d-cn"])
@pytest.mark.parametrize("depth", [1, 3])
def test_flops_match_torch_flop_counter(config, depth):
    eager = _run(config, depth, "eager")
    fcm_fwd, fcm_bwd = _fcm(eager)
    own = count_run(eager)
    assert (own["flops_fwd"], own["flops_bwd"]) == (fcm_fwd, fcm_bwd)  # our formulas = torch's on the same ops
    fast = _counts(config, depth, "fast")
    assert fast["flops_fwd"] == fcm_fwd  # the fast path does the same products (its addmm_ included)
    if config == "2d-m":  # no memory convolution: the backward products are the same too
        assert fast["flops_bwd"] == fcm_bwd
    else:  # the fast path takes the memory kernel's window gradient as a pointwise product, not a bmm
        assert fast["flops_bwd"] < fcm_bwd


@pytest.mark.parametrize("depth", [1, 3])
def test_fused_slstm_flops_match_the_plain_loop(depth):
    # FlopCounterMode does not know mkldnn_rnn_layer; our formula for it must give what it
    # counts on the per-cell loop (same products). Backward: the fused kernel also takes
    # the gradient of each layer's zero initial state, which the loop skips (2*B*4M*M each).
    fused = _counts("slstm", depth, "fused")
    loop_fwd, loop_bwd = _fcm(_run("slstm", depth, "loop"))
    assert fused["flops_fwd"] == loop_fwd
    assert fused["flops_bwd"] - loop_bwd == depth * 2 * 4 * M * M


# ---- the paper's claim in countable form --------------------------------------------------

@pytest.mark.parametrize("config", ["2d", "3d-cn"])
def test_tlstm_calls_per_step_are_constant_in_depth(config):
    # calls(T, L) = c + k (T + L - 1) for L >= 2: a deeper tLSTM costs the same calls per
    # step; L only adds its L - 1 flush steps (L = 1 has no flush input to concatenate).
    for counter in ("ops_fwd", "ops_bwd"):
        k = _counts(config, 2, seq_len=11)[counter] - _counts(config, 2, seq_len=10)[counter]
        assert k > 10
        rest = {_counts(config, depth, seq_len=t)[counter] - k * (t + depth - 1)
                for depth in (2, 3, 5) for t in (10, 13)}
        assert len(rest) == 1, counter


def test_slstm_calls_grow_linearly_with_depth():
    # Layer by layer: each layer is one more call of the fused layer kernel (which runs its T
    # steps inside), so calls = a + b L, b > 0, and do not depend on T.
    for counter in ("ops_fwd", "ops_bwd"):
        counts = [_counts("slstm", depth)[counter] for depth in (1, 2, 3, 4, 5)]
        steps = {b - a for a, b in zip(counts, counts[1:])}
        assert len(steps) == 1 and steps.pop() > 0
        assert _counts("slstm", 3, seq_len=17)[counter] == counts[2]
        # The plain per-cell loop: T cells per layer, so per-timestep calls are linear in L too.
        loop = [_counts("slstm", depth, "loop")[counter] for depth in (1, 2, 3)]
        assert loop[2] - loop[1] == loop[1] - loop[0] >= 10


def test_slstm_flops_grow_linearly_with_depth():
    flops = [_counts("slstm", depth)["flops_fwd"] for depth in (1, 2, 3, 4)]
    assert len({b - a for a, b in zip(flops, flops[1:])}) == 1
