"""The ``triton`` implementation beyond the equivalence matrix (tests/test_equivalence.py, which
checks it against the oracle on every preset): across tiles in float64, with another window,
without gradients, and its clean errors.

On a CPU the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``, set by
``conftest.py`` before anything imports the kernel module). On a GPU machine, run the same checks compiled:
``TLSTM_TRITON_TEST_DEVICE=cuda python -m pytest tests/test_triton.py``. Sizes are tiny
(M 4-6, T 3, batch 2): the interpreter runs each kernel op in numpy.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile

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
    cross-program paths (deferred statistics, partial sums) are exercised: a test-only menu
    entry, forced. The interpreter accepts any tile size; on a GPU the test uses larger M and
    N with the shipped menu instead."""
    if DEVICE != "cpu":
        return dict(channels=40)  # BM = 16 or 8: three or five channel tiles
    from tlstm_bench.models.triton_tlstm import tiles

    monkeypatch.setitem(tiles.MENU, "tiny", tiles.Menu(bn=2, bm=4, bk=4, bg=8))
    with tt.forced(menu="tiny", persistent=False):
        yield dict(channels=5)  # two channel tiles of 4 and 1


def _assert_same(config, depth, *, dtype=torch.float32, **kw):
    """triton equals eager on the same values (model_helpers.outputs_and_grads; tiny sizes: the
    interpreter runs each kernel op in numpy)."""
    kw = {"seq_len": 3, "channels": 4, **kw}
    ref = outputs_and_grads(config, depth, "eager", dtype=dtype, device=DEVICE, **{**kw, "precision": None})
    got = outputs_and_grads(config, depth, "triton", dtype=dtype, device=DEVICE, **kw)
    _assert_close_to(ref, got, dtype, kw.get("precision") or "ieee")


@pytest.mark.triton
@pytest.mark.parametrize("config,batch", [("3d-ln", 2), ("3d-cn", 1), ("2d", 1), ("2d-m:norm=cn", 2)])
def test_triton_equals_eager_across_tiles_float64(tt, small_tiles, config, batch):
    """Several programs per example (locations and channels split into tiles), float64:
    the deferred cross-program reductions are exact, not merely close."""
    _assert_same(config, 2, dtype=torch.float64, batch=batch, seq_len=2, **small_tiles)


def _assert_close_to(ref: dict, got: dict, dtype, precision: str = "ieee") -> None:
    """float64: equal to 1e-9. float32 (against float64, or summed in another order): the
    largest error relative to the tensor's largest entry, within the precision's stated
    tolerance (tiles.TEST_TOLERANCE: 2e-5 for ieee and tf32x3, 5e-3 for tf32)."""
    from tlstm_bench.models.triton_tlstm.tiles import TEST_TOLERANCE

    assert got.keys() == ref.keys()
    for name, want in ref.items():
        assert want is not None and got[name] is not None, name
        if dtype == torch.float64:
            torch.testing.assert_close(got[name], want, rtol=1e-9, atol=1e-10, msg=name)
        else:
            scale = want.abs().max().clamp_min(1e-3)
            err = (got[name] - want).abs().max()
            assert err <= TEST_TOLERANCE[precision] * scale, f"{name}: max error {err:.3g} vs scale {scale:.3g}"


# One program (batch 1, BN >= N, BM >= M): the interpreter runs programs one after another,
# so a spin barrier with more would deadlock; with one it is trivial and the loop, the step
# order and the barrier's counter are what is checked. (4 channels, "wide" tiles: one tile.)
PERSISTENT_CASES = [("2d", 3), ("3d-ln", 2), ("3d-cn", 2), ("tlstm:dims=3,kernel=4,memory_conv=0,norm=ln", 2),
                    ("2d-m:norm=cn", 3)]
# The window loops unrolled by 3 (mid-u3: Kd = 9, so three unrolled turns; the inverse cell
# map's entries too), one program (3D at L = 2: four locations <= 8 rows, four channels <= 16;
# single-u3: 2D at L = 1, one location, Kd = 3 whole). The interpreter runs the loop as
# written: this checks the bounds and the plumbing; the unrolled code is the compiler's,
# checked on a device (benchmarks/triton_session.py).
UNROLLED_CASES = [("3d-cn", 2, "mid-u3"), ("3d-ln", 2, "mid-u3"), ("2d", 1, "single-u3")]
# The reductions deferred (tiles.Menu.defer), one program: 2D at L = 1 (one location), 3D at
# L = 2 (four locations <= 8 rows, four channels <= 16).
DEFERRED_CASES = [("2d", 1, "single-acc"), ("3d-cn", 2, "mid-acc"), ("3d-ln", 2, "mid-acc")]
# The forward split (tiles.Menu.split: h_{s-1} made by its own turn and a second barrier), one
# program: 3D at L = 2, and 2D at L = 3 (three locations <= 8 rows).
SPLIT_CASES = [("3d-cn", 2, "mid-acc-split"), ("3d-ln", 2, "mid-acc-split"), ("2d", 3, "mid-acc-split")]


@pytest.mark.triton
@pytest.mark.parametrize("config,depth,menu", [(c, d, "wide") for c, d in PERSISTENT_CASES] + UNROLLED_CASES
                         + DEFERRED_CASES + SPLIT_CASES)
def test_persistent_kernels_equal_eager_float64(tt, config, depth, menu):
    if DEVICE != "cpu":
        pytest.skip("the one-program interpreter check; on a GPU the equivalence tests run the persistent path")
    kw = dict(batch=1, seq_len=3, channels=4)
    ref = outputs_and_grads(config, depth, "eager", dtype=torch.float64, device=DEVICE, **kw)
    with tt.forced(menu=menu, persistent=True):
        got = outputs_and_grads(config, depth, "triton", dtype=torch.float64, device=DEVICE, **kw)
    _assert_close_to(ref, got, torch.float64)


