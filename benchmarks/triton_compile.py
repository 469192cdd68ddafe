"""Compile the ``triton`` implementation's kernels for a GPU, without a GPU (ahead of time).

Triton's CPU interpreter checks what the kernels compute, not that they compile: it is
lenient about things the GPU compiler rejects (types carried around loops, tile shapes).
This compiles every kernel variant (norm none/cn/ln x memory convolution on/off x first/
middle/finisher forward and last/middle backward) for a CUDA architecture with Triton's
own compiler and ptxas (both ship in the triton wheel) and prints each variant's
registers and stack (spills) from cuobjdump.

    python benchmarks/triton_compile.py                 # sm_90 (H100/H200), float32, M = 100
    python benchmarks/triton_compile.py --dtype fp64 --channels 1100 --heaviest

Run it without TRITON_INTERPRET set. Exits 1 if a variant fails to compile.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time

INDEX_ARGS = {"hidx_ptr", "cidx_ptr", "invh_ptr", "invc_ptr"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90, help="CUDA compute capability x10 (90: H100/H200)")
    ap.add_argument("--dtype", choices=["fp32", "fp64"], default="fp32")
    ap.add_argument("--channels", type=int, default=100, help="M (picks the tile sizes)")
    ap.add_argument("--kernel-entries", type=int, default=9, help="K^(D-1) (picks the Q tile)")
    ap.add_argument("--heaviest", action="store_true",
                    help="only the two largest variants (LN, memory convolution, middle step)")
    args = ap.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter's kernels cannot be compiled", file=sys.stderr)
        return 2

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from tlstm_bench.models import triton_tlstm as tt

    target = GPUTarget("cuda", args.arch, 32)
    tiles = tt._tiles(16, args.channels, args.kernel_entries)
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    print(f"sm_{args.arch}, {args.dtype}, M={args.channels}, tiles {tiles}")

    def signature(fn, consts):
        def kind(name):
            if name in consts:
                return "constexpr"
            if name.endswith("_ptr"):
                return "*i32" if name in INDEX_ARGS else f"*{args.dtype}"
            return "fp32" if name == "eps" else "i32"
        return {name: kind(name) for name in fn.arg_names}

    def usage(kernel) -> str:
        cubin = kernel.asm.get("cubin")
        if not cubin or not os.path.exists(cuobjdump):
            return ""
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(cubin)
        out = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True).stdout
        os.unlink(f.name)
        return " ".join(re.findall(r"(?:REG|STACK):\d+", out))

    common = dict(BN=tiles["BN"], BM=tiles["BM"], KDP=tiles["KDP"], NJP=tiles["NJP"])
    variants = []
    for norm, memory_conv in itertools.product((0, 1, 2), (True, False)):
        for first, finish in ((True, False), (False, False), (False, True)):
            variants.append((tt._forward_step, dict(NORM=norm, MEMCONV=memory_conv, FIRST=first, FINISH=finish,
                                                    BK=tiles["BK"], **common)))
        for has_next in (True, False):
            variants.append((tt._backward_step, dict(NORM=norm, MEMCONV=memory_conv, HAS_NEXT=has_next,
                                                     BG=tiles["BG"], **common)))
    if args.heaviest:
        variants = [(fn, c) for fn, c in variants
                    if c["NORM"] == 2 and c["MEMCONV"] and not c.get("FIRST") and not c.get("FINISH")
                    and c.get("HAS_NEXT", True)]
    failed = 0
    for fn, consts in variants:
        flags = " ".join(f"{k}={v}" for k, v in consts.items() if k.isupper() and not k.startswith("B")
                         and k not in ("KDP", "NJP"))
        start = time.perf_counter()
        try:
            kernel = triton.compile(ASTSource(fn=fn, signature=signature(fn, consts), constexprs=consts),
                                    target=target, options={"num_warps": 4})
        except Exception as exc:  # noqa: BLE001  (report every variant, then fail)
            failed += 1
            print(f"FAILED {fn.__name__} {flags}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            continue
        print(f"ok {fn.__name__} {flags} ({time.perf_counter() - start:.1f} s) {usage(kernel)}", flush=True)
    print(f"{len(variants) - failed} of {len(variants)} variants compiled")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
