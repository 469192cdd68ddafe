"""Every implementation equals its slow oracle: outputs, final state and every gradient.

One matrix. The tLSTM's sequence loops (``eager``, ``fast``, ``triton``) are
checked against ``reference`` (models/oracle.py, the literal per-location loop), the sLSTM's
(``fused``, ``wavefront``) against ``loop``. The oracle runs in float64 on the CPU; each
implementation runs where it can and is skipped with the reason elsewhere: ``triton`` needs the gpu extra and a GPU or Triton's CPU interpreter (``tests/conftest.py``
switches it on; ``TLSTM_TRITON_TEST_DEVICE=cuda`` runs it compiled), where it runs in float32 at
tiny sizes. Compared: y, h_T, c_T, and the gradients of every parameter, the input and the
initial state. ``cuda-graph`` (the whole step captured as one CUDA graph, a way of running a
step rather than a loop) is compared with ``eager`` step for step on a GPU at the end.
"""

from __future__ import annotations

import os

import pytest
import torch
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.models import build_model, parse_config
from tlstm_bench.models.tlstm import build_index_maps
from tlstm_bench.vocab import CONFIG_NAMES, ORACLE_IMPLEMENTATION

from model_helpers import KNOB_CONFIGS, TLSTM_CONFIGS, outputs_and_grads, perturb

TRITON_DEVICE = os.environ.get("TLSTM_TRITON_TEST_DEVICE", "cpu")  # conftest.py set TRITON_INTERPRET=1 for "cpu"

# Knob combinations the fast loop is checked on beyond the presets and model_helpers.KNOB_CONFIGS
# (SPEC section 6): 3D with K=4 and LN, 2D with K=5 and CN, memory conv off with CN and LN, and
# the appendix window on LN/CN and even K (fast gets the window from the model's cell_index).
FAST_KNOBS = [
    "tlstm:dims=4,kernel=3",
    "tlstm:dims=2,kernel=4",
    "tlstm:dims=3,kernel=4,norm=ln",
    "tlstm:dims=2,kernel=5,norm=cn",
    "tlstm:dims=3,kernel=5,memory_conv=0,norm=cn",
    "tlstm:dims=2,kernel=5,memory_conv=0,norm=ln",
    "tlstm:dims=2,window=appendix",
    "3d:window=appendix",
    "3d-cn:window=appendix",
    "3d-ln:window=appendix",
    "tlstm:dims=2,kernel=4,window=appendix",
]
TRITON_KNOBS = ["tlstm:dims=4,kernel=3", "tlstm:dims=2,kernel=5,norm=cn", "tlstm:dims=3,kernel=4,memory_conv=0,norm=ln"]
# T < L: the L-1 flush steps outlast the input; the state handed back (after step T) comes
# before the first output.
FLUSH = [("2d", 4, dict(seq_len=2)), ("3d-cn", 3, dict(seq_len=1, batch=1))]
SLSTM_SHAPES = [(1, 3), (2, 1), (3, 4), (5, 2), (4, 7)]  # (depth, T)

# Per implementation: (values rtol, atol), (gradients rtol, atol); None: relative to the largest
# entry of each tensor (float32 sums in another order than the float64 oracle).
TOLERANCES = {
    "eager": ((1e-10, 1e-12), (1e-9, 1e-11)),
    "fast": ((1e-9, 1e-10), (1e-8, 1e-9)),
    "triton": None,
    "fused": ((1e-10, 1e-12), (1e-10, 1e-12)),
    "cudnn": ((1e-10, 1e-12), (1e-10, 1e-12)),
    "wavefront": ((1e-10, 1e-12), (1e-10, 1e-12)),
}
FLOAT32_RELATIVE = 2e-5


def _case(implementation: str, config: str, depth: int, **size):
    marks = [pytest.mark.triton] if implementation == "triton" else []
    extra = "".join(f"-{k}{v}" for k, v in size.items() if k in ("seq_len", "batch"))
    return pytest.param(implementation, config, depth, size, marks=marks, id=f"{implementation}-{config}-L{depth}{extra}")