@pytest.mark.triton
@pytest.mark.parametrize("config,depth", PERSISTENT_CASES[1:3])
def test_persistent_kernels_float32_match_the_float64_oracle(tt, config, depth):
    if DEVICE != "cpu":
        pytest.skip("the one-program interpreter check")
    kw = dict(batch=1, seq_len=3, channels=4)
    ref = outputs_and_grads(config, depth, "reference", dtype=torch.float64, device="cpu", **kw)
    with tt.forced(menu="wide", persistent=True):
        got = outputs_and_grads(config, depth, "triton", dtype=torch.float32, device=DEVICE, **kw)
    _assert_close_to(ref, got, torch.float32)


@pytest.mark.triton
@pytest.mark.parametrize("config,batch,fold", [("3d-cn", 1, False), ("3d-ln", 2, False), ("2d", 1, False),
                                               ("2d-m:norm=cn", 3, True), ("3d", 2, True)])
def test_deferred_sums_equal_eager_across_tiles(tt, monkeypatch, config, batch, fold):
    """The window's products accumulated elementwise and summed once a step (tiles.Menu.defer:
    forward.window_deferred, backward.dh_deferred) with inner widths smaller than M and 4M, so
    that the deferred sums cross several inner turns, location tiles and channel tiles (and with
    the batch folded, examples): exact in float64; float32 (summed in another order) within
    ieee's tolerance at 3d-cn."""
    if DEVICE != "cpu":
        pytest.skip("test-only tiles; on a GPU triton_session.py checks the -acc entries against float64")
    from tlstm_bench.models.triton_tlstm import tiles

    monkeypatch.setitem(tiles.MENU, "tinyacc", tiles.Menu(bn=2, bm=4, bk=4, bg=8, fold=fold, defer=True))
    with tt.forced(menu="tinyacc", persistent=False):
        _assert_same(config, 2, dtype=torch.float64, batch=batch, seq_len=2, channels=5)
        if config == "3d-cn":
            _assert_same(config, 2, batch=batch, seq_len=2, channels=5)


@pytest.mark.triton
@pytest.mark.parametrize("config,batch,fold,defer", [("3d-cn", 1, False, True), ("3d-ln", 2, False, False),
                                                     ("2d-m:norm=cn", 3, True, True), ("3d", 2, True, False)])
def test_split_forward_equals_eager_across_tiles(tt, monkeypatch, config, batch, fold, defer):
    """The forward split (tiles.Menu.split): per step, a launch finishes h_{s-1} and the next runs
    step s reading it from hs (the FIRST path) instead of recomputing it with its norm
    statistics for each window entry; across location, channel and inner tiles (and examples
    with the batch folded), with and without the deferred sums: exact in float64 (T = 2: three
    steps, two of them split); float32 within ieee's tolerance at 3d-cn."""
    if DEVICE != "cpu":
        pytest.skip("test-only tiles; on a GPU triton_session.py checks the -split entries against float64")
    from tlstm_bench.models.triton_tlstm import tiles

    menu = tiles.Menu(bn=2, bm=4, bk=4, bg=8, fold=fold, defer=defer, split=True)
    monkeypatch.setitem(tiles.MENU, "tinysplit", menu)
    with tt.forced(menu="tinysplit", persistent=False):
        _assert_same(config, 2, dtype=torch.float64, batch=batch, seq_len=2, channels=5)
        if config == "3d-cn":
            _assert_same(config, 2, batch=batch, seq_len=2, channels=5)


def test_split_needs_the_grid_barrier(tt):
    from tlstm_bench.models.triton_tlstm import tiles

    with pytest.raises(ValueError, match="grid barrier"):
        tiles.Menu(1, 8, 32, 32, split=True, sync="flags")


@pytest.fixture
def fold_tiles(tt, monkeypatch):
    """The batch folded into the rows with tiles that cut across examples at tiny sizes: a
    test-only menu entry of 4 rows (2D at L = 3 has 3 locations, 3D at L = 3 nine, so a tile
    holds rows of two examples) and 4 channels, forced per step. On a GPU, the shipped fold
    tiles at M = 40."""
    if DEVICE != "cpu":
        with tt.forced(menu="fold", persistent=False):
            yield dict(channels=40)
        return
    from tlstm_bench.models.triton_tlstm import tiles

    monkeypatch.setitem(tiles.MENU, "tinyfold", tiles.Menu(bn=4, bm=4, bk=4, bg=8, fold=True))
    with tt.forced(menu="tinyfold", persistent=False):
        yield dict(channels=5)


@pytest.mark.triton
@pytest.mark.parametrize("config,depth,batch", [("3d-ln", 3, 2), ("3d-cn", 2, 3), ("2d-m:norm=cn", 3, 3),
                                                ("2d", 3, 2)])
def test_folded_batch_equals_eager_float64(tt, fold_tiles, config, depth, batch):
    """The batch folded into a tile's rows (issue 28), tiles holding rows of two examples:
    per-row LN statistics and sums, z, the output corner and the final state of each row's
    own example, exact in float64."""
    _assert_same(config, depth, dtype=torch.float64, batch=batch, seq_len=2, **fold_tiles)


