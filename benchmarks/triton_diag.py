"""Find where compiled ``triton`` float32 departs from the float64 oracle on a GPU.

The second H100 session found 2D tLSTMs with the memory-cell convolution wrong in their
gradients (0.1-0.2 relative) while the interpreter and float64 agreed with ``eager``; this
script found why (docs/triton.md, "The padded kernel width").

Two parts, each case in its own try, a line of JSON each (``--out``/diag.jsonl):

1. End to end: outputs and every gradient of ``triton`` (float32) against ``eager`` in float64
   on the same device, per configuration, tile-menu entry and diagnostic knob (the padded
   kernel width KDP at least 16, or one warp per program; see tiles.py), so a fault that
   follows the layout shows as a knob that removes it.
2. Buffers: the same 2D case run by the compiled kernels and by the interpreter (a child
   process with TRITON_INTERPRET=1, CPU tensors, the same inputs), and every forward and
   backward buffer compared step by step: the first step and buffer that differ, per location.

    PYTHONPATH=. python3 benchmarks/triton_diag.py --out $OUT/diag --budget-s 90

On the H100 the interpreter child failed inside Triton 3.6's interpreter (a numpy error), so
the buffer comparison was made on a CPU machine from the device's ``buffers_gpu.pt``:

    TRITON_INTERPRET=1 PYTHONPATH=. python3 benchmarks/triton_diag.py --compare results/evidence/gpu/2026-11-26-h100-2/run2-diag/buffers_gpu.pt
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

CASES = [("2d", 3, 20, 3, 7), ("2d-f", 3, 20, 3, 7), ("3d", 3, 20, 3, 7), ("2d-m", 3, 20, 3, 7),
         ("2d", 10, 100, 1, 20)]  # (config, L, M, batch, T)
KNOBS = {"default": {}, "kdp16": {"TLSTM_TRITON_DIAG_KDP_MIN": "16"}, "warps1": {"TLSTM_TRITON_DIAG_WARPS": "1"}}
MENUS = ("wide", "single")
BUFFER_CASE = ("2d", 3, 20, 3, 7)
# --verify: the fix on a device, every tile set, no knob, every memory-convolution configuration
VERIFY_CASES = [("2d", 3, 20, 3, 7), ("2d-f", 3, 20, 3, 7), ("3d-cn", 3, 20, 3, 7), ("3d-ln", 2, 20, 3, 7),
                ("2d-m", 3, 20, 3, 7), ("3d", 2, 20, 3, 7), ("2d", 10, 100, 1, 20)]
VERIFY_MENUS = ("wide", "narrow", "single")


def run(config, depth, channels, batch, seq_len, impl, device, dtype, menu=None):
    from model_helpers import outputs_and_grads

    from tlstm_bench.models import triton_tlstm

    kw = dict(batch=batch, seq_len=seq_len, channels=channels, device=device, dtype=dtype)
    if impl != "triton":
        return outputs_and_grads(config, depth, impl, **kw)
    with triton_tlstm.forced(menu=menu, persistent=False):
        return outputs_and_grads(config, depth, impl, **kw)


def errors(got: dict, want: dict) -> dict:
    return {k: ((got[k] - v).norm() / v.norm().clamp_min(1e-30)).item() for k, v in want.items() if v is not None}


def end_to_end(device: str, emit, deadline: float, cases=None, menus=None, knobs=None) -> None:
    """``triton`` (float32) against ``eager`` (float64) per case, tile set and knob (the
    module's CASES, MENUS and KNOBS unless given)."""
    for case in cases or CASES:
        want = run(*case, "eager", device, torch.float64)
        for menu in menus or MENUS:
            for knob, env in (knobs or KNOBS).items():
                rec = dict(part="end_to_end", case=list(case), menu=menu, knob=knob)
                if time.monotonic() > deadline:
                    emit(dict(rec, error="budget spent"))
                    continue
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    errs = errors(run(*case, "triton", device, torch.float32, menu), want)
                    worst = max(errs, key=errs.get)
                    rec.update(worst=worst, max_rel=errs[worst], ok=errs[worst] < 1e-4,
                               bad={k: round(v, 6) for k, v in errs.items() if v >= 1e-4})
                except Exception as exc:  # noqa: BLE001 - recorded, the next one goes on
                    rec.update(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                emit(rec)


def dump(device: str, path: Path, menu: str) -> None:
    """Run BUFFER_CASE through ``triton`` in float32 and save every buffer (forward: hs, cs,
    acts; backward before the deferred completion: das, dcs, dql) with the geometry."""
    from tlstm_bench.models.triton_tlstm import autograd

    stash: dict = {}
    real_forward, real_backward = autograd.launch_forward, autograd._backward_steps

    def forward(geo, bufs, params, steps):
        real_forward(geo, bufs, params, steps)
        stash.update(hs=bufs[1].clone(), cs=bufs[2].clone(), acts=bufs[3].clone(), m=geo.m, kd=geo.kd,
                     tiles=dict(geo.tiles))

    def backward(*args):
        g = real_backward(*args)
        stash.update(das=g["das"].clone(), dcs=g["dcs"].clone(), dql=g["dql"].clone())
        return g

    autograd.launch_forward, autograd._backward_steps = forward, backward
    try:
        run(*BUFFER_CASE, "triton", device, torch.float32, menu)
    finally:
        autograd.launch_forward, autograd._backward_steps = real_forward, real_backward
    torch.save({k: v.cpu() if torch.is_tensor(v) else v for k, v in stash.items()}, path)


def compare(gpu: dict, cpu: dict) -> list[dict]:
    """Per buffer, the steps (in the order they are computed) whose relative difference exceeds
    1e-5, and per location at the first of them."""
    m, kd = cpu["m"], cpu["kd"]
    views = {"hs": lambda t: t, "cs": lambda t: t, "acts": lambda t: t,
             "dcs": lambda t: t, "das": lambda t: t[..., :4 * m], "dql": lambda t: t[..., :kd]}
    out = []
    for name, view in views.items():
        a, b = view(gpu[name]).double(), view(cpu[name]).double()
        scale = b.abs().max().clamp_min(1e-30)
        steps = range(a.shape[0]) if name in ("hs", "cs", "acts") else range(a.shape[0] - 1, -1, -1)
        per_step = [(s, ((a[s] - b[s]).abs().max() / scale).item()) for s in steps]
        bad = [(s, d) for s, d in per_step if d > 1e-5]
        rec = dict(part="buffers", buffer=name, shape=list(a.shape), worst=max(d for _, d in per_step),
                   bad_steps=[[s, round(d, 6)] for s, d in bad])
        if bad:
            s = bad[0][0]
            diff = (a[s] - b[s]).abs()  # (B, N, ...)
            rec["first_bad_step"] = s
            rec["per_location"] = [round((diff[:, n].max() / scale).item(), 6) for n in range(diff.shape[1])]
            if diff.dim() >= 3:
                rec["per_column_top"] = torch.topk(diff.amax(dim=(0, 1)).flatten(), 5).indices.tolist()
        out.append(rec)
    return out


def tiles_menu() -> dict:
    from tlstm_bench.models.triton_tlstm import tiles

    return tiles.MENU


def tiles_equal(entry, t: dict) -> bool:
    """Whether a menu entry has the tile sizes a dump recorded (its menu is not in the dump)."""
    return (entry.bn, entry.bm, entry.bk, entry.bg) == (t["BN"], t["BM"], t["BK"], t["BG"])


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("triton_diag"))
    ap.add_argument("--budget-s", type=float, default=90.0)
    ap.add_argument("--dump", type=Path, help=argparse.SUPPRESS)  # the child: dump on the CPU interpreter
    ap.add_argument("--menu", default="wide", help=argparse.SUPPRESS)
    ap.add_argument("--compare", type=Path, metavar="BUFFERS_GPU_PT",
                    help="compare a device's buffers_gpu.pt with the interpreter's, here (TRITON_INTERPRET=1)")
    ap.add_argument("--verify", action="store_true",
                    help="only the end-to-end part, every tile set, every configuration, no knob: a fix on a device")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: the end-to-end part under TRITON_INTERPRET=1 (a dry run of this script)")
    return ap.parse_args()


def compare_here(gpu_file: Path, out: Path) -> None:
    """The interpreter's buffers for the device's tiles, here, compared with the device's."""
    gpu = torch.load(gpu_file)
    cpu_path = out / "buffers_cpu.pt"
    out.mkdir(parents=True, exist_ok=True)
    # the device's padding and warps (its tiles may predate a change of the defaults)
    os.environ["TLSTM_TRITON_DIAG_KDP_MIN"] = str(gpu["tiles"]["KDP"])
    os.environ["TLSTM_TRITON_DIAG_WARPS"] = str(gpu["tiles"]["num_warps"])
    dump("cpu", cpu_path, next(m for m, e in tiles_menu().items() if tiles_equal(e, gpu["tiles"])))
    for rec in compare(gpu, torch.load(cpu_path)):
        print(json.dumps(rec), flush=True)


def diagnose(args: argparse.Namespace, emit, start: float) -> None:
    """Both parts: the buffers (on CUDA, the interpreter's in a child meanwhile) and end to end."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    cpu_path, gpu_path = args.out / "buffers_cpu.pt", args.out / "buffers_gpu.pt"
    child = None
    if args.device == "cuda":  # the interpreter's buffers, meanwhile, on the CPU cores
        child = subprocess.Popen([sys.executable, __file__, "--dump", str(cpu_path), "--menu", "wide"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            dump("cuda", gpu_path, "wide")
        except Exception as exc:  # noqa: BLE001
            emit(dict(part="buffers", error=f"gpu dump: {type(exc).__name__}: {exc}"[:300]))
    end_to_end(args.device, emit, start + 0.8 * args.budget_s)
    if child is None:
        return
    try:
        text, _ = child.communicate(timeout=max(5.0, start + args.budget_s - time.monotonic()))
    except subprocess.TimeoutExpired:
        child.kill()
        emit(dict(part="buffers", error="the interpreter child did not finish in the budget"))
        return
    if child.returncode != 0:
        emit(dict(part="buffers", error=f"interpreter child exit {child.returncode}: {text[-300:]}"))
    elif gpu_path.exists():
        for rec in compare(torch.load(gpu_path), torch.load(cpu_path)):
            emit(rec)


def main() -> int:
    args = parse_args()
    if args.dump:
        dump("cpu", args.dump, args.menu)
        return 0
    if args.compare:
        compare_here(args.compare, args.out)
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: benchmarks/triton_diag.py compares compiled kernels on a CUDA GPU; none is available",
              file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    log = (args.out / "diag.jsonl").open("a")

    def emit(rec: dict) -> None:
        log.write(json.dumps(rec) + "\n")
        log.flush()
        print(json.dumps(rec), flush=True)

    if args.verify:
        end_to_end(args.device, emit, start + args.budget_s, VERIFY_CASES, VERIFY_MENUS, {"default": {}})
    else:
        diagnose(args, emit, start)
    print(f"triton_diag{' --verify' if args.verify else ''}: {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
