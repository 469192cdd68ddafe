"""The ``triton`` implementation beyond the equivalence matrix (tests/test_equivalence.py, which
checks it against the oracle on every preset): across tiles in float64, with another window,
without gradients, and its clean errors.

On a CPU the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``, set by
``conftest.py`` before anything imports the kernel module). On a GPU machine, run the same checks compiled:
``TLSTM_TRITON_TEST_DEVICE=cuda python -m pytest tests/test_triton.py``. Sizes are tiny
(M 4-6, T 3, batch 2): the interpreter runs each kernel op in numpy.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import torch
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.models import build_model
from tlstm_bench.models.tlstm import kernel_offsets, locations

from model_helpers import outputs_and_grads

DEVICE = os.environ.get("TLSTM_TRITON_TEST_DEVICE", "cpu")  # conftest.py set TRITON_INTERPRET=1 for "cpu"


@pytest.fixture
def tt():
    """The kernel module, checked to run where the tests put their tensors."""
    pytest.importorskip("triton")
    from tlstm_bench.models import triton_tlstm

    if DEVICE == "cpu" and not triton_tlstm.INTERPRETED:
        pytest.fail("triton_tlstm was imported before TRITON_INTERPRET=1 was set (tests/conftest.py sets it)")
    if DEVICE == "cuda" and not torch.cuda.is_available():
        pytest.skip("TLSTM_TRITON_TEST_DEVICE=cuda but CUDA is not available")
    return triton_tlstm


@pytest.fixture
def small_tiles(tt, monkeypatch):
    """Several location and channel tiles per example even at tiny sizes, so the
    cross-program paths (deferred statistics, partial sums) are exercised. The interpreter
    accepts any tile size; a GPU's tl.dot needs 16, so there the test uses larger M and N."""
    if DEVICE != "cpu":
        return dict(channels=40)  # BM = 16: three channel tiles
    import triton

    def tiles(n, m, kd):
        return dict(BN=2, BM=4, BK=4, BG=8, KDP=triton.next_power_of_2(kd),
                    NJP=triton.next_power_of_2(triton.cdiv(m, 4)))

    monkeypatch.setattr(tt, "_tiles", tiles)
    return dict(channels=5)  # two channel tiles of 4 and 1


def _assert_same(config, depth, *, dtype=torch.float32, **kw):
    """triton equals eager on the same values (model_helpers.outputs_and_grads; tiny sizes: the
    interpreter runs each kernel op in numpy)."""
    kw = {"seq_len": 3, "channels": 4, **kw}
    ref = outputs_and_grads(config, depth, "eager", dtype=dtype, device=DEVICE, **kw)
    got = outputs_and_grads(config, depth, "triton", dtype=dtype, device=DEVICE, **kw)
    assert got.keys() == ref.keys()
    for name, want in ref.items():
        assert want is not None and got[name] is not None, name
        if dtype == torch.float64:
            torch.testing.assert_close(got[name], want, rtol=1e-9, atol=1e-10, msg=name)
        else:  # float32 sums in another order: relative to the tensor's largest entry
            scale = want.abs().max().clamp_min(1e-3)
            err = (got[name] - want).abs().max()
            assert err <= 2e-5 * scale, f"{name}: max error {err:.3g} vs scale {scale:.3g}"


@pytest.mark.triton
@pytest.mark.parametrize("config,batch", [("3d-ln", 2), ("3d-cn", 1), ("2d", 1), ("2d-m:norm=cn", 2)])
def test_triton_equals_eager_across_tiles_float64(tt, small_tiles, config, batch):
    """Several programs per example (locations and channels split into tiles), float64:
    the deferred cross-program reductions are exact, not merely close."""
    _assert_same(config, 2, dtype=torch.float64, batch=batch, seq_len=2, **small_tiles)