@pytest.mark.triton
@pytest.mark.parametrize("config,depth", [("3d-ln", 2), ("2d-m:norm=cn", 3)])
def test_folded_batch_persistent_equals_eager_float64(tt, config, depth):
    """The folded rows through the persistent kernels: batch 3 in one 16 x 16 program (the
    "fold" entry; one program is all the interpreter can run through a spin barrier)."""
    if DEVICE != "cpu":
        pytest.skip("the one-program interpreter check")
    kw = dict(batch=3, seq_len=3, channels=4)
    ref = outputs_and_grads(config, depth, "eager", dtype=torch.float64, device=DEVICE, **kw)
    with tt.forced(menu="fold", persistent=True):
        got = outputs_and_grads(config, depth, "triton", dtype=torch.float64, device=DEVICE, **kw)
    _assert_close_to(ref, got, torch.float64)


@pytest.mark.triton
@pytest.mark.parametrize("precision", ["ieee", "tf32x3", "tf32"])
@pytest.mark.parametrize("menu,config", [("wide", "3d-cn"), ("fold", "2d-m:norm=cn"), ("fold64", "3d-ln")])
def test_each_precision_matches_the_float64_oracle(tt, precision, menu, config):
    """float32 at each precision through tile sets whose products are tl.dot (16 and more on
    every side), against eager in float64, within that precision's stated tolerance
    (tiles.TEST_TOLERANCE). The interpreter ignores input_precision (tf32 computes as ieee
    there); compiled on a GPU (TLSTM_TRITON_TEST_DEVICE=cuda) the tolerance is what is tested."""
    ref = outputs_and_grads(config, 2, "eager", dtype=torch.float64, device=DEVICE, batch=2, seq_len=3, channels=4)
    with tt.forced(menu=menu, persistent=False):
        got = outputs_and_grads(config, 2, "triton", dtype=torch.float32, device=DEVICE, batch=2, seq_len=3,
                                channels=4, precision=precision)
    _assert_close_to(ref, got, torch.float32, precision)


def test_precision_reaches_the_kernels_only_through_dot_tiles(tt):
    """The kernels' PRECISION constexpr: the asked precision where products are tl.dot, ieee
    where they are sums (one compiled variant, not three); the geometry says which."""
    for menu, dots in (("wide", True), ("fold64", True), ("single", False), ("narrow", False), ("mid-acc", False)):
        with tt.forced(menu=menu):
            geo = _geometry(tt, precision="tf32")
        assert geo.tiles["PRECISION"] == ("tf32" if dots else "ieee")
        assert geo.describe()["tensor_cores"] is dots and geo.describe()["precision"] == "tf32"
    with pytest.raises(UserError, match="unknown precision"):
        _geometry(tt, precision="bf16")


def test_unrolled_tile_sets_reach_the_launch_with_their_unroll_and_registers(tt, monkeypatch):
    """UNROLL, DEFER and maxnreg as a compiled launch gets them (the interpreter takes no maxnreg,
    so the launch options are read with INTERPRETED off); the defaults keep UNROLL 1, DEFER 0
    and the compiler's register choice."""
    from tlstm_bench.models.triton_tlstm import launch

    monkeypatch.setattr(launch, "INTERPRETED", False)
    for menu, unroll, maxnreg, warps in (("mid-u3", 3, 255, 4), ("single-u3", 3, 255, 4), ("narrow-u3", 3, None, 4),
                                         ("narrow", 1, None, 4), ("single", 1, None, 4), ("wide", 1, None, 4),
                                         ("wide-w8", 1, None, 8), ("mid-u3-w8", 3, 255, 8),
                                         ("single16-acc", 1, 80, 4), ("narrow-acc", 1, None, 4),
                                         ("single-w1", 1, None, 1), ("single-acc-w1", 1, None, 1)):
        with tt.forced(menu=menu, persistent=False):
            opts = launch._launch_options(_geometry(tt))
        assert (opts["UNROLL"], opts.get("maxnreg"), opts["num_warps"]) == (unroll, maxnreg, warps), (menu, opts)
        assert opts["DEFER"] == int("-acc" in menu), (menu, opts)


def test_unrolled_tile_sets_refuse_a_cell_read_by_more_windows_than_they_preload(tt, monkeypatch):
    """The unrolled sets load each row of the inverse cell map as one KDP-wide block
    (backward.index_maps); a model whose cells have more readers gets a one-line error there,
    not a silently truncated gradient. The other sets read the map entry by entry."""
    from tlstm_bench.models.triton_tlstm import launch

    real = launch._maps

    def wider(model):  # R = 17 readers a cell, more than KDP = 16 (3D)
        hidx, cidx, inv_h, inv_c, entries = real(model)
        pad = torch.full((inv_c.shape[0], 17 - inv_c.shape[1]), -1, dtype=inv_c.dtype)
        return hidx, cidx, inv_h, torch.cat([inv_c, pad], 1), entries

    monkeypatch.setattr(launch, "_maps", wider)
    with tt.forced(menu="mid-u3", persistent=False), pytest.raises(UserError, match="preloads 16 readers.*has 17"):
        _geometry(tt, config="3d-cn", depth=2)
    with tt.forced(menu="mid", persistent=False):
        assert _geometry(tt, config="3d-cn", depth=2).inv_cell.shape[1] == 17


def test_fold_grid_has_the_batch_in_its_rows(tt):
    """Folded: one grid row of tiles over B x N rows; not folded: one per example."""
    with tt.forced(menu="fold"):
        assert _geometry(tt, batch=15, config="2d", depth=1).grid == (1, 1, 1)
        assert _geometry(tt, batch=15, config="3d-cn", depth=2).grid == (1, 4, 1)  # 60 rows
    with tt.forced(menu="wide"):
        assert _geometry(tt, batch=15, config="2d", depth=1).grid == (15, 1, 1)


