"""Time the ``triton`` implementation's tile sets and paths on a GPU; write the tuning table.

For each shape (2D, M = 100, L = 1 and 10, batch 1 and 15, and 3D+CN at L = 10, batch 15,
the training shape of issue 19; T = 100, float32, TF32 off) and each variant (every float32
tile-menu entry, per step and persistent where a cooperative grid fits, plus ``fast`` as the
reference and, at 2D shapes, the cuDNN baselines at the same M and L: the shared-weight
sLSTM's ``cudnn`` and the untied stacked LSTM ``lstm``), it times forward + loss + backward with CUDA
events: a warm-up (which compiles), then rounds in which every variant runs once in turn
(interleaved, so a drifting clock or a busy neighbour hits all alike); the median over
rounds is kept. A variant is correct if it passes ``check_variant`` (float32 against ``eager``
in float64 at the shape's configuration and depth, small sizes; see CHECK_TOLERANCE); one
that runs but fails it is timed anyway, marked ``wrong``, and never tabled. Its difference
from ``fast`` at the timed shape is recorded for information, and the GPU ops of one pass are
counted with the profiler (all, and this package's kernel launches).
A variant that fails to run is recorded (its error) and the rest go on; the persistent variants are
first run once in a child process with a time limit (60% of the budget; it compiles them
into Triton's cache while this process compiles the per-step ones), so that a hung grid
barrier costs that limit, not the session.

    PYTHONPATH=. python3 benchmarks/triton_tune.py --out $OUT/tune --budget-s 120

Writes ``records.jsonl`` (one line per variant and shape: timings, error, kernel counts),
``table.json`` (per shape the fastest correct variant, in the format of
``tlstm_bench/models/triton_tlstm/tuning.json``: ``benchmarks/tuning_table.py`` merges it there) and prints a table.
Stops starting new work when the budget is spent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from cuda_clock import sync, timed_ms
from tlstm_bench.errors import UserError
from tlstm_bench.models import require_triton

SHAPES = [("2d", 1, 1), ("2d", 10, 1), ("2d", 1, 15), ("2d", 10, 15), ("3d-cn", 10, 15)]  # (config, L, batch)
CHANNELS, SEQ_LEN, VOCAB = 100, 100, 20
DEVICE = "cuda"
# timed beside the 2D shapes: what a user would pick instead (same M, L, batch, T); not tuned
BASELINES = (("slstm/cudnn", "slstm", "cudnn"), ("lstm/cudnn", "lstm", "cudnn"))
MENUS: tuple[str, ...] | None = None  # the tile sets tuned: None, every float32 entry


def dry_run_on_cpu() -> None:
    """--device cpu (with TRITON_INTERPRET=1): the same flow at toy sizes, to test the script."""
    global SHAPES, CHANNELS, SEQ_LEN, DEVICE, MENUS
    SHAPES, CHANNELS, SEQ_LEN, DEVICE = [("2d", 1, 1), ("2d", 2, 1)], 4, 2, "cpu"
    # Three tile sets, not all 21: the flow is the same for each, every entry is checked against
    # eager in tests/test_triton.py, and each costs the interpreter about 6 s here.
    MENUS = ("wide", "single", "single-acc")
# A variant is correct if, at the shape's configuration and depth (small M, batch and T), its
# outputs and every gradient in float32 are within CHECK_TOLERANCE of ``eager`` in float64
# (norm of the difference over the norm), with a loss that weighs every output and the final
# state of every location (tests/model_helpers.outputs_and_grads). The first tuner compared
# with ``fast`` in float32 through the cross-entropy of the top location's output: that loss
# hardly reaches the memory-cell convolution's Q path, so a doubled Q gradient (H100, KDP = 4)
# moved it by less than the rounding of 109 float32 steps did. ``error_vs_fast`` at the timed
# shape is still recorded, for information.
CHECK_TOLERANCE = 1e-4
CHECK_SIZES = {"cuda": dict(channels=20, batch=3, seq_len=7), "cpu": dict(channels=4, batch=1, seq_len=3)}


def make(config: str, depth: int, batch: int, impl: str):
    """A model, an input and targets, the same values for every variant of a shape."""
    from tlstm_bench.models import build_model

    torch.manual_seed(0)
    model = build_model(config, depth, vocab=VOCAB, channels=CHANNELS, implementation=impl).to(DEVICE)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB, (batch, SEQ_LEN), generator=g).to(DEVICE)
    y = torch.randint(0, VOCAB, (batch, SEQ_LEN), generator=g).to(DEVICE)
    return model, x, y


def variant_names(persistent: bool) -> list[tuple[str, str | None, bool]]:
    """(label, menu entry, persistent) of the triton variants (per step, not the step-flags
    entries: their per-step kernels are their twins')."""
    from tlstm_bench.models.triton_tlstm import tiles

    return [(f"{m}/{'persistent' if persistent else 'step'}", m, persistent) for m in tiles.FLOAT32_MENU
            if (persistent or tiles.MENU[m].sync == "grid") and (MENUS is None or m in MENUS)]


def one_pass(model, x, y, label_menu, persistent, baseline: bool = False):
    """Forward + loss + backward; the gradients as a flat list. ``baseline``: another model,
    run with its own implementation."""
    from tlstm_bench.models import triton_tlstm

    model.zero_grad(set_to_none=True)
    if not baseline:
        model.implementation = "fast" if label_menu is None else "triton"
    if label_menu is None:
        out, _ = model(x)
    else:
        with triton_tlstm.forced(menu=label_menu, persistent=persistent):
            out, _ = model(x)
    loss = F.cross_entropy(out.reshape(-1, VOCAB), y.reshape(-1))
    loss.backward()
    return [out.detach()] + [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def worst_error(got, want) -> float:
    return max(((a - b).abs().max() / b.abs().max().clamp_min(1e-6)).item() for a, b in zip(got, want))


def kernel_count(fn) -> dict:
    from torch.profiler import ProfilerActivity, profile

    if DEVICE == "cpu":
        return {}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync(DEVICE)
    names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    # every op the GPU ran (kernels, memsets, copies), and the launches of this package's kernels
    return {"cuda_ops": len(names), "triton_kernels": sum(("forward_" in n or "backward_" in n) for n in names)}


def probe(args) -> int:
    """Child process: run every persistent variant of every shape once, and its correctness
    check (check_variant) at the shape's configuration and depth; a JSON line each."""
    oracles: dict = {}
    checks: dict = {}
    for config, depth, batch in SHAPES:
        model, x, y = make(config, depth, batch, "fast")
        want = one_pass(model, x, y, None, False)
        for label, menu, persistent in variant_names(True):
            print(json.dumps({"probe": label, "config": config, "L": depth, "batch": batch, "started": True}),
                  flush=True)
            try:
                got = one_pass(model, x, y, menu, persistent)
                sync(DEVICE)
                rec = {"ran": True, "error_vs_fast": worst_error(got, want)}
                if (config, depth, menu) not in checks:
                    checks[(config, depth, menu)] = check_variant(config, depth, menu, True, oracles)
                rec.update(checks[(config, depth, menu)])
            except Exception as exc:  # noqa: BLE001 - recorded, the next variant goes on
                rec = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
            print(json.dumps({"probe": label, "config": config, "L": depth, "batch": batch, **rec}), flush=True)
    return 0


def start_probe() -> subprocess.Popen:
    """The child that runs every persistent variant once (compiling them into Triton's on-disk
    cache meanwhile, while this process compiles the per-step kernels)."""
    cmd = [sys.executable, __file__, "--probe", "--device", DEVICE,
           "--shapes", ",".join(f"{c}:{d}:{b}" for c, d, b in SHAPES)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_probe(child: subprocess.Popen, timeout_s: float) -> dict:
    """{(label, config, L, batch): record} from the child; a variant that started and never ended hung."""
    try:
        stdout, stderr = child.communicate(timeout=max(timeout_s, 1))
        note = f"exit {child.returncode}: {stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, _ = child.communicate()
        note = "killed at the time limit (a hung barrier or a slow compile)"
    out: dict = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            key = (rec.pop("probe"), rec.pop("config"), rec.pop("L"), rec.pop("batch"))
            out[key] = rec
    for key, rec in out.items():
        if rec.get("started"):
            out[key] = {"ok": False, "error": f"did not finish: {note}"}
    return out


def tests_on_path() -> None:
    """tests/ importable (model_helpers.outputs_and_grads: the oracle comparisons), once."""
    tests = str(Path(__file__).resolve().parents[1] / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def check_fp64(out: Path) -> int:
    """Compiled float64 (per step and persistent) against eager, outputs and every gradient:
    what the first H100 run could not compile. Writes check.jsonl; exit 1 if one differs."""
    tests_on_path()
    from model_helpers import outputs_and_grads

    from tlstm_bench.models import triton_tlstm

    out.mkdir(parents=True, exist_ok=True)
    bad = 0
    kw = dict(batch=1, seq_len=7, channels=20, device=DEVICE, dtype=torch.float64)
    cases = (("2d", 3), ("3d-cn", 2), ("3d-ln", 3), ("2d-m:norm=cn", 2))
    refs = {case: outputs_and_grads(*case, "eager", **kw) for case in cases}
    with (out / "check.jsonl").open("a") as log:
        for persistent in (False, True):  # every per-step case before a persistent one can hang
            for config, depth in cases:
                ref = refs[(config, depth)]
                rec = dict(kind="fp64_check", config=config, L=depth, persistent=persistent)
                try:
                    with triton_tlstm.forced(persistent=persistent):
                        got = outputs_and_grads(config, depth, "triton", **kw)
                    rec["worst_abs"] = max((got[k] - v).abs().max().item() for k, v in ref.items() if v is not None)
                    rec["ok"] = rec["worst_abs"] <= 1e-9
                except Exception as exc:  # noqa: BLE001 - recorded, the next case goes on
                    rec.update(ok=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                bad += not rec["ok"]
                log.write(json.dumps(rec) + "\n")
                print(json.dumps(rec), flush=True)
    return 1 if bad else 0


def check_variant(config: str, depth: int, menu: str, persistent: bool, oracles: dict) -> dict:
    """{check_max_rel, check_worst, ok} of one variant against eager in float64 (CHECK_SIZES)."""
    tests_on_path()
    from model_helpers import outputs_and_grads

    from tlstm_bench.models import triton_tlstm

    kw = dict(CHECK_SIZES[DEVICE], device=DEVICE)
    key = (config, depth)
    if key not in oracles:
        oracles[key] = outputs_and_grads(config, depth, "eager", dtype=torch.float64, **kw)
    with triton_tlstm.forced(menu=menu, persistent=persistent):
        got = outputs_and_grads(config, depth, "triton", dtype=torch.float32, **kw)
    errs = {k: ((got[k] - v).norm() / v.norm().clamp_min(1e-30)).item() for k, v in oracles[key].items()
            if v is not None}
    worst = max(errs, key=errs.get)
    return dict(check_max_rel=errs[worst], check_worst=worst, ok=errs[worst] <= CHECK_TOLERANCE)




class Shape:
    """One shape's model, data, the reference result of ``fast`` and its warmed-up variants."""

    def __init__(self, config: str, depth: int, batch: int):
        self.model, self.x, self.y = make(config, depth, batch, "fast")
        self.want = one_pass(self.model, self.x, self.y, None, False)
        self.base = dict(kind="timing", config=config, M=CHANNELS, L=depth, batch=batch, T=SEQ_LEN,
                         n=self.model.num_locations, kd=self.model.arch.kernel_entries)
        self.live: list[tuple] = []  # (record, pass function, samples)
        self.oracles: dict = {}  # (config, L) -> eager float64 outputs and gradients (check_variant)
        self.checks: dict = {}  # (config, L, menu) -> per-step check result
        self.baselines: dict = {}  # label -> (model, x, y) of a cuDNN baseline (2D shapes on CUDA)
        if config == "2d" and DEVICE == "cuda":
            for label, other, impl in BASELINES:
                self.baselines[label] = make(other, depth, batch, impl)

    def baseline_variants(self) -> list[tuple[str, None, bool]]:
        return [(label, None, False) for label in self.baselines]

    def pass_fn(self, label: str, menu, persistent: bool):
        if label in self.baselines:
            return lambda m=self.baselines[label]: one_pass(*m, None, False, baseline=True)
        return lambda: one_pass(self.model, self.x, self.y, menu, persistent)

    def warm_up(self, variants, probed: dict | None, end: float, emit) -> None:
        """First pass (compiles), error vs fast and kernel count of each variant; failures are
        recorded and skipped. Persistent variants only if the probe ran them (``probed``)."""
        key = (self.base["config"], self.base["L"], self.base["batch"])
        for label, menu, persistent in variants:
            rec = dict(self.base, variant=label, menu=menu, persistent=persistent)
            found = probed.get((label, *key), {}) if probed is not None else None
            if found is not None and not found.get("ran"):
                emit(dict(rec, ok=False, error=found.get("error", "not probed")))
                continue
            if time.monotonic() > end:
                emit(dict(rec, ok=False, error="budget spent before it ran"))
                continue
            fn = self.pass_fn(label, menu, persistent)
            try:
                start = time.monotonic()
                got = fn()
                sync(DEVICE)
                rec["warmup_s"] = round(time.monotonic() - start, 2)
                if label in self.baselines:  # another model: nothing to compare with
                    rec["baseline"] = True
                else:
                    rec["error_vs_fast"] = worst_error(got, self.want)
                rec.update(kernel_count(fn))
                if label == "fast" or label in self.baselines:
                    rec["ok"] = True
                elif found is not None:  # persistent: checked in the probe's process
                    rec.update({k: found[k] for k in ("check_max_rel", "check_worst", "ok")})
                else:
                    ck = (self.base["config"], self.base["L"], menu)
                    if ck not in self.checks:
                        self.checks[ck] = check_variant(*ck, False, self.oracles)
                    rec.update(self.checks[ck])
                if not rec["ok"]:
                    # it ran but computes something else: timed all the same (how fast it would
                    # be is worth knowing while it is being fixed), never put in the table
                    rec["error"] = (f"differs from eager (float64) by {rec['check_max_rel']:.2e} "
                                    f"({rec['check_worst']})")
                    rec["wrong"] = True
            except Exception as exc:  # noqa: BLE001 - recorded, the next variant goes on
                rec.update(ok=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            if rec["ok"] or rec.get("wrong"):
                self.live.append((rec, fn, []))
            else:
                emit(rec)

    def time_rounds(self, deadline: float, max_rounds: int, emit) -> None:
        """Interleaved rounds (every variant once per round): at least 3, more until ``deadline``."""
        rounds = 0
        while self.live and rounds < max_rounds and (rounds < 3 or time.monotonic() < deadline):
            for rec, fn, samples in self.live:
                try:
                    samples.append(timed_ms(fn, DEVICE))
                except Exception as exc:  # noqa: BLE001 - recorded with what it had
                    rec.update(ok=False, wrong=False,
                               error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            failed = [v for v in self.live if not v[0]["ok"] and not v[0].get("wrong")]
            for rec, _, _ in failed:
                emit(rec)
            self.live = [v for v in self.live if v not in failed]
            rounds += 1
        for rec, _, samples in self.live:
            med = statistics.median(samples) if samples else None
            rec.update(rounds=len(samples), samples_ms=[round(s, 4) for s in samples],
                       ms_median=med, us_per_step=None if med is None else round(1000 * med / SEQ_LEN, 2))
            emit(rec)


def best_entries(records: list[dict], provenance: dict) -> list[dict]:
    """Per shape, the fastest correct triton variant, as a tuning-table row."""
    from tlstm_bench.models import parse_config

    rows = []
    for config, depth, batch in SHAPES:
        done = [r for r in records if (r["config"], r["L"], r["batch"]) == (config, depth, batch) and r.get("ok")
                and r["menu"] is not None and r.get("us_per_step") is not None]
        if not done:
            continue
        best = min(done, key=lambda r: r["us_per_step"])
        arch = parse_config(config)  # the kernels' compile-time features are part of the shape (tiles.table_key)
        rows.append(dict(m=best["M"], n=best["n"], kd=best["kd"], batch=batch, dtype="float32", norm=arch.norm,
                         memory_conv=arch.memory_conv, menu=best["menu"], persistent=best["persistent"],
                         us_per_step=best["us_per_step"], **provenance))
    return rows


def print_table(records: list[dict]) -> None:
    """The records as a table: us per timestep, the GPU ops of one pass, and the two errors
    (the check against eager in float64 decides; the difference from fast is information)."""
    print(f"{'config':<6} {'L':>3} {'batch':>5}  {'variant':<18} {'us/step':>8} {'rounds':>6} {'cuda ops':>8} "
          f"{'triton':>6} {'vs f64':>8} {'vs fast':>8}  note")
    for r in records:
        us = f"{r['us_per_step']:.1f}" if r.get("us_per_step") is not None else "-"
        f64 = f"{r['check_max_rel']:.1e}" if r.get("check_max_rel") is not None else "-"
        err = f"{r['error_vs_fast']:.1e}" if r.get("error_vs_fast") is not None else "-"
        note = "" if r.get("ok") else ("WRONG, timed anyway: " if r.get("wrong") else "") + r.get("error", "")[:60]
        print(f"{r['config']:<6} {r['L']:>3} {r['batch']:>5}  {r['variant']:<18} {us:>8} {r.get('rounds', 0):>6} "
              f"{r.get('cuda_ops', '-'):>8} {r.get('triton_kernels', '-'):>6} {f64:>8} {err:>8}  {note}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("triton_tune"))
    ap.add_argument("--budget-s", type=float, default=120.0)
    ap.add_argument("--shapes", default=None,
                    help="only these shapes, e.g. 2d:10:1,2d:1:1 (config:L:batch; default: all of SHAPES)")
    ap.add_argument("--rounds", type=int, default=25, help="at most this many timed rounds per shape (at least 3)")
    ap.add_argument("--check-fp64", action="store_true",
                    help="instead of timing: compiled float64 against eager (per step and persistent)")
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: a dry run of this script at toy sizes and three tile sets under "
                         "TRITON_INTERPRET=1 (tests)")
    return ap.parse_args()


def tune(args: argparse.Namespace) -> None:
    """Warm up every variant of every shape (the persistent ones after the probe), time them in
    interleaved rounds, write records.jsonl and table.json, print the table."""
    import triton

    from tlstm_bench.models import triton_tlstm

    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    log = (args.out / "records.jsonl").open("a")

    def emit(rec: dict) -> None:
        records.append(rec)
        log.write(json.dumps(rec) + "\n")
        log.flush()

    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (interpreter dry run)"
    provenance = dict(device=name, triton=triton.__version__, torch=torch.__version__)
    sms = torch.cuda.get_device_properties(0).multi_processor_count if DEVICE == "cuda" else None
    emit(dict(kind="provenance", **provenance, cooperative=triton_tlstm.cooperative_launch_supported(), sms=sms,
              budget_s=args.budget_s))
    end = start + args.budget_s
    child = start_probe()  # persistent variants: compiled and run once there, meanwhile
    shapes = [Shape(*shape) for shape in SHAPES]
    for shape in shapes:
        shape.warm_up([("fast", None, False)] + shape.baseline_variants() + variant_names(False), None, end, emit)
    probed = finish_probe(child, start + 0.6 * args.budget_s - time.monotonic())
    for key, rec in probed.items():
        emit(dict(kind="probe", variant=key[0], config=key[1], L=key[2], batch=key[3], **rec))
    for shape in shapes:
        shape.warm_up(variant_names(True), probed, end, emit)
    for i, shape in enumerate(shapes):
        left = end - time.monotonic()
        shape.time_rounds(time.monotonic() + left / (len(shapes) - i), args.rounds, emit)
    timings = [r for r in records if r.get("kind") == "timing"]
    table = {"entries": best_entries(timings, provenance)}
    (args.out / "table.json").write_text(json.dumps(table, indent=1) + "\n")
    print_table(timings)
    print(f"{len(table['entries'])} table rows in {args.out / 'table.json'}; {time.monotonic() - start:.0f} s")


def main() -> int:
    args = parse_args()
    try:
        require_triton("benchmarks/triton_tune.py", instead="")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.device == "cpu":
        dry_run_on_cpu()
    elif not torch.cuda.is_available():
        print("error: benchmarks/triton_tune.py times kernels on a CUDA GPU; none is available", file=sys.stderr)
        return 2
    if args.shapes:
        global SHAPES
        SHAPES = [(c, int(d), int(b)) for c, d, b in (item.split(":") for item in args.shapes.split(","))]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.probe:
        return probe(args)
    if args.check_fp64:
        return check_fp64(args.out)
    tune(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
