"""The sLSTM wavefront and fused implementations equal the plain per-cell loop (float64)."""

from __future__ import annotations

import pytest
import torch

from tlstm_bench.models import build_model
from tlstm_bench.models.slstm import SLSTMState


def _run(depth, seq_len, implementation, batch=2, channels=4):
    torch.manual_seed(0)
    model = build_model("slstm", depth, input_size=3, output_size=2, channels=channels,
                        implementation=implementation).double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, seq_len, 3, generator=g, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(depth, batch, channels, generator=g, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(depth, batch, channels, generator=g, dtype=torch.float64, requires_grad=True)
    y, state = model(x, SLSTMState(h0, c0))
    loss = sum((t * torch.randn(t.shape, generator=g, dtype=torch.float64)).sum() for t in (y, state.h, state.c))
    loss.backward()
    return [y, state.h, state.c, x.grad, h0.grad, c0.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("implementation", ["wavefront", "fused"])
@pytest.mark.parametrize("depth,seq_len", [(1, 3), (2, 1), (3, 4), (5, 2), (4, 7)])
def test_equals_loop(implementation, depth, seq_len):
    names = ["y", "h", "c", "dx", "dh0", "dc0", "dw_x", "db_x", "dw_y", "db_y", "dw_ih", "dw_hh", "db"]
    for name, a, b in zip(names, _run(depth, seq_len, "loop"), _run(depth, seq_len, implementation)):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12, msg=name)