def _cases() -> list:
    cases = [_case("eager", c, d) for c in TLSTM_CONFIGS + KNOB_CONFIGS for d in (1, 2, 3)]
    cases += [_case("fast", c, d) for c in TLSTM_CONFIGS for d in (1, 2, 3)]
    cases += [_case("fast", c, d) for c in FAST_KNOBS for d in (1, 2)]
    cases += [_case("fast", c, d, **size) for c, d, size in FLUSH]
    tiny = dict(seq_len=3, channels=4)  # the interpreter runs every kernel op in numpy
    cases += [_case("triton", c, d, **tiny) for c in TLSTM_CONFIGS for d in (1, 2, 3)]
    cases += [_case("triton", c, 2, **tiny) for c in TRITON_KNOBS]
    cases += [_case("triton", c, d, **{**tiny, **size}) for c, d, size in FLUSH]
    cases += [_case(impl, "slstm", d, seq_len=t, channels=4) for impl in ("fused", "cudnn", "wavefront")
              for d, t in SLSTM_SHAPES]
    cases += [_case("cudnn", "lstm", d, seq_len=t, channels=4) for d, t in SLSTM_SHAPES]  # the untied anchor
    return cases


def where_it_runs(implementation: str) -> tuple[str, torch.dtype]:
    """(device, dtype) to run ``implementation`` on here; skips the test where it cannot run."""
    if implementation == "triton":
        pytest.importorskip("triton")
        from tlstm_bench.models import triton_tlstm

        if TRITON_DEVICE == "cpu" and not triton_tlstm.INTERPRETED:
            pytest.fail("triton_tlstm was imported before TRITON_INTERPRET=1 was set (tests/conftest.py sets it)")
        if TRITON_DEVICE == "cuda" and not torch.cuda.is_available():
            pytest.skip("TLSTM_TRITON_TEST_DEVICE=cuda but CUDA is not available")
        return TRITON_DEVICE, torch.float32
    return "cpu", torch.float64


def assert_equal_to(want: dict, got: dict, tolerances) -> None:
    assert got.keys() == want.keys()
    for name, expected in want.items():
        if expected is None:
            assert got[name] is None, name
            continue
        assert got[name] is not None, name
        if tolerances is None:
            scale = expected.abs().max().clamp_min(1e-3)
            err = (got[name] - expected).abs().max()
            assert err <= FLOAT32_RELATIVE * scale, f"{name}: max error {err:.3g} vs scale {scale:.3g}"
        else:
            rtol, atol = tolerances[1] if name.startswith("grad") else tolerances[0]
            torch.testing.assert_close(got[name], expected, rtol=rtol, atol=atol, msg=name)


@pytest.mark.parametrize("implementation, config, depth, size", _cases())
def test_every_implementation_equals_the_oracle(implementation, config, depth, size):
    device, dtype = where_it_runs(implementation)
    oracle = ORACLE_IMPLEMENTATION[parse_config(config).kind]
    want = outputs_and_grads(config, depth, oracle, **size)
    got = outputs_and_grads(config, depth, implementation, dtype=dtype, device=device, **size)
    assert_equal_to(want, got, TOLERANCES[implementation])


def test_the_matrix_covers_every_registered_implementation():
    from tlstm_bench.models import SLSTM_IMPLEMENTATIONS, TLSTM_IMPLEMENTATIONS
    from tlstm_bench.models.lstm import LSTM_IMPLEMENTATIONS

    tested = {case.values[0] for case in _cases()}
    oracles = set(ORACLE_IMPLEMENTATION.values())
    # (timing.inject registers deliberately slowed copies of fast, "fast+NAME", for the gate's tests)
    registered = {n for n in (*TLSTM_IMPLEMENTATIONS, *SLSTM_IMPLEMENTATIONS, *LSTM_IMPLEMENTATIONS)
                  if not n.startswith("fast+")}
    assert tested | oracles == registered
    assert set(CONFIG_NAMES) - {"slstm"} <= {case.values[1] for case in _cases()}


