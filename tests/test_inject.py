"""The gate's test-only slowdown: real extra work in fast's step loops, results untouched."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tlstm_bench.errors import UserError
from tlstm_bench.models import build_model
from tlstm_bench.timing import inject
from tlstm_bench.timing.counters import count_run
from tlstm_bench.timing.protocol import Case, StepRun, cpu_settings


def _grads(config, depth, implementation):
    torch.manual_seed(0)
    model = build_model(config, depth, vocab=7, channels=6, implementation=implementation)
    x = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(1))
    y, state = model(x)
    (y.square().sum() + state.h.sum() + state.c.sum()).backward()
    return [y, state.h, state.c] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("config", ["2d", "3d-cn", "3d-ln", "2d-m"])
@pytest.mark.parametrize("name", ["uniform-1.5x", "uniform-3x"])
def test_injected_results_equal_fast_bit_for_bit(config, name):
    # The extra passes write only scratch copies: outputs, state and every gradient are
    # exactly fast's (same ops in the same order on the real buffers).
    for a, b in zip(_grads(config, 3, "fast"), _grads(config, 3, inject.implementation(name))):
        assert torch.equal(a, b)


def _counts(config, depth, implementation):
    with cpu_settings(1):
        run = StepRun(Case(config, depth, implementation), channels=8, budget=None, vocab=11, input_size=None,
                   output_size=None, seq_len=20, device=torch.device("cpu"), dtype=torch.float32, seed=0)
        run()
        return count_run(run)


def test_injection_does_real_work_that_the_counters_see():
    base = _counts("2d", 4, "fast")
    slow = _counts("2d", 4, inject.implementation("uniform-3x"))
    # 2.6 extra passes over the T + L - 1 = 23 steps: 2 whole ones and 14 more steps,
    # each step the loop's own calls (a few more for the scratch copies and narrowing).
    per_step_fwd = _counts("2d", 4, "fast")["ops_fwd"] - _counts("2d", 3, "fast")["ops_fwd"]
    assert slow["ops_fwd"] - base["ops_fwd"] >= (2 * 23 + 14) * per_step_fwd
    assert slow["flops_fwd"] > 3 * base["flops_fwd"] // 2 and slow["bytes_fwd"] > base["bytes_fwd"]
    assert slow["ops_bwd"] > base["ops_bwd"] + 2 * 23 * 10
    # "growing": nothing extra at L=1.
    assert _counts("2d", 1, inject.implementation("growing-1.5x")) == _counts("2d", 1, "fast")


def test_pass_lengths():
    assert inject.pass_lengths(10, 0.65) == [6]
    assert inject.pass_lengths(10, 2.6) == [10, 10, 6]
    assert inject.pass_lengths(10, 0.0) == []


def test_registered_only_on_demand_and_unknown_names_are_user_errors():
    # A fresh process that loads the models and the gate lists no test-only implementation
    # (train --help, time and sweeps list TLSTM_IMPLEMENTATIONS).
    code = ("import tlstm_bench.timing.regress; from tlstm_bench.models import TLSTM_IMPLEMENTATIONS as t; "
            "print(sorted(t))")
    names = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "fast" in names and "+" not in names
    with pytest.raises(UserError, match="uniform-1.5x"):
        inject.implementation("twice")
