"""Registers, and barriers (bar.sync) and shuffles inside each loop, of the per-step kernels (a
middle step: forward_step, backward_step) of the one-warp tile sets ("-w1") beside their
four-warp twins, compiled for sm_90 without a GPU (Triton's compiler and ptxas). Run in a checkout:

    PYTHONPATH=$PWD python results/evidence/cpu/warps_ptx/warps.py > results/evidence/cpu/warps_ptx/warps.txt

The loop counting is ``defer_ptx/barriers.py``'s: a loop is a backward branch of the PTX; "own"
counts leave out the loops nested in it; what a step executes is each loop's count times its trips.
"""

import sys
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import tlstm_bench
from tlstm_bench.models.triton_tlstm import backward, forward
from tlstm_bench.models.triton_tlstm import tiles as tiling

ROOT = Path(tlstm_bench.__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "results" / "evidence" / "cpu" / "defer_ptx")]
import triton_compile as tc  # noqa: E402
from barriers import KERNELS, loops  # noqa: E402

# (tile set, NORM, Kd): 2d and 3d-cn at M = 100, each one-warp entry after its twin
ROWS = [("single", 0, 3), ("single-w1", 0, 3), ("single-acc", 0, 3), ("single-acc-w1", 0, 3),
        ("single-acc", 1, 9), ("single-acc-w1", 1, 9)]

print(f"triton {triton.__version__}, sm_90, M = 100, per-step kernels (a middle step)")
for menu, norm, kd in ROWS:
    m = tiling.MENU[menu]
    t = tiling.tiles_for(m, 100, kd)
    for fn, inner, flags in KERNELS:
        c = dict(NORM=norm, MEMCONV=True, FOLD=t["FOLD"], PRECISION="ieee", BN=t["BN"], BM=t["BM"], KDP=t["KDP"],
                 NJP=t["NJP"], UNROLL=t["UNROLL"], DEFER=t["DEFER"], **{inner: t[inner]}, **flags)
        c = tc.with_defaults(fn, c)
        sig = tc._signature(fn, c, "fp32")
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=c, attrs=tc.aligned(fn, sig)),
                           target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": t["num_warps"], **({"maxnreg": m.maxnreg} if m.maxnreg else {})})
        ptx = k.asm["ptx"]
        total = sum("bar.sync" in x for x in ptx.splitlines())
        print(f"{menu:14} warps={t['num_warps']} NORM={norm} Kd={kd} {fn.__name__:14} {inner}={t[inner]:<3} "
              f"{tc._usage(k):18} bar.sync {total:3} in all; loops (lines a-b: own bar, shfl, fma):", flush=True)
        for a, b, bar, shfl, fma in loops(ptx):
            print(f"    {a:5}-{b:<5} bar {bar:3}  shfl {shfl:3}  fma {fma:4}")
