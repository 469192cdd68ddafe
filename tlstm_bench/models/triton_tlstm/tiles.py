"""Tile sizes and the launch path (per step or persistent) per shape.

A program owns BN locations x BM channels of one example; BK (forward) and BG (backward)
are the widths of the product's inner loop. The choice comes from a small menu
(``MENU``): the tuning table (``tuning.json``, written by ``benchmarks/triton_tune.py`` on a
GPU) picks a menu entry and the path for the shapes it measured, and ``default_choice`` for
every other shape. Only menu entries can be chosen, so ``benchmarks/triton_compile.py`` can
compile every variant the dispatcher can launch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import triton

TABLE = Path(__file__).with_name("tuning.json")
PERSISTENT_ENV = "TLSTM_TRITON_PERSISTENT"  # auto (default) | 0 (never) | 1 (always; error if impossible)


@dataclass(frozen=True)
class Menu:
    """One entry of the tile menu: fixed BN, BM, BK, BG and warps (only KDP and NJP, the
    padded Kd and channel-tile count, follow the shape), so that the compile check can
    compile every tile set the dispatcher can choose."""
    bn: int
    bm: int
    bk: int
    bg: int
    warps: int = 4
    fold: bool = False  # the batch folded into the rows (common.tile_rows): bn rows of any examples
    unroll: int = 1  # the window loops' unroll factor (tl.range loop_unroll_factor; 1: not unrolled)
    maxnreg: int | None = None  # registers a thread may take (None: the compiler's choice; Triton 3.6 spills
    # mid-u3 at its own 168, where a persistent grid, one program an SM, has room for 255)
    sync: str = "grid"  # between the persistent kernels' steps: "grid" (one barrier for the grid) or "flags"
    # (per-program step flags, each program waiting only for those it reads: common.step_flags, deps.py)
    defer: bool = False  # the window's broadcast products summed over their inner axis once a step, not once
    # per window entry and inner turn (forward.window_deferred, backward.dh_deferred)
    split: bool = False  # the forward makes h_{s-1} once per location before step s (a launch of its own, or a
    # second grid barrier) and the step reads it, instead of recomputing it for every window entry that reads it

    def __post_init__(self):
        if self.split and self.sync != "grid":
            raise ValueError("a split forward needs the grid barrier: the step flags count one sync a step")

    def tensor_cores(self, dtype: str) -> bool:
        """Whether its products are ``tl.dot`` (common.mma: float32, every side >= 16), so that
        a precision other than ieee changes what they compute."""
        return dtype == "float32" and not self.defer and min(self.bn, self.bm, self.bk, self.bg) >= 16


# "wide": the tiles of the first H100 run (tl.dot on 16 x 16 tiles); "narrow" and "single":
# more, smaller programs for batch 1 (the issue-19 step body: channels split 8 to a program,
# broadcast products; "single" for one location, 2D at L = 1), and wide inner loops (BK, BG
# 128: at M <= 128 one turn per kernel entry, so a step is a few dependent loads, not a
# dozen); "fp64": float64 takes the broadcast product everywhere (common.mma), with small
# inner widths to keep it in registers. "fold" and "fold64" (issue 28, opt-in: chosen only by
# the tuning table or forced; the H200 tabled fold at batch 15, L = 1 in tf32 and tf32x3, and
# fold64 at L = 10, where fast is faster still) fold the batch
# into the rows: at batch 15 and one location one 16-row tile holds the whole batch, and at
# 3D, L = 10 (1500 rows) "fold64" makes 24 x 4 = 96 programs, few enough for the persistent
# grid on 132 SMs, with tl.dot (tensor cores at tf32x3 / tf32) on 64 x 32 tiles. The 3D
# candidates at batch 1 (issue 28, opt-in the same way): "mid", 8 locations x 16 channels with
# 32-wide inner loops, 13 x 7 = 91 programs at 3D, L = 10, M = 100, so the grid fits 132 SMs
# and runs persistent where "narrow" (325 programs) runs one launch per step; the "-u3"
# entries unroll the window loops by 3 and load the index maps they read once a launch (in
# the persistent kernels, before the step loop; the kernels' UNROLL; docs/triton.md, "The
# window loops unrolled"), so that the dependent loads of several entries can be in flight at
# once; "mid-u3" and "single-u3", persistent (one
# program an SM), may take 255 registers (Triton 3.6 spills mid-u3 at its own 168). Unroll 1
# compiles to the same instructions as before it existed. The "-w8" entries (opt-in the same
# way) run 8 warps a program where the others run 4: a persistent grid holds one program an SM,
# whose four warp schedulers then have two warps each to switch between while a load is in
# flight instead of one. mid-u3-w8 may take 255 registers (at the compiler's 128 it spills).
# The "-flags" entries (issue 28, direction 2, opt-in the same way) are "mid-u3" and
# "single-u3" with per-program step flags instead of the grid barrier between the persistent
# kernels' steps (a program waits only for the programs it reads: deps.py); their per-step
# kernels are their twins'.
# The "-acc" entries (issue 28, opt-in the same way) defer the window's reductions
# (Menu.defer; forward.window_deferred, backward.dh_deferred): each window entry's products
# are added elementwise into (rows, inner width, channels) accumulators, summed over the inner
# width once a step, where the others sum them across the program's warps for every entry and
# inner turn. With one location a program ("single-acc", "single16-acc") no barrier is left in
# the inner loops; with 4 or 8 ("narrow-acc", "narrow-acc64", "mid-acc") some layout changes
# remain. "single16-acc" (16 channels: 700 programs at 3d-cn, L = 10, M = 100) may take 80
# registers, so that six fit an SM and its grid one wave on 132 SMs.
# The "-split" entries (issue 28, opt-in the same way; Menu.split) make h_{s-1} once per
# location before step s, by a launch of its own (per step) or a second grid barrier
# (persistent), and step s reads it (the kernels' FIRST path) where the others recompute it,
# with its norm statistics, for every window entry that reads it (9 at 3D): the step's chain
# loses the statistics' loads and sums and the h recompute, and gains a launch or a barrier.
# Their narrower inner loops keep the accumulators in registers (sm_90, 3d-cn, M = 100, Triton
# 3.6, forward: 128 to 185 a thread where narrow takes 228); results/evidence/cpu/defer_ptx/
# counts registers and barriers.
# The "-w1" entries (issue 28, opt-in the same way) run one warp a program where the others run
# four: a program's sums over its inner width become shuffles inside one warp, with no barrier
# among warps; a few layout changes still pass through shared memory. On the H200 more warps
# were slower ("-w8"); a one-location tile has little to share among four. sm_90, Triton 3.6,
# M = 100 (results/evidence/cpu/warps_ptx/): 2d single's per-step forward keeps 2 of its 19
# bar.sync at 255 registers, no spill (the persistent one spills 16 B); 3d-cn single-acc's 6 of
# 28 at 211.
MENU = {
    "wide": Menu(16, 16, 32, 64),
    "narrow": Menu(4, 8, 128, 128),
    "single": Menu(1, 8, 128, 128),
    "fold": Menu(16, 16, 32, 64, fold=True),
    "fold64": Menu(64, 32, 16, 16, warps=8, fold=True),
    "mid": Menu(8, 16, 32, 32),
    "mid-u3": Menu(8, 16, 32, 32, unroll=3, maxnreg=255),
    "narrow-u3": Menu(4, 8, 128, 128, unroll=3),
    "single-u3": Menu(1, 8, 128, 128, unroll=3, maxnreg=255),
    "wide-w8": Menu(16, 16, 32, 64, warps=8),
    "mid-u3-w8": Menu(8, 16, 32, 32, warps=8, unroll=3, maxnreg=255),
    "mid-u3-flags": Menu(8, 16, 32, 32, unroll=3, maxnreg=255, sync="flags"),
    "single-u3-flags": Menu(1, 8, 128, 128, unroll=3, maxnreg=255, sync="flags"),
    "single-acc": Menu(1, 8, 32, 32, defer=True),
    "single16-acc": Menu(1, 16, 32, 32, defer=True, maxnreg=80),
    "narrow-acc": Menu(4, 8, 32, 32, defer=True),
    "narrow-acc64": Menu(4, 8, 64, 64, defer=True),
    "mid-acc": Menu(8, 16, 16, 16, defer=True),
    "narrow-split": Menu(4, 8, 128, 128, split=True),
    "single16-acc-split": Menu(1, 16, 32, 32, defer=True, maxnreg=80, split=True),
    "mid-acc-split": Menu(8, 16, 16, 16, defer=True, split=True),
    "single-w1": Menu(1, 8, 128, 128, warps=1),
    "single-acc-w1": Menu(1, 8, 32, 32, defer=True, warps=1),
    "fp64": Menu(8, 16, 16, 16),
}
FLOAT32_MENU = ("wide", "narrow", "single", "fold", "fold64", "mid", "mid-u3", "narrow-u3", "single-u3", "wide-w8",
                "mid-u3-w8", "mid-u3-flags", "single-u3-flags", "single-acc", "single16-acc", "narrow-acc",
                "narrow-acc64", "mid-acc", "narrow-split", "single16-acc-split", "mid-acc-split", "single-w1",
                "single-acc-w1")

# What float32 at each precision (vocab.PRECISIONS, common.mma) is held to against eager in
# float64. TEST_TOLERANCE: tests/test_triton.py, the largest error over the largest entry of
# each output and gradient (tiny sizes, T = 3). CHECK_TOLERANCE: the device checks
# (benchmarks/triton_tune.py, triton_session.py), the norm of the difference over the norm at
# their check sizes (M = 20, T = 7), as before issue 28 for ieee. tf32 rounds each product's
# inputs to 10 mantissa bits (2^-11 = 4.9e-4 relative); tf32x3 adds the two correction
# products that bring it back near float32. Under the interpreter every precision computes
# what ieee computes (it ignores input_precision), so there they are checked, not told apart.
TEST_TOLERANCE = {"ieee": 2e-5, "tf32x3": 2e-5, "tf32": 5e-3}
CHECK_TOLERANCE = {"ieee": 1e-4, "tf32x3": 1e-4, "tf32": 1e-2}


def pow2(x: int, least: int = 1) -> int:
    return max(least, triton.next_power_of_2(max(int(x), 1)))


# The kernel entries (Kd: 3 in 2D, 9 in 3D) are padded to KDP >= 16. With KDP = 4 (2D), the
# H100 (Triton 3.6, sm_90, the "wide" tiles) counted the Q path of dL/dh twice: the broadcast
# product of a (16, 4) by a (4, 16) block came out doubled, while the interpreter, float64 and
# KDP = 16 were right (results/evidence/gpu/2026-11-26-h100-2/, benchmarks/triton_diag.py).
KDP_MIN = 16
# Diagnostics only (benchmarks/triton_diag.py), unset in normal use: the least padded
# kernel width and the warps of every program, to tell a layout-dependent fault from a
# logic error on a device.
DIAG_KDP_MIN_ENV, DIAG_WARPS_ENV = "TLSTM_TRITON_DIAG_KDP_MIN", "TLSTM_TRITON_DIAG_WARPS"


def tiles_for(menu: Menu, m: int, kd: int) -> dict[str, int]:
    """The constexpr tile sizes of one menu entry for M channels and Kd kernel entries."""
    kdp_min = int(os.environ.get(DIAG_KDP_MIN_ENV) or KDP_MIN)
    warps = int(os.environ.get(DIAG_WARPS_ENV) or menu.warps)
    return dict(BN=menu.bn, BM=menu.bm, BK=menu.bk, BG=menu.bg, KDP=pow2(kd, kdp_min),
                NJP=pow2(triton.cdiv(m, menu.bm)), FOLD=menu.fold, UNROLL=menu.unroll,
                num_warps=warps, maxnreg=menu.maxnreg, SYNC=int(menu.sync == "flags"),
                DEFER=int(menu.defer), SPLIT=int(menu.split))


def default_choice(m: int, n: int, batch: int, dtype: str) -> tuple[str, bool | None]:
    """(menu entry, persistent?) for a shape the table lacks. float32: persistent wherever it
    is possible (``launch._choose_path``), with the tiles the H100 measured fastest for 2D at
    M = 100 (results/evidence/gpu/2026-11-26-h100-2/): at batch 1 one location per program
    ("single": 25.9 / 30.7 us per timestep at L = 1 / 10, "narrow" 30.8 / 35.6, "wide" 66.6 /
    74.3), "narrow" where one location per program would make too many programs to be
    resident; at larger batches the wide tiles. float64 (checks, not speed): per step."""
    if dtype == "float64":
        return "fp64", None
    if batch == 1 and m <= 128:
        return ("single" if n <= 10 else "narrow"), True
    return "wide", True


def table_key(row: dict) -> tuple:
    """A tuning-table row's shape: (m, n, kd, batch, dtype, precision, norm, memory_conv). The
    norm and the memory-cell convolution are compile-time features of the kernels, so 3d, 3d-ln
    and 3d-cn (and 2d, 2d-m), which share every size, are separate shapes. A row without
    ``precision`` (the tables before issue 28) is for ieee; one without ``norm`` or
    ``memory_conv`` (before the 3D rows) for no norm with the convolution, the 2D tLSTM it
    measured."""
    return (row["m"], row["n"], row["kd"], row["batch"], row["dtype"], row.get("precision", "ieee"),
            row.get("norm", "none"), bool(row.get("memory_conv", True)))


@lru_cache(maxsize=None)
def _table(path: str) -> dict:
    """{table_key: row} of the table, the rows naming a tile set the compile check compiles."""
    if not os.path.exists(path):
        return {}
    out = {}
    for row in json.loads(Path(path).read_text())["entries"]:
        allowed = FLOAT32_MENU if row["dtype"] == "float32" else ("fp64",)
        if row["menu"] not in allowed:  # only tile sets the compile check compiles for that dtype
            continue
        out[table_key(row)] = row
    return out


def _row(m: int, n: int, kd: int, batch: int, dtype: str, precision: str, norm: str, memory_conv: bool) -> dict | None:
    shape = dict(m=m, n=n, kd=kd, batch=batch, dtype=dtype, precision=precision, norm=norm, memory_conv=memory_conv)
    return _table(str(TABLE)).get(table_key(shape))


def choose(m: int, n: int, kd: int, batch: int, dtype: str, precision: str = "ieee", *, norm: str = "none",
           memory_conv: bool = True) -> tuple[str, bool | None]:
    """(menu entry, persistent?) for a shape: the tuning table's, else ``default_choice``
    (the same for every precision: a table row decides where tensor cores pay)."""
    hit = _row(m, n, kd, batch, dtype, precision, norm, memory_conv)
    return (hit["menu"], hit["persistent"]) if hit is not None else default_choice(m, n, batch, dtype)


def beats_fast(m: int, n: int, kd: int, batch: int, dtype: str, precision: str = "ieee", *, norm: str = "none",
               memory_conv: bool = True) -> bool:
    """Whether the tuning table measured ``triton`` (its best correct variant) faster than
    ``fast`` at this shape: a row with ``fast_us_per_step`` above its ``us_per_step``. What
    training on CUDA runs when no implementation is named (``models.training_implementation``);
    without such a row, ``fast``."""
    hit = _row(m, n, kd, batch, dtype, precision, norm, memory_conv)
    return bool(hit and hit.get("fast_us_per_step") and hit["us_per_step"] < hit["fast_us_per_step"])


def persistent_mode() -> str:
    value = os.environ.get(PERSISTENT_ENV, "auto").strip().lower()
    return {"": "auto", "auto": "auto", "0": "off", "off": "off", "1": "on", "on": "on"}.get(value, value)
