"""Compile the ``triton`` implementation's kernels for a GPU, without a GPU (ahead of time).

Triton's CPU interpreter checks what the kernels compute, not that they compile: it is
lenient about things the GPU compiler rejects (a float64 ``tl.dot`` in Triton 3.6, types
carried around loops, tile shapes). This compiles, with Triton's own compiler and ptxas (both
ship in the triton wheel), every kernel variant the dispatcher can launch: for each CUDA
architecture, each dtype with each tile-menu entry it can be given (float32: every float32
entry; float64: its own), each norm (none/cn/ln) and memory convolution (on/off), the five
per-step kernels (forward first/middle/finisher, backward last/middle) and the two persistent
ones, at two shapes (Kd = 3, M = 100: the 2d preset; Kd = 9, M = 1100: a 3D one; the shape
sets only KDP and NJP, the padded sizes of the Q columns and of the channel-tile count).
It prints each variant's registers and stack (spills) from cuobjdump.

    python benchmarks/triton_compile.py                  # all of it, sm_80 and sm_90 (tens of minutes on 2 cores)
    python benchmarks/triton_compile.py --ci             # what the test suite compiles (see below)
    python benchmarks/triton_compile.py --arch 90 --dtype fp64 --jobs 4

Every precision (ieee, tf32x3, tf32) is compiled for the tile sets whose products are
``tl.dot``; the others take ieee whatever is asked (launch.Geometry).

``--ci`` (tests/test_triton.py) compiles at the first shape one variant of every step body in
every precision: for the newest architecture asked for (sm_90), the two persistent kernels
(their loops call the step bodies with every flag the per-step kernels take:
first/middle/finisher, last/middle) of every norm x memory conv with a tl.dot tile set
(wide), a broadcast-sum one (narrow), the same with its sums deferred (narrow-acc), the
batch folded into the rows (fold) and float64, and of LN + memory conv (the heaviest) with
every tile set; the per-step kernels, thin wrappers
around the same bodies, for the heaviest with the wide and float64 tiles; tf32x3 and tf32 for
the heaviest with the wide and fold64 tiles; and for the older architectures (sm_80, another
tl.dot lowering) the heaviest with the wide, fold64 (also at tf32x3 and tf32) and float64
tiles; and for every architecture the persistent kernels of the heaviest with the step flags
(mid-u3-flags: SYNC = 1, a producer table 64 wide). A "-flags" entry's per-step kernels are
its twin's and are not compiled again, nor a "-split" entry's kernels but its persistent
forward (SPLIT = 1). Run it without TRITON_INTERPRET set. Exits 1 if a variant fails to
compile.
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
from concurrent.futures import ProcessPoolExecutor

from tlstm_bench.errors import UserError
from tlstm_bench.models import require_triton

INDEX_ARGS = {"hidx_ptr", "cidx_ptr", "invh_ptr", "invc_ptr"}
SHAPES = ((3, 100), (9, 1100))  # (Kd, M): the 2d preset at M = 100 (what the tuner times), a 3D K = 3 at M = 1100


def variants(archs, dtypes, shapes, ci: bool) -> list[tuple]:
    """(arch, dtype, menu, kd, m, kernel name, constexprs, warps) of every variant to compile:
    every precision (vocab.PRECISIONS) for the tile sets whose products are tl.dot, ieee for
    the others (launch.Geometry passes ieee there)."""
    from tlstm_bench.models.triton_tlstm import tiles as tiling
    from tlstm_bench.vocab import PRECISIONS

    out = []
    for arch, dtype, (kd, m) in itertools.product(archs, dtypes, shapes):
        menus = tiling.FLOAT32_MENU if dtype == "fp32" else ("fp64",)
        for menu, norm, memconv in itertools.product(menus, (0, 1, 2), (True, False)):
            t = tiling.tiles_for(tiling.MENU[menu], m, kd)
            dots = tiling.MENU[menu].tensor_cores("float32" if dtype == "fp32" else "float64")
            for precision in PRECISIONS if dots else ("ieee",):
                base = dict(NORM=norm, MEMCONV=memconv, FOLD=t["FOLD"], PRECISION=precision, BN=t["BN"],
                            BM=t["BM"], KDP=t["KDP"], NJP=t["NJP"], UNROLL=t["UNROLL"], DEFER=t["DEFER"])
                fwd, bwd = dict(base, BK=t["BK"]), dict(base, BG=t["BG"])
                persistent, per_step = _in_ci(arch == max(archs), menu, norm == 2 and memconv, precision) if ci \
                    else (True, True)
                if tiling.MENU[menu].sync != "grid":  # per step: its twin's kernels; persistent: with flags
                    per_step = False
                    fwd, bwd = dict(fwd, SYNC=1, DEPW=FLAGS_DEPW), dict(bwd, SYNC=1, DEPW=FLAGS_DEPW)
                kernels = [("forward_persistent", dict(fwd, SPLIT=t["SPLIT"]))] if persistent else []
                if t["SPLIT"]:  # its per-step kernels and its backward are its twin's; its own: the forward loop
                    per_step = False
                elif persistent:
                    kernels.append(("backward_persistent", bwd))
                if per_step:
                    kernels += [("forward_step", dict(fwd, FIRST=first, FINISH=finish))
                                for first, finish in ((True, False), (False, False), (False, True))]
                    kernels += [("backward_step", dict(bwd, HAS_NEXT=has_next)) for has_next in (True, False)]
                out += [(arch, dtype, menu, kd, m, name, consts, t["num_warps"]) for name, consts in kernels]
    return out


# --ci: one variant of every step body (norm x memory conv x folded or not x tl.dot, sum or
# float64 products) in every precision, for the newest architecture asked for, and the tl.dot
# lowering of the older ones (sm_80's mma, not sm_90's wgmma) at the heaviest body.
CI_EVERY_BODY = ("wide", "narrow", "fold", "fp64", "narrow-acc")  # dot, sum, dot over folded rows, float64,
# sums deferred
CI_DOT = ("wide", "fold64")  # the tl.dot tile sets compiled at tf32x3 and tf32
CI_FLAGS = "mid-u3-flags"  # the step flags: one variant of each persistent kernel, for every architecture
FLAGS_DEPW = 64  # the producer table's width (deps.py; 2d at L = 10, M = 100, single tiles: 39 -> 64)


def _in_ci(newest: bool, menu: str, heaviest: bool, precision: str) -> tuple[bool, bool]:
    """(persistent kernels, per-step kernels) of one combination in the --ci set."""
    if precision != "ieee":
        return heaviest and menu in CI_DOT and (newest or menu == "fold64"), False
    if menu.endswith("-flags"):
        return heaviest and menu == CI_FLAGS, False
    if not newest:
        return heaviest and menu in ("wide", "fold64", "fp64"), False
    return menu in CI_EVERY_BODY or heaviest, heaviest and menu in ("wide", "fp64")


def with_defaults(fn, consts: dict) -> dict:
    """``consts`` and the defaults of the kernel's other arguments that have one (the step
    flags' SYNC = 0, DEPW, and None pointers: what a launch that does not pass them compiles);
    with SYNC set, the flags' two pointers stay run-time arguments, as launch.py passes them."""
    passed = set(consts) | ({"flags_ptr", "deps_ptr"} if consts.get("SYNC") else set())
    return {**{p.name: p.default for p in fn.params if p.has_default and p.name not in passed}, **consts}