def _geometry(tt, batch=1, channels=4, config="3d-cn", depth=2, precision="ieee"):
    model = build_model(config, depth, input_size=3, output_size=2, channels=channels)
    return tt.Geometry(model, 3, batch, precision)


@pytest.mark.triton
def test_path_choice(tt, monkeypatch):
    """auto: per step in the interpreter; =1 persistent where possible (one program here) and a
    one-line error where not; =0 per step; anything else an error; forced beats the variable."""
    if DEVICE != "cpu":
        pytest.skip("the interpreter's rule")
    monkeypatch.delenv("TLSTM_TRITON_PERSISTENT", raising=False)
    with tt.forced(menu="wide"):
        assert not _geometry(tt).persistent
        monkeypatch.setenv("TLSTM_TRITON_PERSISTENT", "1")
        assert _geometry(tt).persistent
        with pytest.raises(UserError, match="one after another.*TLSTM_TRITON_PERSISTENT=0"):
            _geometry(tt, batch=2)
        with tt.forced(persistent=False):
            assert not _geometry(tt).persistent
        monkeypatch.setenv("TLSTM_TRITON_PERSISTENT", "0")
        assert not _geometry(tt).persistent
        monkeypatch.setenv("TLSTM_TRITON_PERSISTENT", "maybe")
        with pytest.raises(UserError, match="not one of auto, 0, 1"):
            _geometry(tt)


def test_persistent_needs_a_cooperative_grid_no_larger_than_the_sms(tt, monkeypatch):
    """The fallback rule on a GPU, with the GPU faked: programs <= SMs and a Triton with
    cooperative launch, else per step with the reason."""
    from types import SimpleNamespace

    from tlstm_bench.models.triton_tlstm import launch

    monkeypatch.setattr(launch, "INTERPRETED", False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(multi_processor_count=132))
    cuda = torch.device("cuda")
    monkeypatch.setattr(launch, "cooperative_launch_supported", lambda: True)
    assert launch.persistent_possible(132, cuda) == (True, "the grid has 132 programs and the GPU 132 SMs")
    assert launch.persistent_possible(133, cuda)[0] is False
    assert launch.persistent_possible(1, torch.device("cpu")) == (False, "it needs a CUDA GPU")
    monkeypatch.setattr(launch, "cooperative_launch_supported", lambda: False)
    possible, why = launch.persistent_possible(7, cuda)
    assert not possible and "cooperative launch" in why
    # auto: persistent where the table or the default prefers it and it can run, else per step
    monkeypatch.setattr(launch, "cooperative_launch_supported", lambda: True)
    monkeypatch.delenv("TLSTM_TRITON_PERSISTENT", raising=False)
    assert launch._choose_path((1, 1, 7), cuda, True) is True
    assert launch._choose_path((1, 1, 7), cuda, None) is False
    assert launch._choose_path((15, 10, 13), cuda, True) is False


def test_kernel_entries_are_padded_to_16_in_every_tile_set(tt):
    """The padded kernel width: with KDP = 4 (2D) the H100 doubled the Q path of dL/dh in the
    wide tiles, and the interpreter cannot show it (results/evidence/gpu/2026-11-26-h100-2/);
    every device check passed with KDP = 16."""
    from tlstm_bench.models.triton_tlstm import tiles

    for menu in tiles.MENU.values():
        for kd in (2, 3, 9, 16, 27):
            assert tiles.tiles_for(menu, 100, kd)["KDP"] == max(16, 1 << (kd - 1).bit_length())


def test_tiles_come_from_the_table_else_the_default(tt, tmp_path, monkeypatch):
    """A table row picks the menu entry and path for its shape; rows naming a tile set the
    compile check does not compile for that dtype are ignored; other shapes get the default."""
    from tlstm_bench.models.triton_tlstm import tiles

    row = dict(m=100, n=10, kd=2, batch=1, dtype="float32", menu="wide", persistent=False)
    bad = dict(row, n=20, menu="fp64")
    (tmp_path / "t.json").write_text(json.dumps({"entries": [row, bad]}))
    monkeypatch.setattr(tiles, "TABLE", tmp_path / "t.json")
    assert tiles.choose(100, 10, 2, 1, "float32") == ("wide", False)
    assert tiles.choose(100, 20, 2, 1, "float32") == tiles.default_choice(100, 20, 1, "float32")
    assert tiles.choose(100, 1, 2, 1, "float32") == ("single", True)
    assert tiles.choose(100, 100, 9, 1, "float32") == ("narrow", True)
    assert tiles.choose(100, 10, 2, 15, "float32") == ("wide", True)
    assert tiles.choose(100, 10, 2, 1, "float64") == ("fp64", None)
    assert set(tiles.FLOAT32_MENU) | {"fp64"} == set(tiles.MENU)


