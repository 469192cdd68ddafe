"""Registers, and barriers (bar.sync) and shuffles inside each loop, of the per-step kernels
(a middle step: forward_step, backward_step) of the default and the deferred ("-acc") tile
sets, compiled for sm_90 without a GPU (Triton's compiler and ptxas). Run in a checkout:

    PYTHONPATH=$PWD python results/evidence/cpu/defer_ptx/barriers.py > results/evidence/cpu/defer_ptx/barriers.txt

A loop is a backward branch of the PTX; "own" counts leave out the loops nested in it. Static
counts: what a step executes is each loop's count times its trips (README.md).
"""

import re
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

# (tile set, NORM, Kd): 3d-cn and 2d at M = 100
ROWS = [("narrow", 1, 9), ("narrow-acc", 1, 9), ("narrow-acc64", 1, 9), ("mid", 1, 9), ("mid-acc", 1, 9),
        ("single-acc", 1, 9), ("single16-acc", 1, 9), ("single", 0, 3), ("single-acc", 0, 3),
        ("narrow-split", 1, 9), ("single16-acc-split", 1, 9), ("mid-acc-split", 1, 9)]
KERNELS = ((forward.forward_step, "BK", dict(FIRST=False, FINISH=False)),
           (backward.backward_step, "BG", dict(HAS_NEXT=True)))
# A split forward's two launches a step (tiles.Menu.split): h_{s-1} alone (FINISH), then step s
# reading it (FIRST); its backward is its twin's.
SPLIT_KERNELS = ((forward.forward_step, "BK", dict(FIRST=False, FINISH=True)),
                 (forward.forward_step, "BK", dict(FIRST=True, FINISH=False)))


def loops(ptx: str) -> list[tuple[int, int, int, int, int]]:
    """(first line, last line, own bar.sync, own shfl.sync, own fma) of each loop, outermost first."""
    lines = [x.strip() for x in ptx.splitlines()]
    labels, spans = {}, []
    for i, x in enumerate(lines):
        m = re.match(r"(\$L__\w+):", x)
        if m:
            labels[m.group(1)] = i
        m = re.search(r"bra(?:\.uni)?\s+(\$L__\w+);", x)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            spans.append((labels[m.group(1)], i))
    spans.sort(key=lambda s: (s[0], -s[1]))
    out = []
    for a, b in spans:
        inner = [(c, d) for c, d in spans if a <= c and d <= b and (c, d) != (a, b)]
        own = [x for j, x in enumerate(lines[a:b + 1], a) if not any(c <= j <= d for c, d in inner)]
        out.append((a, b, sum("bar.sync" in x for x in own), sum("shfl.sync" in x for x in own),
                    sum(re.match(r"fma\.", x) is not None for x in own)))
    return out


def main():
    print(f"triton {triton.__version__}, sm_90, M = 100, per-step kernels (a middle step)")
    for menu, norm, kd in ROWS:
        m = tiling.MENU[menu]
        t = tiling.tiles_for(m, 100, kd)
        for fn, inner, flags in SPLIT_KERNELS if m.split else KERNELS:
            c = dict(NORM=norm, MEMCONV=True, FOLD=t["FOLD"], PRECISION="ieee", BN=t["BN"], BM=t["BM"], KDP=t["KDP"],
                     NJP=t["NJP"], UNROLL=t["UNROLL"], DEFER=t["DEFER"], **{inner: t[inner]}, **flags)
            c = tc.with_defaults(fn, c)
            k = triton.compile(ASTSource(fn=fn, signature=tc._signature(fn, c, "fp32"), constexprs=c),
                               target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": t["num_warps"], **({"maxnreg": m.maxnreg} if m.maxnreg else {})})
            ptx = k.asm["ptx"]
            total = sum("bar.sync" in x for x in ptx.splitlines())
            name = fn.__name__ + {(False, True): " (h)", (True, False): " (read h)"}.get(
                (flags.get("FIRST"), flags.get("FINISH")), "")
            print(f"{menu:18} NORM={norm} Kd={kd} {name:24} {inner}={t[inner]:<3} {tc._usage(k):18} "
                  f"bar.sync {total:3} in all; loops (lines a-b: own bar, shfl, fma):", flush=True)
            for a, b, bar, shfl, fma in loops(ptx):
                print(f"    {a:5}-{b:<5} bar {bar:3}  shfl {shfl:3}  fma {fma:4}")


if __name__ == "__main__":
    main()
