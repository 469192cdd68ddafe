"""Compile a device run's Triton kernels ahead of it, in parallel, into Triton's cache.

So that the run itself spends its budget measuring instead of compiling.

A device session launches some 90 kernel variants, and Triton compiles each one the first time
it is launched, one after another, in the session's only process: 1-2 s each on an H100
machine, 3-6 s for the unrolled ones, minutes of a 6-minute budget. This compiles the same
kernels first, spread over ``--jobs`` processes: each builds the variant's model at its real
size, runs its forward and backward once with every Triton launch turned into a compile only
(``compile_only``: Triton's own ``warmup``, which specializes the kernel on its real arguments,
compiles it into the on-disk cache and launches nothing), and says what it compiled. The run
that follows finds each kernel in the cache under the same key (the same source, arguments,
options and Triton, on the same machine) and only loads it.

Nothing depends on it for correctness: a kernel it did not compile (a failure, its deadline)
is compiled by the run as before, and a failure here is one line in the report, never the
run's. The kernels' values are not computed here (the launches are compile-only, so the
outputs are whatever the buffers held); the run checks every variant against float64 itself.

    from triton_precompile import precompile
    report = precompile(specs, device="cuda", jobs=8, timeout_s=120)

A spec is a dict: config, depth, channels, budget, batch, menu, persistent, precision.
From the shell, the triton cells of a sweep spec (what ``sweep --only`` selects; batch 1, the
dispatcher's tiles and path), before the sweep runs them (benchmarks/gpu_runtime_session.sh):

    python3 benchmarks/triton_precompile.py --sweep runtime --jobs 8 --timeout-s 90

``--worker SPECS_JSON`` is one worker process (its JSON lines, one a spec). ``--fake-target 90``
compiles for sm_90 on a machine without a GPU, the CPU tensors standing in for CUDA ones (this
module's tests and results/evidence/cpu/precompile_rehearsal/: the keys Triton computes there
are the same function of the arguments, but the cache belongs to that machine's Triton).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

VOCAB = 205  # the sessions' vocabulary (the embedding and readout; the kernels do not see it)
SPEC_KEYS = ("config", "depth", "channels", "budget", "batch", "menu", "persistent", "precision")


def spec_key(spec: dict) -> str:
    return json.dumps([spec.get(k) for k in SPEC_KEYS])


def unique(specs: list[dict]) -> list[dict]:
    """The specs in order, each once (two variants that differ only in what the kernels do not
    see, a graph around them or a training step after them, compile the same kernels)."""
    seen, out = set(), []
    for spec in specs:
        key = spec_key(spec)
        if key not in seen:
            seen.add(key)
            out.append({k: spec.get(k) for k in SPEC_KEYS})
    return out


@contextmanager
def compile_only():
    """Every Triton launch inside compiles its kernel (into the cache, as a launch would) and
    launches nothing: ``JITFunction.run`` with ``warmup=True``, Triton's own compile-ahead.
    Yields {kernel name: [its compiled variants' cache hashes]}, filled as launches come."""
    from triton.runtime.jit import JITFunction

    real = JITFunction.run
    seen: dict[str, list[str]] = {}

    def run(self, *args, grid, warmup, **kwargs):
        kernel = real(self, *args, grid=grid, warmup=True, **kwargs)
        hashes = seen.setdefault(self.fn.__name__, [])
        if getattr(kernel, "hash", None) and kernel.hash not in hashes:
            hashes.append(kernel.hash)
        return kernel

    JITFunction.run = run
    try:
        yield seen
    finally:
        JITFunction.run = real


def compile_spec(spec: dict, device: str) -> dict[str, list[str]]:
    """Build the spec's model (float32, at its size) and run forward + backward once (T = 2:
    every kernel flag, first and finishing steps included) with compile-only launches; the
    kernels compiled or found, by name (``compile_only``)."""
    import torch

    from tlstm_bench.models import build_model, triton_tlstm

    torch.manual_seed(0)
    model = build_model(spec["config"], spec["depth"], vocab=VOCAB, channels=spec["channels"],
                        budget=spec["budget"], implementation="triton")
    model.precision = spec["precision"]
    model.to(device)
    x = torch.zeros(spec["batch"], 2, dtype=torch.long, device=device)
    with compile_only() as seen, triton_tlstm.forced(menu=spec["menu"], persistent=spec["persistent"]):
        out, _ = model(x)
        out.float().sum().backward()
    return seen


def worker_main(specs_json: str, device: str) -> int:
    """One worker: each spec compiled in turn, a JSON line each as it is done."""
    for spec in json.loads(specs_json):
        t0 = time.monotonic()
        try:
            kernels = compile_spec(spec, device)
            line = {"key": spec_key(spec), "s": round(time.monotonic() - t0, 2), "kernels": kernels}
        except Exception as exc:  # noqa: BLE001 - this spec's failure, reported; the run compiles it itself
            line = {"key": spec_key(spec), "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                    if str(exc).strip() else type(exc).__name__}
        print(json.dumps(line), flush=True)
    return 0


def precompile(specs: list[dict], device: str = "cuda", jobs: int = 8, timeout_s: float = 120.0,
               extra_args: tuple = ()) -> dict:
    """Compile the specs' kernels in ``jobs`` worker processes (round robin), stopping them at
    ``timeout_s``. Returns {"done": [keys], "failed": {key: error}, "missed": [keys not
    reached], "stopped": [why a worker ended early, one line each], "kernels": {key: {kernel name:
    [cache hashes]}}, "s": wall seconds, "jobs": n}."""
    todo = unique(specs)
    jobs = max(1, min(jobs, len(todo)))
    t0 = time.monotonic()
    if not todo:
        return {"done": [], "failed": {}, "missed": [], "stopped": [], "kernels": {}, "s": 0.0, "jobs": 0}
    procs = []
    for i in range(jobs):
        chunk = json.dumps(todo[i::jobs])
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", chunk, "--device", device, *extra_args]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    lines, stopped = [], []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(0.01, t0 + timeout_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            stopped.append(f"a worker was stopped at the {timeout_s:.0f} s deadline")
        else:
            if p.returncode != 0:
                stopped.append(f"a worker ended with exit code {p.returncode}: "
                               f"{(err.strip().splitlines() or [''])[-1][:200]}")
        lines += [json.loads(x) for x in (out or "").splitlines() if x.startswith("{")]
    done = [x["key"] for x in lines if "error" not in x]
    failed = {x["key"]: x["error"] for x in lines if "error" in x}
    missed = [spec_key(s) for s in todo if spec_key(s) not in done and spec_key(s) not in failed]
    return {"done": done, "failed": failed, "missed": missed, "stopped": stopped,
            "kernels": {x["key"]: x["kernels"] for x in lines if "kernels" in x},
            "s": round(time.monotonic() - t0, 1), "jobs": jobs}


def summary(report: dict) -> str:
    """One line for a session's log."""
    text = (f"precompiled {len(report['done'])} variant(s) in {report['s']} s ({report['jobs']} processes)"
            f"{'; %d failed' % len(report['failed']) if report['failed'] else ''}"
            f"{'; %d not reached' % len(report['missed']) if report['missed'] else ''}")
    first = next(iter(report["failed"].items()), None)
    text += f" (first: {first[0]}: {first[1]})" if first else ""
    return text + (f"; {report['stopped'][0]}" if report.get("stopped") else "")


def sweep_specs(name: str, only: list[str]) -> list[dict]:
    """The triton runtime cells of a sweep spec, as ``sweep NAME --only ...`` selects them on a
    GPU, as specs: batch 1 (what ``time`` times), the dispatcher's tiles and path."""
    import tempfile

    from tlstm_bench.sweeps.plan import plan_sweep

    with tempfile.TemporaryDirectory() as root:
        cells = plan_sweep(name, root=root, only=tuple(only), device="cuda").cells
    return [dict(config=c.spec["config"], depth=c.spec["depth"], channels=c.spec["channels"], budget=c.spec["budget"],
                 batch=1, menu=None, persistent=None, precision=c.spec.get("precision") or "ieee")
            for c in cells if c.kind == "runtime" and c.spec.get("implementation") == "triton"]


def fake_target(arch: int, sms: int = 132) -> None:
    """Compile for sm_``arch`` without a GPU: a driver that names the target and nothing else,
    the model's CPU tensors accepted, and the persistent path allowed where the grid fits
    ``sms`` (an H100's 132), as on the device (tests of this module, rehearsals)."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    from tlstm_bench.models.triton_tlstm import autograd, launch

    class Driver:
        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_current_target(self):
            return GPUTarget("cuda", arch, 32)

    driver.set_active(Driver())
    autograd.check_runnable = lambda z, model: None
    launch.persistent_possible = lambda programs, device: (programs <= sms, f"the grid has {programs} programs "
                                                           f"and the GPU {sms} SMs")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--sweep", help="a sweep spec's name or file: compile its triton runtime cells' kernels")
    what.add_argument("--worker", help="a JSON list of specs (one worker process: what precompile() starts)")
    ap.add_argument("--only", action="append", default=[], help="as sweep --only (repeatable)")
    ap.add_argument("--jobs", type=int, default=8, help="worker processes")
    ap.add_argument("--timeout-s", type=float, default=90.0, help="stop the workers after this many seconds")
    ap.add_argument("--device", default="cuda", help="where the models are built (--fake-target: cpu)")
    ap.add_argument("--fake-target", type=int, help="compile for this sm without a GPU (tests)")
    args = ap.parse_args()
    if args.fake_target:
        args.device = "cpu"  # the stand-in driver compiles from CPU tensors; there is no CUDA to build on
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter compiles nothing", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, as the session runs it
    if args.worker is None:
        from tlstm_bench.errors import UserError

        try:
            specs = sweep_specs(args.sweep, args.only)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        extra = ("--fake-target", str(args.fake_target)) if args.fake_target else ()
        print(summary(precompile(specs, args.device, args.jobs, args.timeout_s, extra)), flush=True)
        return 0
    if args.fake_target:
        fake_target(args.fake_target)
    return worker_main(args.worker, args.device)


if __name__ == "__main__":
    sys.exit(main())