def test_table_rows_per_precision_and_the_training_choice(tt, tmp_path, monkeypatch):
    """Rows carry a precision (none: ieee, the older tables) and may say triton beat fast
    there (fast_us_per_step): what training on CUDA runs when no implementation is named.
    Without such a row, or on a CPU, the model's default; a precision other than ieee is
    triton's alone."""
    from tlstm_bench.models import training_implementation
    from tlstm_bench.models.triton_tlstm import tiles

    old = dict(m=100, n=100, kd=9, batch=15, dtype="float32", menu="wide", persistent=False, us_per_step=9.0)
    fold = dict(old, precision="tf32x3", menu="fold64", persistent=True, us_per_step=3.0, fast_us_per_step=20.0)
    slow = dict(old, precision="tf32", menu="fold", us_per_step=30.0, fast_us_per_step=20.0)
    (tmp_path / "t.json").write_text(json.dumps({"entries": [old, fold, slow]}))
    monkeypatch.setattr(tiles, "TABLE", tmp_path / "t.json")
    assert tiles.choose(100, 100, 9, 15, "float32") == ("wide", False)
    assert tiles.choose(100, 100, 9, 15, "float32", "tf32x3") == ("fold64", True)
    assert tiles.beats_fast(100, 100, 9, 15, "float32", "tf32x3")
    assert not tiles.beats_fast(100, 100, 9, 15, "float32", "tf32")  # measured slower
    assert not tiles.beats_fast(100, 100, 9, 15, "float32")  # no fast time in the row
    model = build_model("3d-cn", 10, vocab=5, channels=100)
    assert training_implementation(model, 15) == "fast"  # a CPU: the default
    assert training_implementation(model, 15, "tf32x3") == "triton"  # the only loop with tf32x3


@pytest.mark.triton
@pytest.mark.parametrize("menu", ["wide", "narrow", "single", "fp64", "mid", "mid-u3", "narrow-u3", "single-u3",
                                  "wide-w8", "mid-u3-w8", "single-acc", "single16-acc", "narrow-acc", "narrow-acc64",
                                  "mid-acc", "narrow-split", "single16-acc-split", "mid-acc-split", "single-w1",
                                  "single-acc-w1"])
def test_every_tile_menu_entry_equals_eager_float64(tt, menu):
    """Each tile set the dispatcher can choose, per step, float64 (M = 10: one or two channel
    tiles; 3D at L = 2: four locations, one to four location tiles)."""
    if DEVICE != "cpu":
        pytest.skip("the interpreter check; on a GPU the tuner times every entry against fast")
    with tt.forced(menu=menu, persistent=False):
        _assert_same("3d-ln", 2, dtype=torch.float64, batch=1, seq_len=2, channels=10)


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


def test_a_precision_other_than_ieee_is_triton_only():
    """--precision tf32 with fast is one line and exit 2, on time and train alike."""
    for args in (["time", "2d", "--depths", "1", "--channels", "4", "--seq-len", "3", "--no-store"],
                 ["train", "2d", "--task", "memorization", "--channels", "4", "--max-samples", "2",
                  "--implementation", "fast"]):
        result = CliRunner().invoke(app, [*args, "--precision", "tf32"])
        assert result.exit_code == 2, result.output
        assert "runs only in the triton kernels" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["time", "2d", "--depths", "1", "--no-store", "--precision", "fp8"])
    assert result.exit_code == 2 and "must be one of ieee, tf32x3, tf32" in result.output


def test_time_all_on_cpu_leaves_out_the_cuda_implementations():
    from tlstm_bench.timing import plan_cases

    names = {case.implementation for case in plan_cases(["2d"], [1], "all", "cpu")}
    assert "triton" not in names and "cuda-graph" not in names and "fast" in names
    assert {case.implementation for case in plan_cases(["2d"], [1], "triton", "cuda")} == {"triton"}


@pytest.mark.triton
@pytest.mark.slow
def test_triton_kernels_compile_for_a100_and_h100():
    """The interpreter does not compile; Triton's GPU compiler (and ptxas, in the wheel) runs
    without a GPU: every step-body variant the dispatcher can launch (dtype x tile menu x norm
    x memory conv, inside the persistent kernels, and the per-step kernels for one combination),
    every precision of the tl.dot tiles and the folded rows compile for sm_80 and sm_90
    (benchmarks/triton_compile.py --ci). float64 through tl.dot
    failed here under Triton 3.6, the device's version, before common.mma."""
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "triton_compile.py")
    done = subprocess.run([sys.executable, script, "--ci"], capture_output=True, text=True, timeout=1200, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    compiled = re.search(r"(\d+) of (\d+) variants compiled", done.stdout)
    assert compiled and compiled.group(1) == compiled.group(2), done.stdout
    for needle in ("sm_80 fp64 fp64", "sm_90 fp64 fp64", "sm_90 fp32 single", "forward_persistent", "backward_step",
                   "sm_90 fp32 fold ieee", "sm_80 fp32 fold64 tf32x3", "sm_90 fp32 wide tf32 "):
        assert needle in done.stdout, needle


@pytest.mark.triton
@pytest.mark.slow
def test_tune_script_dry_run_records_every_variant(tmp_path):
    """benchmarks/triton_tune.py's flow on the CPU (interpreter, toy sizes): a record per shape
    and variant, a persistent variant refused where the grid has more than one program
    recorded as an error while the others go on, and a table row per shape."""
    pytest.importorskip("triton")
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "triton_tune.py")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    done = subprocess.run([sys.executable, script, "--device", "cpu", "--out", str(tmp_path), "--budget-s", "3000",
                           "--rounds", "3"],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    timings = [r for r in records if r["kind"] == "timing"]
    assert {(r["L"], r["variant"]) for r in timings} >= {(1, "fast"), (1, "wide/step"), (1, "wide/persistent"),
                                                        (2, "single/persistent")}
    by = {(r["L"], r["variant"]): r for r in timings}
    assert by[(1, "wide/persistent")]["ok"] and by[(1, "wide/persistent")]["error_vs_fast"] < 1e-4
    # correctness is decided against eager in float64 (every output and gradient), per step and persistent
    for key in ((1, "wide/persistent"), (1, "single/step"), (2, "wide/step")):
        assert by[key]["check_max_rel"] < 1e-4, (key, by[key])
    assert not by[(2, "single/persistent")]["ok"]  # two location tiles: refused in the interpreter
    assert by[(2, "wide/step")]["ok"] and by[(2, "wide/step")]["rounds"] >= 3
    table = json.loads((tmp_path / "table.json").read_text())["entries"]
    assert {(row["n"], row["batch"]) for row in table} == {(1, 1), (2, 1)}


@pytest.mark.triton
@pytest.mark.slow
def test_diag_finds_the_h100_fault_in_its_recorded_buffers(tmp_path):
    """benchmarks/triton_diag.py --compare on the buffers the H100 wrote (2d, L = 3, wide tiles,
    KDP = 4): the forward buffers equal the interpreter's, the backward ones first differ at
    the first step with a next step (7 of 9), at locations 1 and 2 only."""
    pytest.importorskip("triton")
    root = os.path.join(os.path.dirname(__file__), "..")
    gpu = os.path.join(root, "results", "evidence", "gpu", "2026-11-26-h100-2", "run2-diag", "buffers_gpu.pt")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=root)
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "triton_diag.py"), "--out", str(tmp_path),
                           "--compare", gpu], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    recs = {r["buffer"]: r for r in map(json.loads, done.stdout.splitlines()) if r.get("part") == "buffers"}
    assert set(recs) == {"hs", "cs", "acts", "dcs", "das", "dql"}
    for name in ("hs", "cs", "acts"):
        assert recs[name]["bad_steps"] == [], recs[name]
    dcs = recs["dcs"]
    assert dcs["first_bad_step"] == 7 and dcs["per_location"][0] == 0.0 and min(dcs["per_location"][1:]) > 1e-3


