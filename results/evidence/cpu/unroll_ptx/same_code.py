"""Whether the shipped tile sets compile to the same instructions as at another commit: the sm_90
PTX of six kernels (narrow, wide, single, fp64 and fold tiles; forward and backward, per step and
persistent), without what only debugging reads (.file, .loc, comments, $L__tmp labels and the
.debug sections), hashed. Run it in each checkout and compare the hashes:

    (cd OLD && PYTHONPATH=$PWD python PATH/TO/same_code.py --before-unroll)   # a commit before UNROLL
    (cd NEW && PYTHONPATH=$PWD python PATH/TO/same_code.py)
"""

import hashlib
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

CASES = [("narrow", "forward_persistent", 1, 9), ("narrow", "backward_persistent", 1, 9),
         ("wide", "backward_persistent", 2, 9), ("single", "forward_persistent", 0, 3),
         ("fp64", "forward_step", 2, 9), ("fold", "backward_step", 1, 3)]
DEBUG = (".file", "//", ".loc", "$L__tmp")

print(f"triton {triton.__version__}, {Path(tlstm_bench.__file__).resolve().parents[1]}")
for menu, kernel, norm, kd in CASES:
    t = tiling.tiles_for(tiling.MENU[menu], 100, kd)
    c = dict(NORM=norm, MEMCONV=True, FOLD=t["FOLD"], PRECISION="ieee", BN=t["BN"], BM=t["BM"], KDP=t["KDP"],
             NJP=t["NJP"])
    if "--before-unroll" not in sys.argv:
        c["UNROLL"] = 1
    c.update(BK=t["BK"]) if kernel.startswith("forward") else c.update(BG=t["BG"])
    if kernel == "forward_step":
        c.update(FIRST=False, FINISH=False)
    if kernel == "backward_step":
        c.update(HAS_NEXT=True)
    fn = getattr(forward if kernel.startswith("forward") else backward, kernel)
    dtype = "fp64" if menu == "fp64" else "fp32"
    if hasattr(tc, "with_defaults"):  # the step flags' arguments, at their defaults (grid barrier)
        c = tc.with_defaults(fn, c)
    k = triton.compile(ASTSource(fn=fn, signature=tc._signature(fn, c, dtype), constexprs=c),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": t["num_warps"]})
    ptx = k.asm["ptx"].split(".section\t.debug")[0]
    code = "\n".join(line for line in ptx.splitlines() if not line.strip().startswith(DEBUG))
    print(menu, kernel, f"NORM={norm} Kd={kd}", hashlib.sha1(code.encode()).hexdigest()[:12], tc._usage(k))