# ---- beyond the matrix -----------------------------------------------------------------------
@pytest.mark.parametrize("implementation", ["eager", "fast"])
def test_the_oracle_catches_the_wrong_window(implementation):
    """The oracle implements the windows itself: give an appendix model the aligned index map
    and it no longer matches the oracle (the matrix's comparison can fail)."""
    model = perturb(build_model("2d:window=appendix", 3, input_size=3, output_size=2, channels=3,
                                implementation=implementation).double())
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    y = model(x)[0]
    model.implementation = "reference"
    y_ref = model(x)[0]
    torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-12)
    model.cell_index = build_index_maps(parse_config("2d"), model.tensor_size)[1]
    model.implementation = implementation
    assert (model(x)[0] - y_ref).abs().max() > 1e-6


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
    from tlstm_bench.timing import Case, StepRun

    with pytest.raises(UserError, match="needs CUDA"):
        StepRun(Case("2d", 2, "cuda-graph"), channels=3, budget=None, vocab=5, input_size=None, output_size=None,
                seq_len=3, device=torch.device("cpu"), dtype=torch.float32, seed=0)
    with pytest.raises(UserError, match="unknown implementation 'cuda-graph'"):
        build_model("2d", 2, vocab=5, channels=3, implementation="cuda-graph")  # a way to run a step, not a loop
    result = CliRunner().invoke(app, ["time", "2d", "--depths", "1", "--channels", "4", "--seq-len", "3",
                                      "--implementation", "cuda-graph", "--no-store"])
    assert result.exit_code == 2
    assert "needs CUDA" in result.output and "Traceback" not in result.output


@pytest.mark.skipif(not torch.cuda.is_available(), reason="cuda-graph needs CUDA")
@pytest.mark.parametrize("config", TLSTM_CONFIGS)
@pytest.mark.parametrize("depth", [1, 3])
def test_cuda_graph_step_equals_eager_in_float64_on_replay(config, depth):
    """The captured step (forward + loss + backward as one graph) against eager, on new data
    copied into its input buffers after the capture: loss and every parameter gradient."""
    from tlstm_bench.timing import Case, StepRun

    def run(impl):
        return StepRun(Case(config, depth, impl), channels=6, budget=None, vocab=7, input_size=None,
                       output_size=None, seq_len=5, device=torch.device("cuda"), dtype=torch.float64, seed=3)

    graphed, eager = run("cuda-graph"), run("eager")
    graphed()  # captures
    for data in range(2):
        x = torch.randint(0, 7, graphed.x.shape, generator=torch.Generator().manual_seed(data)).cuda()
        for r in (graphed, eager):
            r.x.copy_(x)
            r()
        torch.testing.assert_close(graphed.last_loss, eager.last_loss, rtol=1e-10, atol=1e-12)
        for name, g in eager.gradients().items():
            torch.testing.assert_close(graphed.gradients()[name], g, rtol=1e-9, atol=1e-11, msg=name)


# ---- the cuDNN weight buffer of the stacked LSTMs (issue 27) ------------------------------------
def cudnn_layout_on_the_cpu(weights, layers, hidden):
    """cuDNN's LSTM weight layout, laid out on the CPU: per layer W_ih, W_hh, b_ih, b_hh one after
    another, with a gap after each layer (so a layer's stride is not the tensors' own size), and
    each tensor of ``weights`` pointed into the buffer, as ``torch._cudnn_rnn_flatten_weight`` does."""
    gap = 5
    buffer = torch.zeros(sum(w.numel() for w in weights) + gap * layers, dtype=weights[0].dtype)
    offset = 0
    for i, w in enumerate(weights):
        buffer[offset:offset + w.numel()] = w.reshape(-1)
        w.set_(buffer.untyped_storage(), offset, w.shape)
        offset += w.numel() + (gap if i % 4 == 3 else 0)
    return buffer