@pytest.mark.triton
def test_diag_end_to_end_reports_each_menu_and_knob(tt, monkeypatch):
    """benchmarks/triton_diag.py's end-to-end part (what --verify runs on a device) under the
    interpreter, at a toy size: a record per case, menu and knob, right against float64."""
    root = os.path.join(os.path.dirname(__file__), "..")
    monkeypatch.syspath_prepend(os.path.join(root, "benchmarks"))
    import triton_diag

    monkeypatch.setattr(triton_diag, "CASES", [("2d", 2, 4, 1, 3)])
    monkeypatch.setattr(triton_diag, "MENUS", ("single",))
    monkeypatch.setattr(triton_diag, "KNOBS", {"default": {}, "kdp4": {"TLSTM_TRITON_DIAG_KDP_MIN": "4"}})
    recs = []
    triton_diag.end_to_end("cpu", recs.append, float("inf"))
    assert [(r["menu"], r["knob"]) for r in recs] == [("single", "default"), ("single", "kdp4")]
    assert all(r["ok"] and r["max_rel"] < 1e-4 for r in recs), recs
    assert "TLSTM_TRITON_DIAG_KDP_MIN" not in os.environ  # the knob is undone


@pytest.mark.triton
@pytest.mark.slow
def test_session_script_dry_run_writes_store_records_a_table_and_targets(tmp_path):
    """benchmarks/triton_session.py (issue 28's one device call) on the CPU at toy sizes: every
    variant checked against float64 eager and timed, records of the store's schema (with the
    precision and what the kernels ran), a tuning-table row per triton shape and precision
    (the training one with fast's time beside it), the targets printed; the triton-graph
    variant, which needs CUDA, failed in one line by its probe process, the rest timed; the
    floor (sync_floor.py) last, right against its host model, its lines closing the targets."""
    pytest.importorskip("triton")
    from tlstm_bench.results.schema import record_problem

    root = os.path.join(os.path.dirname(__file__), "..")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=root)
    out = tmp_path / "tsession"
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "triton_session.py"), "--device", "cpu",
                           "--out", str(out), "--budget-s", "3000",
                           "--archive", str(tmp_path / "ts.tar.gz"), "--rounds", "3", "--groups", "train,m100,floor"],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(p.read_text()) for p in (out / "store" / "triton-session").glob("*.json")]
    assert len(records) == 5 and all(record_problem(r) is None for r in records)
    by = {(r["session_group"], r["variant"]): r for r in records}
    graph = by[("m100", "triton-graph:auto:ieee")]  # needs CUDA: its failure is its record, in one line
    assert graph["status"] == "failed" and graph["implementation"] == "triton-graph"
    assert graph["error"].startswith("UserError: implementation 'triton-graph' needs CUDA")
    assert graph["error"].endswith("on a CPU use implementation 'fast'")
    fold = by[("train", "triton:fold/step:tf32")]
    assert fold["precision"] == "tf32" and fold["check_ok"] and fold["kernels"]["menu"] == "fold"
    assert fold["check_eager_tf32"] > 0  # torch's own TF32 measured beside (plain float32 on a CPU)
    assert fold["batch"] == 3 and fold["samples_per_s"] > 0 and fold["repeats"] >= 3
    assert fold["profile"]["events"] > 0 and fold["profile"]["top_us_per_step"]  # where its time went
    assert by[("m100", "triton:auto:ieee")]["check_max_rel"] < 2e-5
    rows = json.loads((out / "table.json").read_text())["entries"]
    assert {(r["batch"], r["precision"]) for r in rows} == {(1, "ieee"), (3, "tf32")}
    assert {(r["config"], r["norm"], r["memory_conv"]) for r in rows} == {("2d", "none", True), ("3d-cn", "cn", True)}
    from benchmarks import tuning_table

    with pytest.raises(UserError, match="not a GPU"):  # a dry run's rows are never shipped
        tuning_table.check_rows(rows, "table.json")
    tuning_table.check_rows([dict(r, device="a GPU") for r in rows], "table.json")  # the rest of what shipping checks
    assert [r for r in rows if r["batch"] == 3][0]["fast_us_per_step"] > 0
    targets = (out / "targets.txt").read_text()
    with tarfile.open(tmp_path / "ts.tar.gz") as archive:  # the one file that comes back, whole
        names = set(archive.getnames())
    assert {"tsession/targets.txt", "tsession/table.json", "tsession/stdout.txt", "tsession/floor.json"} <= names
    assert sum(n.startswith("tsession/store/triton-session/") for n in names) == len(records)
    assert not (tmp_path / "ts.tar.gz.part").exists()
    assert "MET: every timed triton variant right against float64 eager: 2 of 2 checked right" in targets
    assert "UNMEASURED: 3d-cn L=10 <= 20 us" in targets
    assert "PROFILE: train 3d-cn L=2 triton:fold/step:tf32: kernels " in targets
    floor = [line for line in targets.splitlines() if line.startswith("FLOOR: ")]  # last, after the targets
    assert len(floor) == 4 and targets.rstrip().endswith(floor[-1]) and all(line.endswith(", right") for line in floor)


