"""Whether the step flags (SYNC, flags_ptr, deps_ptr: the persistent kernels' new arguments, at
their defaults for every grid-barrier tile set) left the compiled code alone: the sm_90 PTX hash
(debug lines removed, as same_code.py) of every persistent kernel of every grid-barrier tile
set (ieee), each norm x memory conv, at Kd = 3, M = 100. Run in each checkout and diff:

    (cd OLD && PYTHONPATH=$PWD python PATH/TO/flags_compare.py > old.txt)
    (cd NEW && PYTHONPATH=$PWD python PATH/TO/flags_compare.py > new.txt); diff old.txt new.txt
"""
import sys, hashlib
from pathlib import Path
import concurrent.futures as cf
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import tlstm_bench
sys.path.insert(0, str(Path(tlstm_bench.__file__).resolve().parents[1] / "benchmarks"))
import triton_compile as tc
from tlstm_bench.models.triton_tlstm import tiles as tiling
DEBUG = (".file", "//", ".loc", "$L__tmp")

def one(v):
    arch, dtype, menu, kd, m, name, consts, warps = v
    from tlstm_bench.models.triton_tlstm import forward, backward
    fn = getattr(forward if name.startswith("forward") else backward, name)
    if hasattr(tc, "with_defaults"):
        consts = tc.with_defaults(fn, consts)
    opts = {"num_warps": warps}
    if tiling.MENU[menu].maxnreg: opts["maxnreg"] = tiling.MENU[menu].maxnreg
    k = triton.compile(ASTSource(fn=fn, signature=tc._signature(fn, consts, dtype), constexprs=consts),
                       target=GPUTarget("cuda", arch, 32), options=opts)
    code = "\n".join(l for l in k.asm["ptx"].split(".section\t.debug")[0].splitlines() if not l.strip().startswith(DEBUG))
    flags = " ".join(f"{a}={int(b)}" for a, b in consts.items() if a in ("NORM", "MEMCONV"))
    return f"{menu} {name} {flags} {hashlib.sha1(code.encode()).hexdigest()[:12]} {tc._usage(k)}"

todo = [v for v in tc.variants([90], ["fp32", "fp64"], tc.SHAPES[:1], False)
        if v[5].endswith("persistent") and v[6]["PRECISION"] == "ieee" and getattr(tiling.MENU[v[2]], "sync", "grid") == "grid"]
print(f"triton {triton.__version__}: {len(todo)} kernels", flush=True)
with cf.ProcessPoolExecutor(2) as ex:
    for line in ex.map(one, todo):
        print(line, flush=True)