def _signature(fn, consts: dict, dtype: str) -> dict:
    def kind(name):
        if name in consts:
            return "constexpr"
        if name == "sem_ptr":
            return "*u32"
        if name in ("flags_ptr", "deps_ptr"):
            return "*i32"
        if name.endswith("_ptr"):
            return "*i32" if name in INDEX_ARGS else f"*{dtype}"
        return "fp32" if name == "eps" else "i32"
    return {name: kind(name) for name in fn.arg_names}


def aligned(fn, signature: dict) -> dict:
    """Every pointer argument 16-byte aligned, as a launch tells the compiler (Triton's
    specialization of a torch tensor's address: ``tt.divisibility``), so that this compiles the
    code a device runs: the alignment changes vectorized loads and the register allocation."""
    return {(i,): [["tt.divisibility", 16]] for i, name in enumerate(fn.arg_names)
            if signature[name].startswith("*")}


def _usage(kernel) -> str:
    import triton

    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    cubin = kernel.asm.get("cubin")
    if not cubin or not os.path.exists(cuobjdump):
        return ""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    out = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    return " ".join(re.findall(r"(?:REG|STACK):\d+", out))


def compile_one(variant: tuple) -> tuple[bool, str]:
    """Compile one variant; (ok, the line to print)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from tlstm_bench.models.triton_tlstm import backward, forward
    from tlstm_bench.models.triton_tlstm import tiles as tiling

    arch, dtype, menu, kd, m, name, consts, warps = variant
    fn = getattr(forward if name.startswith("forward") else backward, name)
    flags = " ".join(f"{k}={int(v)}" for k, v in consts.items() if k in ("NORM", "MEMCONV", "FIRST", "FINISH",
                                                                          "HAS_NEXT"))
    label = f"sm_{arch} {dtype} {menu} {consts['PRECISION']} Kd={kd} M={m} {name} {flags}"
    start = time.perf_counter()
    try:
        options = {"num_warps": warps}
        if tiling.MENU[menu].maxnreg is not None:  # as launch._launch_options passes it
            options["maxnreg"] = tiling.MENU[menu].maxnreg
        consts = with_defaults(fn, consts)
        signature = _signature(fn, consts, dtype)
        kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=aligned(fn, signature)),
                                target=GPUTarget("cuda", arch, 32), options=options)
    except Exception as exc:  # noqa: BLE001  (report every variant, then fail)
        first = str(exc).strip().splitlines()
        return False, f"FAILED {label}: {type(exc).__name__}: {' | '.join(first[:6])[:600]}"
    return True, f"ok {label} ({time.perf_counter() - start:.1f} s) {_usage(kernel)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="80,90", help="CUDA compute capabilities x10, comma-separated (90: H100/H200)")
    ap.add_argument("--dtype", choices=["fp32", "fp64", "both"], default="both")
    ap.add_argument("--ci", action="store_true", help="the test suite's subset (see the module docstring)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="compiler processes")
    args = ap.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter's kernels cannot be compiled", file=sys.stderr)
        return 2
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns when it is unset
    try:
        triton = require_triton("benchmarks/triton_compile.py", instead="")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    archs = [int(a) for a in args.arch.split(",")]
    dtypes = ["fp32", "fp64"] if args.dtype == "both" else [args.dtype]
    todo = variants(archs, dtypes, SHAPES[:1] if args.ci else SHAPES, args.ci)
    print(f"triton {triton.__version__}: {len(todo)} variants, {args.jobs} processes", flush=True)
    failed = 0
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for ok, line in pool.map(compile_one, todo):
            failed += not ok
            print(line, flush=True)
    print(f"{len(todo) - failed} of {len(todo)} variants compiled")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