def test_session_recheck_and_rejudge_a_variant_marked_wrong(tmp_path):
    """A session's variant marked wrong is checked again without timing (``--recheck STORE``:
    recheck.json, with float32 eager's own error beside), and ``--rejudge RUN`` gives the table
    and targets with that verdict, leaving the records as they were."""
    pytest.importorskip("triton")
    root = os.path.join(os.path.dirname(__file__), "..")
    script = os.path.join(root, "benchmarks", "triton_session.py")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=root)

    def session(*args):
        done = subprocess.run([sys.executable, script, "--device", "cpu", *args], capture_output=True, text=True,
                              timeout=900, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run = tmp_path / "run"
    session("--out", str(run), "--budget-s", "3000", "--rounds", "3", "--groups", "train")
    [path] = [p for p in (run / "store" / "triton-session").glob("*.json") if "fold" in p.read_text()]
    record = json.loads(path.read_text())
    assert record["check_ok"] and record["check_eager32"] > 0 and record["check_perturb"] > 0
    path.write_text(json.dumps(dict(record, check_ok=False, wrong=True)))  # as a session would mark it
    out = session("--out", str(tmp_path / "re"), "--budget-s", "300", "--recheck", str(run / "store"))
    assert "recheck: 1 variant(s) marked wrong" in out
    found = json.loads((tmp_path / "re" / "recheck.json").read_text())
    assert list(found) == ["train 3d-cn L=2 triton:fold/step:tf32"] and found[list(found)[0]]["check_ok"]
    (run / "recheck.json").write_text(json.dumps(found))
    lines = session("--rejudge", str(run))
    assert "MET: every timed triton variant right against float64 eager: 1 of 1 checked right" in lines
    rows = json.loads((run / "table-rechecked.json").read_text())["entries"]
    assert [(r["batch"], r["precision"]) for r in rows] == [(3, "tf32")]
    assert json.loads(path.read_text())["wrong"]  # the device's record itself is left as it came


@pytest.mark.parametrize("triton_off, ok", [(1e-5, True), (4e-3, True), (6e-3, False)])
def test_session_check_allows_five_times_float32_eagers_own_error(monkeypatch, triton_off, ok):
    """The session's check: a tensor is right within its precision's tolerance (1e-4 at ieee) or
    within 5x float32 eager's own error on it (here 1e-3), wrong beyond both; the parameters are
    moved by 0.3 * sqrt(20 / M)."""
    pytest.importorskip("triton")
    import model_helpers

    from benchmarks import triton_session as ts

    seen = []

    def fake(config, depth, implementation, *, dtype, perturb_scale, precision=None, **kw):
        seen.append(perturb_scale)
        off = {"triton": triton_off, "eager": 1e-3 if dtype == torch.float32 else 0.0}[implementation]
        return {"y": torch.ones(4, dtype=torch.float64) * (1 + off), "grad w": torch.ones(2, dtype=torch.float64)}

    monkeypatch.setattr(model_helpers, "outputs_and_grads", fake)
    v = ts.Variant("m100", "2d", 1, channels=80)
    v.rec = {"channels": 80}
    got = ts.check(v, "cpu", {})
    assert got["check_ok"] is ok and got["check_eager32"] == pytest.approx(1e-3)
    assert got.get("check_failed", []) == ([] if ok else ["y"])
    assert seen and all(scale == pytest.approx(0.15) for scale in seen)  # 0.3 * sqrt(20 / 80)


@pytest.mark.parametrize("triton_off, ok", [(4e-2, True), (6e-2, False)])
def test_session_check_holds_tf32_to_torchs_own_tf32(monkeypatch, triton_off, ok):
    """At tf32 the reference for "eager's own error" is torch's own TF32 products (float32 eager
    with TF32 allowed in cuBLAS and cuDNN; here 1e-2 off, against 1e-3 with it off), so a tf32
    variant 4e-2 off is right (within 5x of it) and 6e-2 off is wrong; the record keeps both
    references, and the TF32 flags are what they were before the check."""
    pytest.importorskip("triton")
    import model_helpers

    from benchmarks import triton_session as ts

    def fake(config, depth, implementation, *, dtype, perturb_scale, precision=None, **kw):
        tf32 = torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        off = triton_off if implementation == "triton" else 0.0 if dtype == torch.float64 else 1e-2 if tf32 else 1e-3
        return {"y": torch.ones(4, dtype=torch.float64) * (1 + off), "grad w": torch.ones(2, dtype=torch.float64)}

    monkeypatch.setattr(model_helpers, "outputs_and_grads", fake)
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    v = ts.Variant("m100", "3d-cn", 10, channels=80, precision="tf32")
    v.rec = {"channels": 80}
    oracles = {}
    got = ts.check(v, "cpu", oracles)
    assert got["check_ok"] is ok and got.get("check_failed", []) == ([] if ok else ["y"])
    assert got["check_eager_tf32"] == pytest.approx(1e-2) and got["check_eager32"] == pytest.approx(1e-3)
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == flags
    # tf32x3 restores float32's accuracy: it is held to plain float32 eager (1e-3 off here), as ieee is
    v3 = ts.Variant("m100", "3d-cn", 10, channels=80, precision="tf32x3")
    v3.rec = {"channels": 80}
    got3 = ts.check(v3, "cpu", oracles)
    assert not got3["check_ok"] and "check_eager_tf32" not in got3


def test_training_records_its_loop_and_precision():
    """A training run's record says which loop and precision ran: with no implementation
    named, a precision other than ieee runs triton (the kernels' tensor cores), ieee the
    model's default on a CPU; a precision enters the record's key only when it is not ieee."""
    from tlstm_bench.events import reporter
    from tlstm_bench.results.schema import record_key
    from tlstm_bench.training import TrainSettings
    from tlstm_bench.training.loop import Trainer

    def record(**kw):
        s, task = TrainSettings("2d", 1, task="memorization", channels=4, task_options={"symbols": 2}, **kw).resolve()
        return Trainer(s, task, torch.device("cpu"), reporter(False), started=0.0).record

    plain, tf32 = record(), record(precision="tf32x3")
    assert (plain["implementation"], plain["precision"]) == ("fast", "ieee")
    assert (tf32["implementation"], tf32["precision"]) == ("triton", "tf32x3")
    assert plain["key"] == record_key({k: v for k, v in plain.items() if k != "precision"})  # as before
    assert record(implementation="triton")["key"] != tf32["key"]
    with pytest.raises(UserError, match="runs only in the triton kernels"):
        record(implementation="fast", precision="tf32")


def test_a_sweep_spec_may_name_a_precision(tmp_path):
    """precision in [runtime] (or [train]) reaches the cells' specs, and so their keys; a spec
    without it gives the cells it gave before (no precision key); a bad one is one line."""
    from tlstm_bench.sweeps.grid import expand
    from tlstm_bench.sweeps.spec import load_spec

    text = ('task = "runtime"\nconfigs = ["2d"]\ndepths = [1]\nchannels = 4\ndevice = "cuda"\n'
            '[runtime]\nimplementations = ["triton"]\n')
    (tmp_path / "plain.toml").write_text(text)
    (tmp_path / "tf.toml").write_text(text + 'precision = "tf32x3"\n')
    (tmp_path / "bad.toml").write_text(text + 'precision = "fp8"\n')
    plain = expand(load_spec(tmp_path / "plain.toml"))
    tf = expand(load_spec(tmp_path / "tf.toml"))
    assert "precision" not in plain[0].spec and tf[0].spec["precision"] == "tf32x3"
    assert plain[0].key != tf[0].key
    with pytest.raises(UserError, match="runtime.precision"):
        load_spec(tmp_path / "bad.toml")


# ---- Triton 3.6/3.7's interpreter with NumPy 2.5 (models/triton_tlstm/interpreter_compat.py) ----
def test_the_interpreter_fix_is_applied_only_where_that_interpreter_fails():
    """int() of a one-element array is an error from NumPy 2.5; Triton 3.6 and 3.7 convert a
    runtime loop bound that way (3.8 squeezes first). Only that pair is patched."""
    pytest.importorskip("triton")  # the kernel package imports it
    from tlstm_bench.models.triton_tlstm.interpreter_compat import needed

    assert needed("3.6.0", "2.5.5") and needed("3.7.1", "2.5.0") and needed("3.6.0", "2.6.0rc1")
    assert not any(needed(t, n) for t, n in (("3.6.0", "2.4.6"), ("3.8.0", "2.5.5"), ("3.9.0", "2.5.5"),
                                              ("3.5.1", "2.5.5"), ("4.0.0", "3.0.0")))


@pytest.mark.triton
def test_the_interpreter_fix_converts_a_runtime_loop_bound_and_undoes_itself(tt, monkeypatch):
    """Forced on this Triton: an interpreted kernel whose loop bound is a runtime argument still
    computes its sum (the wrapped patch converts through squeeze), and after the call the
    tensor class has no patched __index__ left (the interpreter's scope restores it)."""
    if not tt.INTERPRETED:
        pytest.skip("the interpreter's patch; compiled kernels never use it")
    import numpy as np
    import triton
    import triton.language as tl
    from triton.runtime import interpreter

    from tlstm_bench.models.triton_tlstm import interpreter_compat

    monkeypatch.setattr(interpreter, "_patch_lang_tensor", interpreter._patch_lang_tensor)  # undone after
    monkeypatch.setattr(interpreter_compat, "needed", lambda *_: True)
    assert interpreter_compat.apply() and interpreter_compat.apply()  # idempotent
    assert interpreter._patch_lang_tensor.tlstm_bench_compat

    @triton.jit
    def count(out_ptr, n):
        acc = tl.zeros((1,), tl.int32)
        for _ in tl.range(0, n):
            acc += 1
        tl.store(out_ptr + tl.arange(0, 1), acc)

    out = torch.zeros(1, dtype=torch.int32)
    count[(1,)](out, 7)
    assert out.item() == 7
    assert getattr(tl.core.tensor, "__index__", None) is not interpreter_compat._index

    class Handle:
        data = np.array([5], dtype=np.int32)

    assert interpreter_compat._index(type("T", (), {"handle": Handle()})()) == 5
