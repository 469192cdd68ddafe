import sys, hashlib, itertools
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import tlstm_bench
sys.path.insert(0, str(Path(tlstm_bench.__file__).resolve().parents[1] / "benchmarks"))
import triton_compile as tc
from tlstm_bench.models.triton_tlstm import tiles as tiling
which = sys.argv[1]  # forward or backward
todo = [v for v in tc.variants([90], ["fp32", "fp64"], tc.SHAPES[:1], False) if v[5].startswith(which)]
# a sample: every menu x norm x memconv for persistent, per-step for two menus
todo = [v for v in todo if v[5].endswith("persistent") or v[2] in ("narrow", "fp64", "mid-u3")]
todo = [v for v in todo if v[6]["PRECISION"] in ("ieee", "tf32")]
DEBUG = (".file", "//", ".loc", "$L__tmp")
out = []
import concurrent.futures as cf
def one(v):
    arch, dtype, menu, kd, m, name, consts, warps = v
    from tlstm_bench.models.triton_tlstm import forward, backward
    fn = getattr(forward if name.startswith("forward") else backward, name)
    opts = {"num_warps": warps}
    if tiling.MENU[menu].maxnreg: opts["maxnreg"] = tiling.MENU[menu].maxnreg
    k = triton.compile(ASTSource(fn=fn, signature=tc._signature(fn, consts, dtype), constexprs=consts), target=GPUTarget("cuda", arch, 32), options=opts)
    code = "\n".join(l for l in k.asm["ptx"].split(".section\t.debug")[0].splitlines() if not l.strip().startswith(DEBUG))
    flags = " ".join(f"{a}={int(b)}" for a, b in consts.items() if a in ("NORM", "MEMCONV", "FIRST", "FINISH", "HAS_NEXT"))
    import re
    norm = sorted(re.sub(r"%[a-z]+[0-9]+", "%R", re.sub(r"\$L__BB[0-9_]+", "L", l)).strip() for l in code.splitlines())
    ms = hashlib.sha1("\n".join(norm).encode()).hexdigest()[:12]
    return f"{menu} {consts['PRECISION']} {name} {flags} {hashlib.sha1(code.encode()).hexdigest()[:12]} multiset={ms} n={len(norm)}"
with cf.ProcessPoolExecutor(2) as ex:
    for line in ex.map(one, todo): print(line, flush=True)