@pytest.fixture
def cudnn_buffer_on_the_cpu(monkeypatch):
    """Call it, and every later move of an LSTM stack (``.to``, ``.double``) lays its weights out
    as cuDNN would."""
    from tlstm_bench.models import cudnn_weights

    def enable():
        monkeypatch.setattr(cudnn_weights, "cudnn_can_flatten", lambda tensor: True)
        monkeypatch.setattr(cudnn_weights, "_cudnn_flatten", cudnn_layout_on_the_cpu)

    cudnn_weights.cudnn_layout.cache_clear()
    yield enable
    cudnn_weights.cudnn_layout.cache_clear()


@pytest.mark.parametrize("config, implementation", [("lstm", "cudnn"), ("slstm", "fused"), ("slstm", "cudnn")])
@pytest.mark.parametrize("depth, seq_len", [(1, 3), (3, 4)])
def test_weights_in_one_cudnn_buffer_equal_the_oracle(cudnn_buffer_on_the_cpu, config, implementation, depth,
                                                       seq_len):
    """With the parameters as strided views into one buffer (cuDNN's layout) and the second bias a
    zero in it (the tied sLSTM's one call: its L copies made in one cat of that layout), outputs
    and every gradient still equal the loop oracle."""
    want = outputs_and_grads(config, depth, "loop", seq_len=seq_len, channels=4)  # parameters as built
    cudnn_buffer_on_the_cpu()
    got = outputs_and_grads(config, depth, implementation, seq_len=seq_len, channels=4)
    assert_equal_to(want, got, TOLERANCES[implementation])


def test_the_buffer_keeps_the_parameters_and_stays_one_buffer(cudnn_buffer_on_the_cpu):
    """The parameters keep their names, shapes and count, become views into one storage (the
    second bias too, not a parameter), and stay there through an optimiser step."""
    torch.manual_seed(0)
    plain = build_model("lstm", 3, vocab=5, channels=4).double()
    shapes = {n: p.shape for n, p in plain.named_parameters()}
    model = build_model("lstm", 3, vocab=5, channels=4)
    model.load_state_dict(plain.state_dict())
    cudnn_buffer_on_the_cpu()
    model = model.double()  # a move: flattened
    assert {n: p.shape for n, p in model.named_parameters()} == shapes
    storage = model.w_ih.untyped_storage().data_ptr()
    assert model.w_hh.untyped_storage().data_ptr() == storage == model.b.untyped_storage().data_ptr()
    assert model.second_bias().untyped_storage().data_ptr() == storage
    assert not model.w_ih.is_contiguous()  # layer l at l times the buffer's per-layer stride
    assert all(not (p is model.second_bias()) for p in model.parameters())
    for name, p in model.state_dict().items():
        torch.testing.assert_close(p, plain.state_dict()[name])
    x = torch.randint(0, 5, (2, 6))
    optimiser = torch.optim.Adam(model.parameters(), lr=0.1)
    model(x)[0].square().mean().backward()
    optimiser.step()
    assert model.w_ih.untyped_storage().data_ptr() == storage
    assert model.second_bias().abs().max() == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="cuDNN's weight buffer needs CUDA")
@pytest.mark.parametrize("config, implementation, depth", [("lstm", "cudnn", 1), ("lstm", "cudnn", 4),
                                                           ("slstm", "fused", 4), ("slstm", "cudnn", 1),
                                                           ("slstm", "cudnn", 4)])
def test_no_compaction_warning_on_cuda(config, implementation, depth):
    """On a GPU no cuDNN call warns that the weights are compacted at every call: ``lstm`` and the
    sLSTM's ``fused`` read them in place; the tied sLSTM's one-call ``cudnn`` makes the L copies
    cuDNN needs itself, in cuDNN's layout, so torch finds nothing to compact. Outputs and
    gradients equal the loop oracle there too (float64)."""
    import warnings

    from tlstm_bench.models.cudnn_weights import COMPACTION_WARNING

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # what a user's script sees
        got = outputs_and_grads(config, depth, implementation, device="cuda", seq_len=5, channels=8)
    assert not [w for w in caught if COMPACTION_WARNING in str(w.message)]
    want = outputs_and_grads(config, depth, "loop", seq_len=5, channels=8)
    assert_equal_to(want, got, TOLERANCES[implementation])
