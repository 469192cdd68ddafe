"""The floor under a persistent step: what a step costs on this GPU when it holds nothing but
the synchronisation and a chain of dependent loads (issue 28's "rough limit", measured).

Issue 28 reads the fastest a tLSTM step can be as "the latency of one grid-wide dependency per
step, about 1-2 us each way" (arithmetic, not measured). This measures it, with the same grid
barrier the persistent kernels use (``common.grid_barrier``) and nothing of the model:

* ``persistent``: one cooperative launch of ``STEPS`` steps; in each, every program reads the
  value its neighbour wrote in the step before (one load from L2 after the barrier's acquire),
  follows ``chain`` more loads, each address taken from the load before it (a table in global
  memory: the serial round trips a step body makes, index map -> partials -> h), writes its own
  value and meets the others at the barrier. At 1, 16, 64 programs and one a streaming
  multiprocessor, with 0, 2 and 8 chained loads; and at one program an SM with 2 chained loads,
  each program also reading a slice of weights of its own every step (32 and 128 KB, 4 KB
  blocks summed, independent of the chain as a step's W^h slice is): what the barrier's
  acquire, which invalidates L1, costs a kernel that re-reads its weights from L2 every step;
* ``host`` and ``graph``: the same step without the barrier, one launch a step (the launch
  boundary is the barrier: the per-step path), launched from Python one after another
  (``host``) or captured once as a CUDA graph and replayed (``graph``: what ``triton-graph`` does).

Each case is checked, not only timed: its first run from a known state gives exactly the
values of a host model of the same recurrence (:func:`expected`), so a barrier that let a
program read a stale value would show. Medians of interleaved rounds (CUDA events), with the
interquartile range. The kernels' time per step beside this floor is what a faster kernel can
still take away; the floor itself is what only another kind of synchronisation would (docs/triton.md).

    PYTHONPATH=. python3 benchmarks/sync_floor.py --out floor.json    # a GPU: a few seconds
    TRITON_INTERPRET=1 PYTHONPATH=. python3 benchmarks/sync_floor.py --device cpu --out floor.json

``triton_session.py`` runs it last (its ``floor`` group): ``floor.json`` in its archive, and a
``FLOOR:`` line a case at the end of its ``targets.txt``. On a CPU (the interpreter, one program) it checks the flow and
the arithmetic, not the timings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # cuda_clock, beside it, also when imported as a module
from cuda_clock import sync, timed_ms  # noqa: E402

TABLE = 1024  # entries of the chained loads' table (4 KB: in L2, and in L1 where nothing invalidates it)
CHAINS = (0, 2, 8)
BLOCK = 1024  # floats of one block of a program's weight slice (4 KB)
WEIGHT_BLOCKS = (8, 32)  # the slices read every step: 32 and 128 KB (2d at M = 100: ~40 KB; wide 3d-cn: ~113 KB)
STEPS = {"cuda": 2000, "cpu": 4}  # a persistent launch's steps (one launch a step, host or graph: a tenth on CUDA)
MIN_ROUNDS, MAX_ROUNDS = 3, 9

try:  # Triton is optional (the `gpu` extra): without it this module imports, and measure() says so
    import triton
    import triton.language as tl

    from tlstm_bench.models.triton_tlstm.common import grid_barrier
except ImportError:  # pragma: no cover
    triton = None

if triton is not None:
    @triton.jit
    def floor_step(sem_ptr, buf_ptr, table_ptr, w_ptr, first, steps, CHAIN: tl.constexpr, BARRIER: tl.constexpr,
                   TABLE_SIZE: tl.constexpr, WEIGHTS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
        """Steps first .. first + steps - 1: program p reads its neighbour's value of the step
        before from buf[s % 2], follows CHAIN dependent loads through the table, and writes
        v + 1 + (the last index) into buf[(s + 1) % 2]; a grid barrier ends each step (BARRIER).
        With WEIGHTS, it also sums its own WEIGHTS blocks of BLOCK_SIZE floats of w every step
        (zeros: they add nothing, and the compiler cannot know it)."""
        n = tl.num_programs(0)
        p = tl.program_id(0)
        for s in range(first, first + steps):
            v = tl.load(buf_ptr + (s % 2) * n + (p + 1) % n)
            idx = v % TABLE_SIZE
            for _ in tl.static_range(CHAIN):
                idx = tl.load(table_ptr + idx)
            if WEIGHTS > 0:
                acc = tl.zeros([BLOCK_SIZE], tl.float32)
                for b in tl.static_range(WEIGHTS):
                    acc += tl.load(w_ptr + (p * WEIGHTS + b) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE))
                idx += (tl.sum(acc, axis=0) > 1e30).to(tl.int32)
            tl.store(buf_ptr + ((s + 1) % 2) * n + p, v + 1 + idx)
            if BARRIER:
                grid_barrier(sem_ptr)


def table() -> np.ndarray:
    """The chained loads' table: a permutation, so that a chain visits scattered entries."""
    return ((np.arange(TABLE) * 389 + 7) % TABLE).astype(np.int32)


