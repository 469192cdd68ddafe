"""Test-only slowdowns of the fast tLSTM, to measure what the CI gate catches (issue 12).

An injection makes the step loops of ``fast`` (:mod:`tlstm_bench.models.fast_tlstm`) do
REAL extra work: after the real forward loop, the same TorchScript loop runs again over
the first ``fraction x S`` steps (S = T + L - 1) on scratch copies of the buffers, and
likewise the backward loop before the real one. The copies keep the results exact (the
tests check outputs and gradients equal ``fast``'s); the extra work is the same ATen
calls on the same sizes as the real steps, so it costs what a slower loop would, and it
moves the counters as a real regression of that kind would. A sleep would do neither.

``fraction`` is the extra share of the step loops' work. The loops are most but not all
of a timed run (input projection, read-out, loss and the deferred weight gradient are
outside them: the loops were 70-90% of the quick gate's tLSTM runs here), so the
fractions are set for the WHOLE run to slow by the factor in the name: 0.65 extra loop
work measured 1.4-1.6x, 2.6 measured 2.7-3.3x (2-core CPU, M=64, T=100, shared
machine). ``benchmarks/gate_power.py`` measures and prints the real factor every time.

Why a separate implementation rather than a switch inside ``fast``: the normal path then
has no per-step branch and no extra argument; it only reads the loops from its geometry
object once per call. The gate selects an injection through ``$TLSTM_BENCH_GATE_INJECT``
(read by the CLI like the older ``$TLSTM_BENCH_REGRESS_DELAY``), which registers the
implementation ``fast+NAME`` only then; no user-facing option or listing shows it.
"""

from __future__ import annotations

import functools
from typing import Callable

from ..errors import UserError

INJECT_ENV = "TLSTM_BENCH_GATE_INJECT"

# Extra share of the step loops' work, by depth. "growing": none at L=1, the 1.5x one at
# L=4 (the quick gate's deepest), growing linearly beyond.
INJECTIONS: dict[str, Callable[[int], float]] = {
    "uniform-1.5x": lambda depth: 0.65,
    "growing-1.5x": lambda depth: 0.65 * (depth - 1) / 3,
    "uniform-3x": lambda depth: 2.6,
}


def pass_lengths(steps: int, fraction: float) -> list[int]:
    """Steps of each extra pass: whole passes over all steps, then one over the rest."""
    whole = int(fraction)
    rest = round((fraction - whole) * steps)
    return [steps] * whole + ([rest] if rest > 0 else [])


def _head(t, k: int, clone: bool = True):
    """The first k steps of a step-indexed buffer (the empty placeholder stays as it is)."""
    if t.numel() == 0:
        return t
    return t[:k].clone() if clone else t[:k]


def _slow_forward(fraction: float):
    from ..models.fast_tlstm import _forward_loop

    def loop(src, cs, acts, tns, ccs, means, rstds, *rest):
        _forward_loop(src, cs, acts, tns, ccs, means, rstds, *rest)
        for k in pass_lengths(acts.shape[0], fraction):
            # Step s reads src[s], cs[s] and writes slot s+1: a pass over k steps needs k+1 slots.
            _forward_loop(_head(src, k + 1), _head(cs, k + 1), _head(acts, k), _head(tns, k), _head(ccs, k),
                          _head(means, k), _head(rstds, k), *rest)
    return loop


def _slow_backward(fraction: float):
    from ..models.fast_tlstm import _backward_loop

    def loop(src, cs, acts, tns, ccs, means, rstds, w2t, gain, hidx, cidx, dsrc, dcs, das, dns, *rest):
        for k in pass_lengths(acts.shape[0], fraction):
            # Read-only buffers are narrowed; the ones the loop writes are copied.
            _backward_loop(_head(src, k + 1, False), _head(cs, k + 1, False), _head(acts, k, False),
                           _head(tns, k, False), _head(ccs, k, False), _head(means, k, False),
                           _head(rstds, k, False), w2t, gain, hidx, cidx, _head(dsrc, k + 1), _head(dcs, k + 1),
                           _head(das, k), _head(dns, k), *rest)
        _backward_loop(src, cs, acts, tns, ccs, means, rstds, w2t, gain, hidx, cidx, dsrc, dcs, das, dns, *rest)
    return loop


def _run_injected(model, z, state, *, name: str):
    from ..models.fast_tlstm import run_fast

    fraction = INJECTIONS[name](model.depth)
    if fraction <= 0:
        return run_fast(model, z, state)
    return run_fast(model, z, state, loops=(_slow_forward(fraction), _slow_backward(fraction)))


def check_injection(name: str | None) -> str | None:
    if name and name not in INJECTIONS:
        raise UserError(f"unknown {INJECT_ENV} value {name!r}; use one of {', '.join(INJECTIONS)}")
    return name or None


def implementation(name: str) -> str:
    """Register the tLSTM implementation ``fast+NAME`` (``fast`` slowed by ``NAME``) and return its name."""
    from ..models import TLSTM_IMPLEMENTATIONS

    check_injection(name)
    label = f"fast+{name}"
    TLSTM_IMPLEMENTATIONS.setdefault(label, functools.partial(_run_injected, name=name))
    return label
