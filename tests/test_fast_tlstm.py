"""The fast tLSTM paths equal the slow oracle: outputs, final state and every gradient."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.models import build_model
from tlstm_bench.models.tlstm import TLSTMState

PRESETS = ["2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn"]
# Beyond the presets (SPEC section 6): 4D, K=4 and K=5, norms on 2D, memory conv off with LN.
KNOBS = [
    "tlstm:dims=4,kernel=3",
    "tlstm:dims=2,kernel=4",
    "tlstm:dims=3,kernel=4,norm=ln",
    "tlstm:dims=2,kernel=5,norm=cn",
    "tlstm:dims=3,kernel=5,memory_conv=0,norm=cn",
    "tlstm:dims=2,kernel=5,memory_conv=0,norm=ln",
    # the memory-cell window as appendix A.2 writes it (window=appendix), which fast gets
    # from the model's cell_index alone
    "tlstm:dims=2,window=appendix",
    "3d:window=appendix",
    "3d-cn:window=appendix",
    "3d-ln:window=appendix",
    "tlstm:dims=2,kernel=4,window=appendix",
]


def _run(config, depth, implementation, *, batch=2, seq_len=4, channels=3):
    """Forward + a random linear loss on y and the final state; everything float64."""
    torch.manual_seed(0)
    model = build_model(config, depth, input_size=3, output_size=2, channels=channels,
                        implementation=implementation).double()
    with torch.no_grad():
        for p in model.parameters():  # off the initial values (gains 1, biases 0)
            p.add_(torch.randn_like(p) * 0.3)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, seq_len, 3, generator=g, dtype=torch.float64, requires_grad=True)
    shape = (batch, model.num_locations, channels)
    h0 = torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True)
    y, state = model(x, TLSTMState(h0, c0))
    loss = sum((t * torch.randn(t.shape, generator=g, dtype=torch.float64)).sum() for t in (y, state.h, state.c))
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    grads.update(x=x.grad, h0=h0.grad, c0=c0.grad)
    return y, state, grads


def _assert_same(config, depth, fast="fast", **kw):
    y_ref, s_ref, g_ref = _run(config, depth, "reference", **kw)
    y, s, g = _run(config, depth, fast, **kw)
    torch.testing.assert_close(y, y_ref, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(s.h, s_ref.h, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(s.c, s_ref.c, rtol=1e-9, atol=1e-10)
    assert g.keys() == g_ref.keys()
    for name in g_ref:
        if g_ref[name] is None:
            assert g[name] is None, name
        else:
            torch.testing.assert_close(g[name], g_ref[name], rtol=1e-8, atol=1e-9, msg=f"gradient of {name}")


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("config", PRESETS)
def test_fast_equals_oracle_presets(config, depth):
    _assert_same(config, depth)


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("config", KNOBS)
def test_fast_equals_oracle_knobs(config, depth):
    _assert_same(config, depth)


def test_fast_equals_oracle_flush_longer_than_input():
    """L-1 flush steps longer than the sequence (T=2, L=4): state after step T, outputs delayed."""
    _assert_same("2d", 4, seq_len=2)
    _assert_same("3d-cn", 3, seq_len=1, batch=1)


def test_fast_equals_eager_at_paper_size_float32():
    """Float32 at a realistic size (tokens, M=16, L=5): close to eager (the oracle is too slow here)."""
    out = {}
    for impl in ("eager", "fast"):
        torch.manual_seed(0)
        model = build_model("3d-cn", 5, vocab=11, channels=16, implementation=impl)
        x = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(2))
        y, state = model(x)
        (y.square().mean() + state.c.sum()).backward()
        out[impl] = [y, state.h, state.c] + [p.grad for p in model.parameters()]
    for a, b in zip(out["eager"], out["fast"]):
        # float32 sums in another order: compare relative to each tensor's largest entry
        assert (b - a).abs().max() <= 1e-4 * a.abs().max().clamp_min(1e-3)


@pytest.mark.parametrize("config", ["2d", "3d-cn", "tlstm:dims=2,kernel=4,memory_conv=0,norm=ln"])
def test_fast_gradcheck(config):
    torch.manual_seed(0)
    model = build_model(config, 2, input_size=2, output_size=2, channels=2, implementation="fast").double()
    g = torch.Generator().manual_seed(3)
    n = model.num_locations
    x = torch.randn(1, 3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(1, n, 2, generator=g, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(1, n, 2, generator=g, dtype=torch.float64, requires_grad=True)
    w_h = model.w_h.detach().clone().requires_grad_(True)

    def f(x, h0, c0, w_h):
        y, state = torch.func.functional_call(model, {"w_h": w_h}, (x, TLSTMState(h0, c0)))
        return y, state.h, state.c

    assert torch.autograd.gradcheck(f, (x, h0, c0, w_h), eps=1e-6, atol=1e-6, fast_mode=True)


def test_fast_streaming_equals_whole_sequence():
    torch.manual_seed(0)
    model = build_model("3d-cn", 2, vocab=7, channels=4, implementation="fast").double()
    x = torch.randint(0, 7, (2, 9), generator=torch.Generator().manual_seed(4))
    y_whole, s_whole = model(x)
    y1, s = model(x[:, :4])
    y2, s = model(x[:, 4:], s)
    torch.testing.assert_close(torch.cat([y1, y2], 1), y_whole)
    torch.testing.assert_close(s.c, s_whole.c)


def test_fast_without_grad():
    model = build_model("2d", 3, vocab=7, channels=4, implementation="fast")
    x = torch.randint(0, 7, (1, 5))
    with torch.no_grad():
        y, _ = model(x)
    model.implementation = "eager"
    with torch.no_grad():
        y_eager, _ = model(x)
    torch.testing.assert_close(y, y_eager, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour where CUDA is absent")
def test_cuda_graph_without_cuda_is_a_clean_error():
    model = build_model("2d", 2, vocab=5, channels=3, implementation="cuda-graph")
    with pytest.raises(UserError, match="needs CUDA"):
        model(torch.zeros(1, 3, dtype=torch.long))
    result = CliRunner().invoke(app, ["time", "2d", "--depths", "1", "--channels", "4", "--seq-len", "3",
                                      "--implementation", "cuda-graph", "--no-store"])
    assert result.exit_code == 2
    assert "needs CUDA" in result.output and "Traceback" not in result.output