def expected(buf: np.ndarray, first: int, steps: int, chain: int) -> np.ndarray:
    """The host model: ``buf`` (2, n) after ``steps`` steps from ``first``, as the kernel computes it."""
    buf, t = buf.astype(np.int64).copy(), table().astype(np.int64)
    for s in range(first, first + steps):
        v = np.roll(buf[s % 2], -1)  # program p reads program (p + 1) % n
        idx = v % TABLE
        for _ in range(chain):
            idx = t[idx]
        buf[(s + 1) % 2] = v + 1 + idx
    return buf


@dataclass
class Case:
    mode: str  # persistent, host, graph
    programs: int
    chain: int
    steps: int
    weights: int = 0  # blocks of BLOCK floats a program reads every step
    samples: list = field(default_factory=list)
    result: dict = field(default_factory=dict)
    fn: object = None


def cases(device: str) -> list[Case]:
    """What is measured: on a CPU (the interpreter) one program, a short run of each mode but the graph."""
    if device != "cuda":
        n = STEPS["cpu"]
        return ([Case("persistent", 1, c, n) for c in CHAINS[:2]] + [Case("persistent", 1, 2, n, weights=2)]
                + [Case("host", 1, 0, n)])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    counts = sorted({1, 16, 64, sms} - {c for c in (16, 64) if c > sms})
    n = STEPS["cuda"]
    return ([Case("persistent", p, c, n) for p in counts for c in CHAINS]
            + [Case("persistent", sms, 2, n, weights=w) for w in WEIGHT_BLOCKS]
            + [Case(m, p, 0, n // 10) for m in ("host", "graph") for p in (1, sms)])


def prepare(case: Case, device: str) -> None:
    """Buffers, the launch and its check: the first run from a known state against :func:`expected`."""
    from tlstm_bench.models.triton_tlstm import launch

    step = floor_step
    start = np.arange(2 * case.programs, dtype=np.int32).reshape(2, case.programs)
    buf = torch.from_numpy(start.copy()).to(device)
    tab = torch.from_numpy(table()).to(device)
    w = torch.zeros(max(case.programs * case.weights * BLOCK, 1), dtype=torch.float32, device=device)
    sem = launch._semaphore(torch.device(device))  # the persistent kernels' zeroed uint32 counter
    grid = (case.programs,)
    consts = dict(CHAIN=case.chain, TABLE_SIZE=TABLE, WEIGHTS=case.weights, BLOCK_SIZE=BLOCK, num_warps=4)
    if case.mode == "persistent":
        coop = {} if launch.INTERPRETED else {"launch_cooperative_grid": True}

        def run():
            step[grid](sem, buf, tab, w, 0, case.steps, BARRIER=1, **consts, **coop)
    else:
        def steps():
            for s in range(case.steps):
                step[grid](sem, buf, tab, w, s, 1, BARRIER=0, **consts)
        run = steps
        if case.mode == "graph":
            steps()  # compiled and run once outside the capture; the check below starts again
            sync(device)
            buf.copy_(torch.from_numpy(start))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                steps()
            buf.copy_(torch.from_numpy(start))  # the capture ran nothing; the state it starts from
            run = graph.replay
    run()
    sync(device)
    want = expected(start, 0, case.steps, case.chain)
    got = buf.cpu().numpy().astype(np.int64)
    case.result = dict(_described(case), right=bool(np.array_equal(got, want)))
    case.fn = run


def _described(case: Case) -> dict:
    return dict(mode=case.mode, programs=case.programs, chain=case.chain, weights_kb=case.weights * BLOCK * 4 // 1024,
                steps=case.steps)


def measure(device: str, budget_s: float, say=lambda line: None) -> list[dict]:
    """Every case prepared and checked, then timed in interleaved rounds until ``budget_s`` is
    spent (at least MIN_ROUNDS); a case that fails is its one-line error. us per step: median
    (and IQR) over the rounds of a run's time over its steps."""
    from tlstm_bench.models import require_triton

    require_triton("benchmarks/sync_floor.py", instead="")
    stop = time.monotonic() + budget_s
    todo = cases(device)
    live = []
    for case in todo:
        try:
            prepare(case, device)
            live.append(case)
        except Exception as exc:  # noqa: BLE001  (one case's failure is its result; the others go on)
            first = (str(exc).strip().splitlines() or [""])[0]
            case.result = dict(_described(case), error=f"{type(exc).__name__}: {first}"[:300])
    rounds = 0
    while live and rounds < MAX_ROUNDS and (rounds < MIN_ROUNDS or time.monotonic() < stop):
        for case in list(live):
            try:
                case.samples.append(1000 * timed_ms(case.fn, device) / case.steps)
            except Exception as exc:  # noqa: BLE001  (as in prepare: that case's error, the others go on)
                first = (str(exc).strip().splitlines() or [""])[0]
                case.result = dict(_described(case), error=f"{type(exc).__name__}: {first}"[:300])
                live.remove(case)
        rounds += 1
    for case in live:
        q1, _, q3 = statistics.quantiles(case.samples, n=4, method="inclusive")
        case.result.update(us_per_step=round(statistics.median(case.samples), 3), iqr=round(q3 - q1, 3),
                           rounds=len(case.samples))
    results = [c.result for c in todo]
    for line in lines(results):
        say(line)
    return results


def lines(results: list[dict]) -> list[str]:
    """One ``FLOOR:`` line a case."""
    out = []
    for r in results:
        what = {"persistent": "persistent, a grid barrier a step", "host": "a launch a step from the host",
                "graph": "a launch a step in a CUDA graph"}[r["mode"]]
        programs = f"{r['programs']} program" + ("s" if r["programs"] != 1 else "")
        weights = f", {r['weights_kb']} KB of weights a program" if r["weights_kb"] else ""
        head = f"FLOOR: {what}, {programs}, {r['chain']} chained loads{weights}:"
        if "error" in r:
            out.append(f"{head} failed: {r['error']}")
        else:
            verdict = "right" if r["right"] else "WRONG (a program read a stale value)"
            out.append(f"{head} {r['us_per_step']} us a step (IQR {r['iqr']}), {verdict}")
    return out


def compile_for(arch: int) -> list[str]:
    """Compile the kernel for ``sm_<arch>`` without a GPU (Triton's compiler and ptxas), every
    chain with the barrier and the launch-a-step variant: a line each, ``ok`` or ``FAILED``."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from triton_compile import _usage, aligned

    fn = floor_step
    signature = {name: {"sem_ptr": "*u32", "buf_ptr": "*i32", "table_ptr": "*i32", "w_ptr": "*fp32"}.get(name, "i32")
                 for name in fn.arg_names}
    out = []
    for chain, barrier, weights in [(c, 1, 0) for c in CHAINS] + [(2, 1, w) for w in WEIGHT_BLOCKS] + [(0, 0, 0)]:
        consts = dict(CHAIN=chain, BARRIER=barrier, TABLE_SIZE=TABLE, WEIGHTS=weights, BLOCK_SIZE=BLOCK)
        sig = {**signature, **{k: "constexpr" for k in consts}}
        label = f"sm_{arch} floor_step CHAIN={chain} BARRIER={barrier} WEIGHTS={weights}"
        try:
            compiled = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=aligned(fn, sig)),
                                      target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})
        except Exception as exc:  # noqa: BLE001  (report every variant, then fail)
            out.append(f"FAILED {label}: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}")
            continue
        out.append(f"ok {label} {_usage(compiled)}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--out", type=Path, help="the results, JSON")
    ap.add_argument("--budget-s", type=float, default=10.0)
    ap.add_argument("--compile", metavar="ARCHS", help="only compile for these CUDA architectures (x10, "
                    "comma-separated: 80,90), no GPU needed; TRITON_INTERPRET unset")
    args = ap.parse_args()
    from tlstm_bench.errors import UserError
    from tlstm_bench.models import require_triton

    try:
        require_triton("benchmarks/sync_floor.py", instead="")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.compile:
        os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns when it is unset
        found = [line for arch in args.compile.split(",") for line in compile_for(int(arch))]
        print("\n".join(found))
        return 1 if any(line.startswith("FAILED") for line in found) else 0
    if args.out is None:
        ap.error("--out is required")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: benchmarks/sync_floor.py times a GPU; none is available (--device cpu with "
              "TRITON_INTERPRET=1 runs the flow)", file=sys.stderr)
        return 2
    results = measure(args.device, args.budget_s, print)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
