"""Registers and stack per thread of the persistent kernels in docs/triton.md's table (sm_90,
M = 100, without a GPU): the default, unrolled and 8-warp tile sets, 3d-cn (CN, memory conv, Kd = 9)
and 2d (no norm, memory conv, Kd = 3). Run in a checkout:

    PYTHONPATH=$PWD python results/evidence/cpu/unroll_ptx/registers.py [--per-step] [MENU ...]

--per-step: the per-step kernels (a middle step: forward_step, backward_step) instead.
"""

import sys
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import tlstm_bench
from tlstm_bench.models.triton_tlstm import backward, forward
from tlstm_bench.models.triton_tlstm import tiles as tiling

sys.path.insert(0, str(Path(tlstm_bench.__file__).resolve().parents[1] / "benchmarks"))
import triton_compile as tc  # noqa: E402

ROWS = [("narrow", 1, 9), ("narrow-u3", 1, 9), ("mid", 1, 9), ("mid-u3", 1, 9), ("single", 0, 3),
        ("single-u3", 0, 3), ("wide", 1, 9), ("wide-w8", 1, 9), ("mid-u3-w8", 1, 9)]

PER_STEP = "--per-step" in sys.argv
ONLY = [a for a in sys.argv[1:] if not a.startswith("--")]
KERNELS = ((forward.forward_step, "BK", dict(FIRST=False, FINISH=False)),
           (backward.backward_step, "BG", dict(HAS_NEXT=True))) if PER_STEP else \
    ((forward.forward_persistent, "BK", {}), (backward.backward_persistent, "BG", {}))

print(f"triton {triton.__version__}, {Path(tlstm_bench.__file__).resolve().parents[1]}")
for menu, norm, kd in [r for r in ROWS if not ONLY or r[0] in ONLY]:
    m = tiling.MENU[menu]
    t = tiling.tiles_for(m, 100, kd)
    usage = []
    for fn, inner, flags in KERNELS:
        c = dict(NORM=norm, MEMCONV=True, FOLD=t["FOLD"], PRECISION="ieee", BN=t["BN"], BM=t["BM"], KDP=t["KDP"],
                 NJP=t["NJP"], UNROLL=t["UNROLL"], **{inner: t[inner]}, **flags)
        opts = {"num_warps": t["num_warps"], **({"maxnreg": m.maxnreg} if m.maxnreg else {})}
        k = triton.compile(ASTSource(fn=fn, signature=tc._signature(fn, c, "fp32"), constexprs=c),
                           target=GPUTarget("cuda", 90, 32), options=opts)
        usage.append(tc._usage(k))
    print(f"{menu:10} NORM={norm} Kd={kd}  fwd {usage[0]}  bwd {usage[1]}", flush=True)