@pytest.mark.triton
def test_triton_reads_the_window_from_cell_index(tt):
    """The paper's appendix-A.2 memory-cell window (offsets -a+1 .. b+1, clamped), given to
    the model only as another cell_index: the kernels follow it, as eager does."""
    model = build_model("3d", 2, input_size=3, output_size=2, channels=4)
    p = model.tensor_size

    def flat(coord):  # row-major location index
        return sum(c * p ** (len(coord) - 1 - d) for d, c in enumerate(coord))

    appendix = torch.tensor([[flat([min(max(x + o + 1, 0), p - 1) for x, o in zip(loc, off)])
                              for off in kernel_offsets(model.arch)]
                             for loc in locations(p, model.arch.dims)])
    assert not torch.equal(appendix, model.cell_index)
    _assert_same("3d", 2, cell_index=appendix)


@pytest.mark.triton
def test_triton_without_grad(tt):
    model = build_model("3d-cn", 2, vocab=7, channels=4, implementation="triton").to(DEVICE)
    x = torch.randint(0, 7, (2, 3)).to(DEVICE)
    with torch.no_grad():
        y, state = model(x)
        model.implementation = "eager"
        y_eager, state_eager = model(x)
    torch.testing.assert_close(y, y_eager, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(state.c, state_eager.c, rtol=1e-5, atol=1e-6)


@pytest.mark.triton
def test_triton_refuses_other_dtypes(tt):
    model = build_model("2d", 1, input_size=2, output_size=2, channels=4, implementation="triton")
    model = model.to(DEVICE, torch.bfloat16)
    with pytest.raises(UserError, match="float32 and float64.*'fast'"):
        model(torch.zeros(1, 3, 2, dtype=torch.bfloat16, device=DEVICE))


def test_inverse_maps_invert_the_index_maps(tt):
    """inv_hidden/inv_cell list exactly the (location, entry) pairs that read each location."""
    model = build_model("3d", 3, vocab=5, channels=2)
    hidden, cell = model.hidden_index, model.cell_index
    inv_hidden, inv_cell, input_entries = tt._inverse_maps(hidden, cell)
    n, kd = hidden.shape
    for src in range(n):
        for k in range(kd):
            slot = hidden[src, k].item()
            if slot >= 2:
                assert inv_hidden[slot - 2, k].item() == src
            assert (src * kd + k) in inv_cell[cell[src, k]].tolist()
    assert (inv_hidden >= 0).sum() == (hidden >= 2).sum()
    assert (inv_cell >= 0).sum() == n * kd
    assert input_entries.tolist() == (hidden == 1).nonzero().tolist()
    with pytest.raises(RuntimeError, match="translations"):
        tt._inverse_maps(torch.full_like(hidden, 2), cell)


def test_triton_missing_is_a_clean_error(monkeypatch):
    """Without Triton installed, asking for it says how to install it (CLI: exit 2, one line)."""
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` now raises ImportError
    model = build_model("2d", 1, vocab=5, channels=3, implementation="triton")
    with pytest.raises(UserError, match=r'pip install -e "\.\[gpu\]"'):
        model(torch.zeros(1, 3, dtype=torch.long))
    result = CliRunner().invoke(app, ["time", "2d", "--depths", "1", "--channels", "4", "--seq-len", "3",
                                      "--implementation", "triton", "--no-store"])
    assert result.exit_code == 2
    assert "pip install" in result.output and "Traceback" not in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour where CUDA is absent")
def test_triton_without_cuda_or_interpreter_is_a_clean_error():
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, "-c", "from tlstm_bench.cli import main; main()", "time", "2d", "--depths", "1",
           "--channels", "4", "--seq-len", "3", "--implementation", "triton", "--no-store"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "need a CUDA GPU" in done.stderr + done.stdout and "Traceback" not in done.stderr


def test_time_all_on_cpu_leaves_out_the_cuda_implementations():
    from tlstm_bench.timing import plan_cases

    names = {case.implementation for case in plan_cases(["2d"], [1], "all", "cpu")}
    assert "triton" not in names and "cuda-graph" not in names and "fast" in names
    assert {case.implementation for case in plan_cases(["2d"], [1], "triton", "cuda")} == {"triton"}


@pytest.mark.triton
def test_triton_kernels_compile_for_h100():
    """The interpreter does not compile; Triton's GPU compiler (and ptxas, in the wheel)
    runs without a GPU: the two largest kernel variants compile for sm_90."""
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "triton_compile.py")
    done = subprocess.run([sys.executable, script, "--arch", "90", "--heaviest"], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 2 variants compiled" in done.stdout
