"""Issue 28 in one device call: every triton variant checked against float64 eager, then timed
interleaved within a budget; the tool's records, one archive, the targets met or missed.

Three groups, the most important first, then the floor. Each group: build every variant, check
it (float32 against ``eager`` in float64 on the same device, outputs and every gradient, at the
timed M, depth and batch with T = 7, the parameters moved by ``check_scale``; right within
``tiles.CHECK_TOLERANCE`` of its precision or 5x float32 eager's own error at that precision (at
tf32: torch's TF32 products); this also compiles it),
then time the variants that ran in interleaved rounds (CUDA events, the median kept) until the
group's share of the budget is spent (at least 3 rounds):

* ``train``: one Adam step at batch 15, T = 50, 3d-cn at L = 1 and 10 (the memorization
  shape): ``fast``, ``triton`` as the dispatcher picks, the batch folded into the rows
  (``fold`` / ``fold64``, persistent) at ieee, tf32x3 and tf32, and a cuDNN ``nn.LSTM`` of L
  layers;
* ``m100``: forward + loss + backward, batch 1, T = 100, M = 100: the six tLSTM presets at
  L = 1, 4, 10 as the dispatcher picks, the wide persistent tiles for the 3D ones at L = 10
  (3d-cn also at tf32x3 and tf32), a flattened ``torch.nn.LSTM`` of the same M and L,
  ``triton-graph`` (the whole step captured as one CUDA graph and replayed) for 2d and 3d-cn
  at L = 1 and 10, the dispatched path and per step forced, 2d with its window loops unrolled
  (``single-u3``, also under the graph), the window's sums deferred (``single-acc`` for 2d,
  persistent and under the graph; ``single-acc``, ``single16-acc``, ``narrow-acc`` and
  ``narrow-acc64`` per step and ``mid-acc`` persistent for 3d-cn at L = 10), h made once per
  location before each step (``narrow-split`` and ``single16-acc-split`` per step, also under
  the graph, ``mid-acc-split`` persistent, 3d-cn at L = 10), one warp a program
  (``single-w1`` for 2d at L = 1 and 10, also under the graph, ``single-acc-w1`` for 2d at
  L = 10 and for 3d-cn per step at L = 10 and persistent at L = 1), the 3D batch-1
  candidates (``mid`` and ``mid-u3`` persistent, ``narrow-u3`` per step: the window loops
  unrolled; ``wide-w8`` and ``mid-u3-w8``: 8 warps a program), and last the step flags
  instead of the grid barrier (``single-u3-flags`` for 2d and ``mid-u3-flags`` for 3d-cn at
  L = 10, persistent, beside their twins);
* ``10m``: the same at the 10M size for 2d and 3d-cn at L = 1 and 10, and sLSTM ``cudnn``; at
  L = 10 also at tf32x3 (tensor cores; a ``TENSOR CORES:`` line in the targets, no target);
* ``floor``, last, in the FLOOR_S seconds of the budget kept for it: ``sync_floor.py``, what a
  step costs with nothing in it but the grid barrier and a chain of dependent loads (and a
  launch a step, from the host and in a CUDA graph), checked against a host model; its
  ``FLOOR:`` lines close ``targets.txt``, its numbers are ``floor.json``.

First (on CUDA) the kernels of every triton and triton-graph variant of the plan are compiled
ahead, in ``--precompile-jobs`` processes at once (``triton_precompile.py``: compile-only
launches into Triton's cache), so that the groups load them instead of compiling some 71
variants' kernels one after another in this process; what it misses is compiled as before.

A variant that fails its check is timed anyway and marked wrong; it never counts for a target
nor enters the table. The ``triton-graph`` variants are captured and checked first in a process
of their own (:func:`graph_probe`: the captured step, float32 against float64 ``eager``, loss
and every parameter gradient over two replays on new data); a capture that fails there is that
variant's failed record, one line, and this process never tries it (a failed capture can leave
a process's CUDA state unusable, and this one has every other variant to time). The step-flags
variants are run once and checked in such a process too, after the graphs: a hang there costs
the probe's time limit, and the variant is a one-line failure this process never runs.

Writes into ``--out``: ``store/triton-session/*.json`` (runtime records of the results store
schema, ``results.schema``; the tuner's keys ``variant``, ``menu``, ``persistent``,
``us_per_step`` ride along), ``table.json`` (tuning-table rows: per shape and precision the
fastest correct triton variant, with ``fast_us_per_step`` for the training shapes, which is
what lets ``train`` pick triton by itself: ``benchmarks/tuning_table.py`` merges them into
``tlstm_bench/models/triton_tlstm/tuning.json``), ``targets.txt`` and ``stdout.txt``. The
records are written as they are made, so a run cut by the outer ``timeout`` keeps them.

    PYTHONPATH=. timeout -k 5 330 python3 benchmarks/triton_session.py --out /tmp/tsession \
        --budget-s 300 --archive $OUT/triton-session.tar.gz

(``--device cpu`` with TRITON_INTERPRET=1: the same flow at toy sizes, to test the script.)

``--recheck STORE`` checks again, without timing, the variants a session's records mark wrong
(after a change to the check: ``recheck.json``); ``--rejudge RUN``, on any machine, gives RUN's
table and targets with those verdicts (``table-rechecked.json``, ``targets-rechecked.txt``),
leaving the records as they came back.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # model_helpers: the oracle runs

sys.path.insert(0, str(Path(__file__).resolve().parent))  # cuda_clock, beside it, also when imported as a module
from cuda_clock import sync, timed_ms  # noqa: E402
from tlstm_bench.errors import UserError  # noqa: E402
from tlstm_bench.models import require_triton  # noqa: E402

VOCAB, M100, CHECK_T, CHECK_M, MIN_ROUNDS = 205, 100, 7, 20, 3
EAGER_FACTOR = 5.0  # a variant may be this many times float32 eager's own error on a tensor, at its precision
PRESETS = ("2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn")
PROBE_S = 100.0  # at most, for the graph probe's processes (a start, the compiles, the captures)
PROFILED = {("m100", "2d", 10), ("m100", "3d-cn", 10), ("train", "3d-cn", 10),  # where the time goes: profiled
            ("10m", "2d", 10), ("10m", "3d-cn", 10)}
FLOOR_S = 15.0  # of the budget, kept for the floor group (sync_floor.py: a few compiles, a second of rounds)
PRECOMPILE_S = 150.0  # at most, for compiling the plan's kernels ahead in parallel (triton_precompile.py)
IMPLEMENTATIONS = {"triton": "triton", "triton-graph": "triton-graph", "fast": "fast", "cudnn": "cudnn",
                   "nnlstm": "torch.nn.LSTM"}


@dataclass
class Variant:
    """One thing to time. ``kind``: triton, triton-graph (triton's whole step as one CUDA graph,
    ``timing.StepRun``), fast, nnlstm (a flattened torch.nn.LSTM) or cudnn (the tool's sLSTM /
    lstm with implementation cudnn); ``menu`` None: the dispatcher's choice."""

    group: str
    config: str
    depth: int
    kind: str = "triton"
    menu: str | None = None
    persistent: bool | None = None
    precision: str = "ieee"
    batch: int = 1
    seq_len: int = 100
    channels: int | None = M100
    budget: str | None = None
    train: bool = False
    rec: dict = field(default_factory=dict)
    samples: list = field(default_factory=list)
    fn: object = None

    @property
    def label(self) -> str:
        if self.kind not in ("triton", "triton-graph"):
            return self.kind
        path = "" if self.persistent is None else ("/persistent" if self.persistent else "/step")
        return f"{self.kind}:{self.menu or 'auto'}{path}:{self.precision}"


def dry_run_plan() -> list[Variant]:
    """The CPU dry run's variants: toy sizes, per step, the interpreter."""
    return [Variant("m100", "2d", 1, channels=4, seq_len=3), Variant("m100", "2d", 1, "fast", channels=4, seq_len=3),
            Variant("m100", "2d", 1, "triton-graph", channels=4, seq_len=3),  # needs CUDA: fails in one line
            Variant("train", "3d-cn", 2, menu="fold", persistent=False, precision="tf32", batch=3, seq_len=3,
                    channels=4, train=True),  # tf32: the check's TF32 reference runs (a no-op on a CPU)
            Variant("train", "3d-cn", 2, "fast", batch=3, seq_len=3, channels=4, train=True)]


def plan(device: str) -> list[Variant]:
    """Every variant of the three groups, in the order they run."""
    if device == "cpu":
        return dry_run_plan()
    return _train_plan() + _m100_plan() + _m100_candidates() + _ten_m_plan()


def _train_plan() -> list[Variant]:
    """``train``: an Adam step at the memorization shape, 3d-cn at L = 1 and 10."""
    out = []
    for depth in (1, 10):
        t = dict(batch=15, seq_len=50, train=True)
        out += [Variant("train", "3d-cn", depth, "fast", **t), Variant("train", "3d-cn", depth, **t),
                Variant("train", "3d-cn", depth, "nnlstm", **t)]
        menu = "fold" if depth == 1 else "fold64"
        out += [Variant("train", "3d-cn", depth, menu=menu, persistent=True, precision=p, **t)
                for p in ("ieee", "tf32x3", "tf32")]
    return out


def _m100_plan() -> list[Variant]:
    """``m100``'s dispatched presets, the flattened nn.LSTM, the wide tiles and the graphs."""
    out = []
    for depth in (1, 4, 10):
        out += [Variant("m100", c, depth) for c in PRESETS] + [Variant("m100", "lstm", depth, "nnlstm")]
    out += [Variant("m100", c, 10, menu="wide", persistent=True) for c in ("3d", "3d-ln")]
    out += [Variant("m100", "3d-cn", 10, menu="wide", persistent=True, precision=p) for p in ("ieee", "tf32x3", "tf32")]
    out += [Variant("m100", c, depth, "triton-graph", persistent=path) for depth in (1, 10) for c in ("2d", "3d-cn")
            for path in (None, False)]  # the dispatched path, and per step forced
    return out


def _m100_candidates() -> list[Variant]:
    """``m100``'s opt-in tile sets, each a question about where a step's time goes."""
    out = []
    # 2D with its window loops unrolled (Kd = 3: whole), with and without the graph: the 2d
    # L = 10 target if the serial load chain of each window entry is what a step waits for.
    out += [Variant("m100", "2d", d, menu="single-u3", persistent=True) for d in (1, 10)]
    out += [Variant("m100", "2d", 10, "triton-graph", menu="single-u3", persistent=True)]
    # The window's reductions deferred (tiles.Menu.defer; results/evidence/cpu/defer_ptx/: with
    # Triton 3.6, 108-702 barriers a step at 3d-cn, L = 10 where narrow has 738; none in 2d
    # single-acc's loops): 2d persistent, also under the graph; 3d-cn per step (one location a
    # program, 8 or 16 channels; 4 locations with two inner widths) and persistent (mid-acc).
    out += [Variant("m100", "2d", d, menu="single-acc", persistent=True) for d in (1, 10)]
    out += [Variant("m100", "2d", 10, "triton-graph", menu="single-acc", persistent=True)]
    out += [Variant("m100", "3d-cn", 10, menu=m, persistent=False)
            for m in ("single-acc", "single16-acc", "narrow-acc", "narrow-acc64")]
    out += [Variant("m100", "3d-cn", 10, menu="mid-acc", persistent=True),
            Variant("m100", "3d-cn", 10, "triton-graph", menu="single-acc", persistent=False)]
    # One warp a program (the "-w1" tile sets): a program's sums and layout changes stay inside one
    # warp, no barrier among warps (results/evidence/cpu/warps_ptx/; on the H200 8 warps were
    # slower than 4): 2d persistent (also under the graph), 3d-cn per step at L = 10 and
    # persistent at L = 1 (13 programs).
    out += [Variant("m100", "2d", d, menu="single-w1", persistent=True) for d in (1, 10)]
    out += [Variant("m100", "2d", 10, menu="single-acc-w1", persistent=True),
            Variant("m100", "2d", 10, "triton-graph", menu="single-w1", persistent=True),
            Variant("m100", "3d-cn", 10, menu="single-acc-w1", persistent=False),
            Variant("m100", "3d-cn", 1, menu="single-acc-w1", persistent=True)]
    # h made once per location before each step that reads it (tiles.Menu.split): narrow per step
    # (the split alone), with the sums deferred per step (also graphed) and persistent.
    out += [Variant("m100", "3d-cn", 10, menu=m, persistent=False) for m in ("narrow-split", "single16-acc-split")]
    out += [Variant("m100", "3d-cn", 10, "triton-graph", menu="single16-acc-split", persistent=False),
            Variant("m100", "3d-cn", 10, menu="mid-acc-split", persistent=True)]
    # The 3D batch-1 candidates (tiles.MENU), last: 91 programs, persistent, with and without the
    # window loops unrolled; the default narrow tiles unrolled, per step (the A/B of the unroll).
    out += [Variant("m100", "3d-cn", 10, menu=m, persistent=True) for m in ("mid", "mid-u3")]
    out += [Variant("m100", "3d-cn", 1, menu="mid-u3", persistent=True),
            Variant("m100", "3d-cn", 10, menu="narrow-u3", persistent=False),
            Variant("m100", "3d", 10, menu="mid-u3", persistent=True)]
    # Two warps a scheduler instead of one (one program an SM): the wide tiles, also with tensor
    # cores, and mid-u3.
    out += [Variant("m100", "3d-cn", 10, menu="wide-w8", persistent=True, precision=p) for p in ("ieee", "tf32x3")]
    out += [Variant("m100", "3d-cn", 10, menu="mid-u3-w8", persistent=True)]
    # Per-program step flags instead of the grid barrier (opt-in, issue 28 direction 2), each
    # beside its grid-barrier twin above; last, so they cannot displace what was planned before.
    out += [Variant("m100", "2d", 10, menu="single-u3-flags", persistent=True),
            Variant("m100", "3d-cn", 10, menu="mid-u3-flags", persistent=True)]
    return out


def _ten_m_plan() -> list[Variant]:
    """``10m``: the Wikipedia size, 2d and 3d-cn against sLSTM cudnn."""
    out = []
    for depth in (1, 10):
        out += [Variant("10m", c, depth, channels=None, budget="10M") for c in ("2d", "3d-cn")]
        out += [Variant("10m", "slstm", depth, "cudnn", channels=None, budget="10M")]
    # At 10M the dispatched wide tiles run their products on FP32 units (ieee): tensor cores at
    # tf32x3 (near float32) beside them, the H200's suspect for triton's 2.5-5x behind cuda-graph.
    out += [Variant("10m", c, 10, channels=None, budget="10M", precision="tf32x3") for c in ("2d", "3d-cn")]
    return out


def build(v: Variant, device: str):
    """(model, x, y) of a variant, the same values for every variant of a shape."""
    from tlstm_bench.models import build_model

    torch.manual_seed(0)
    if v.kind == "nnlstm":
        model = FlatLSTM(VOCAB, v.channels, v.depth)
    else:
        impl = {"triton": "triton", "triton-graph": "triton", "fast": "fast", "cudnn": "cudnn"}[v.kind]
        model = build_model(v.config, v.depth, vocab=VOCAB, channels=v.channels, budget=v.budget, implementation=impl)
        model.precision = v.precision
    model.to(device)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB, (v.batch, v.seq_len), generator=g).to(device)
    y = torch.randint(0, VOCAB, (v.batch, v.seq_len), generator=g).to(device)
    return model, x, y


class FlatLSTM(torch.nn.Module):
    """What a user would write: an embedding, torch.nn.LSTM(M, M, L) (its weights flattened as
    torch keeps them) and a readout."""

    def __init__(self, vocab: int, channels: int, depth: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, channels)
        self.lstm = torch.nn.LSTM(channels, channels, depth, batch_first=True)
        self.out = torch.nn.Linear(channels, vocab)
        self.channels, self.depth = channels, depth

    def forward(self, x):
        h, _ = self.lstm(self.embed(x))
        return self.out(h), None


def step_fn(v: Variant, device: str):
    """The timed call: forward + loss + backward (and an Adam step when ``v.train``)."""
    from tlstm_bench.models import triton_tlstm

    if v.kind == "triton-graph":
        run, fn = graph_step(v, device)
        return run.model, fn
    model, x, y = build(v, device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3) if v.train else None

    def run():
        model.zero_grad(set_to_none=True)
        with triton_tlstm.forced(menu=v.menu, persistent=v.persistent) if v.kind == "triton" else _nothing():
            out, _ = model(x)
        F.cross_entropy(out.reshape(-1, VOCAB), y.reshape(-1)).backward()
        if opt is not None:
            opt.step()
    return model, run


def graph_step(v: Variant, device: str, seq_len: int | None = None):
    """``triton-graph`` as ``time`` runs it (a StepRun: batch 1, its own input); the first call
    captures the step, on the path ``v`` forces, every later call replays it."""
    from tlstm_bench.models import triton_tlstm
    from tlstm_bench.timing import Case, StepRun

    run = StepRun(Case(v.config, v.depth, "triton-graph"), channels=v.channels, budget=v.budget, vocab=VOCAB,
                  input_size=None, output_size=None, seq_len=seq_len or v.seq_len, device=torch.device(device),
                  dtype=torch.float32, seed=0, precision=v.precision)

    def fn():
        with triton_tlstm.forced(menu=v.menu, persistent=v.persistent):
            run()
    return run, fn


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def check_scale(channels: int) -> float:
    """How far the check moves the parameters off their initial values: the tests' 0.3 at
    M = 20, scaled by 1/sqrt(M) so that the recurrence's gain stays what it is there. With 0.3
    at M = 100 or 895 and L = 10 the recurrence is chaotic (the H200 session of 2026-11-27:
    gradient norms 1e5 at T = 7, 1e13 at T = 40), and float32 ``eager`` itself is 1.5e-2 to 1.7
    away from float64: a check there measures the problem's conditioning, not the kernels."""
    return 0.3 * (CHECK_M / channels) ** 0.5


def check(v: Variant, device: str, oracles: dict) -> dict:
    """float32 at the variant's precision, tiles and path against eager in float64 (outputs and
    every gradient, norm of the difference over the norm), at its M, depth and batch, T = 7,
    the parameters moved by ``check_scale``. Right when every tensor is within the precision's
    tolerance or within EAGER_FACTOR times float32 ``eager``'s own error on that tensor at the
    same precision (the rule issue 28 states: a kernel need not beat the oracle's own float32
    rounding; at tf32 that is torch's own TF32 products, ``eager_precision``)."""
    from model_helpers import outputs_and_grads

    from tlstm_bench.models import triton_tlstm
    from tlstm_bench.models.triton_tlstm.tiles import CHECK_TOLERANCE

    channels = v.rec["channels"]
    kw = dict(batch=v.batch, seq_len=CHECK_T if device == "cuda" else 2, channels=channels, device=device,
              perturb_scale=check_scale(channels))
    key = (v.config, v.depth, v.batch, channels)
    if key not in oracles:
        oracles[key] = outputs_and_grads(v.config, v.depth, "eager", dtype=torch.float64, **kw)
    want, ref = oracles[key], eager_precision(v.precision)
    for precision in {"ieee", ref}:
        if (key, precision) not in oracles:
            with torch_products(precision):
                got = outputs_and_grads(v.config, v.depth, "eager", dtype=torch.float32, **kw)
            oracles[key, precision] = rel_errors(got, want)
    eager32, eager_same = oracles[key, "ieee"], oracles[key, ref]
    with triton_tlstm.forced(menu=v.menu, persistent=v.persistent):
        got = outputs_and_grads(v.config, v.depth, "triton", dtype=torch.float32, precision=v.precision, **kw)
    errs, tolerance = rel_errors(got, want), CHECK_TOLERANCE[v.precision]
    worst = max(errs, key=errs.get)
    bad = [k for k, e in errs.items() if e > max(tolerance, EAGER_FACTOR * eager_same[k])]
    same = {"check_eager_tf32": max(eager_same.values())} if ref == "tf32" else {}
    return dict(check_max_rel=errs[worst], check_worst=worst, check_tolerance=tolerance,
                check_eager32=max(eager32.values()), **same, check_perturb=round(check_scale(channels), 4),
                check_ok=not bad, **({"check_failed": bad} if bad else {}))


def eager_precision(precision: str) -> str:
    """The precision of torch's own products that a variant's error is measured beside: tf32 is
    torch's TF32 (cuBLAS and cuDNN with TF32 allowed, what a user gets from
    ``torch.backends.cuda.matmul.allow_tf32``); tf32x3, which restores float32's accuracy with two
    correction products, and ieee are plain float32."""
    return "tf32" if precision == "tf32" else "ieee"


@contextmanager
def torch_products(precision: str):
    """torch's float32 products at ``precision`` (eager_precision's), the flags restored after.
    On a CPU the flags change nothing: there both references are plain float32."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def rel_errors(got: dict, want: dict) -> dict[str, float]:
    """Per tensor: the norm of the difference over the norm of the float64 oracle's."""
    return {k: ((got[k] - w).norm() / w.norm().clamp_min(1e-30)).item() for k, w in want.items() if w is not None}


def graph_check(v: Variant, device: str) -> dict:
    """The captured step, float32 at the variant's precision and path, against ``eager`` in
    float64 (StepRuns at T = 7, their parameters moved alike off the initial values): the loss and
    every parameter gradient after each of two replays on new data copied into the step's input."""
    from tlstm_bench.models.triton_tlstm.tiles import CHECK_TOLERANCE
    from tlstm_bench.timing import Case, StepRun

    seq_len = CHECK_T if device == "cuda" else 2
    run, step = graph_step(v, device, seq_len)
    oracle = StepRun(Case(v.config, v.depth, "eager"), channels=v.channels, budget=v.budget, vocab=VOCAB,
                     input_size=None, output_size=None, seq_len=seq_len, device=torch.device(device),
                     dtype=torch.float64, seed=0)
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():  # norm gains 1 and biases 0 would hide a swapped gain and bias
        for pg, pe in zip(run.model.parameters(), oracle.model.parameters()):
            delta = torch.randn(pg.shape, generator=gen, dtype=torch.float64) * 0.1
            pg.add_(delta.to(pg))
            pe.add_(delta.to(pe))
    step()  # the capture
    errs = {}
    for data in (1, 2):
        x = torch.randint(0, VOCAB, tuple(run.x.shape), generator=gen)
        target = torch.randint(0, VOCAB, tuple(run.target.shape), generator=gen)
        for r, call in ((run, step), (oracle, oracle)):
            r.x.copy_(x)
            r.target.copy_(target)
            call()
        got = {"loss": run.last_loss, **run.gradients()}
        for name, want in {"loss": oracle.last_loss, **oracle.gradients()}.items():
            if want is not None:
                errs[f"{name} (replay {data})"] = ((got[name].double() - want).norm()
                                                   / want.norm().clamp_min(1e-30)).item()
    worst = max(errs, key=errs.get)
    tolerance = CHECK_TOLERANCE[v.precision]
    return dict(check_max_rel=errs[worst], check_worst=worst, check_tolerance=tolerance,
                check_ok=errs[worst] <= tolerance, check_of="the captured step, on replay")


def flags_check(v: Variant, device: str) -> dict:
    """A step-flags variant in the probe process: one step at the timed shape (T = 100, the
    timed grid), then ``check``; the compiled kernels stay in Triton's cache for the session."""
    model, fn = step_fn(v, device)
    v.rec = base_record(v, model, device)
    fn()
    sync(device)
    return check(v, device, {})


def vkey(v: Variant) -> str:
    return f"{v.group} {v.config} L={v.depth} {v.label}"


def one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc).strip() else ''}"


def probed_first(v: Variant) -> bool:
    """Whether a variant runs first in a probe process: a CUDA graph capture (a failed one can
    leave the process unusable), or the step flags (a program waiting forever for a flag would
    hang the process: there it costs the probe's time limit, not the session's records)."""
    return v.kind == "triton-graph" or (v.menu or "").endswith("-flags")


def graph_probe(s: "Session", group: list[Variant]) -> dict[str, dict]:
    """Capture and check the group's ``triton-graph`` variants (and run and check its step-flags
    variants: ``probed_first``) in processes of their own, before this one captures or runs any:
    {vkey: the check's fields, or {"error": one line}}. A process stops at its first failure
    (its CUDA state may be unusable); the next one takes the rest."""
    todo = [v for v in group if probed_first(v)]
    found: dict[str, dict] = {}
    stop = time.monotonic() + min(PROBE_S, max(s.left(), 0.0))
    while todo and time.monotonic() < stop:
        t0 = time.monotonic()
        lines, why = probe_process(todo, s.device, stop - time.monotonic())
        for line in lines:
            if "unavailable" in line:  # a UserError: no graphed step here at all
                found.update({vkey(v): {"error": line["unavailable"]} for v in todo
                              if vkey(v) not in found and v.kind == "triton-graph"})
            else:
                found[line.pop("key")] = line
        left = [v for v in todo if vkey(v) not in found]
        if left and len(left) == len(todo):  # nothing came back: the first one fails with the process
            found[vkey(left[0])] = {"error": why or "the graph probe's process gave no answer"}
        todo = [v for v in todo if vkey(v) not in found]
        s.say(f"graph probe: {len(lines)} result(s) in {time.monotonic() - t0:.0f} s{'; ' + why if why else ''}")
    found.update({vkey(v): {"error": "not captured: the graph probe's time ran out"} for v in todo})
    return found


def probe_process(todo: list[Variant], device: str, timeout: float) -> tuple[list[dict], str | None]:
    """One probe process (this script with ``--probe-graphs``): its JSON lines, and why it ended
    early (None when it ended by itself)."""
    keep = ("group", "config", "depth", "kind", "menu", "persistent", "precision", "channels", "budget", "seq_len")
    spec = json.dumps([{k: getattr(v, k) for k in keep} for v in todo])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--probe-graphs", spec, "--device", device]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=max(timeout, 1.0))
    except subprocess.TimeoutExpired as exc:
        out, why = exc.stdout or "", f"the graph probe's process was stopped after {timeout:.0f} s"
    else:
        tail = (done.stderr.strip().splitlines() or [""])[-1][:300]
        out, why = done.stdout, None if done.returncode == 0 else f"the graph probe's process ended with " \
            f"exit code {done.returncode}: {tail}"
    out = out.decode() if isinstance(out, bytes) else out
    return [line for line in map(_json_line, out.splitlines()) if line is not None], why


def _json_line(text: str) -> dict | None:
    """A probe line, or None (other output, or a line cut short when the process was stopped)."""
    try:
        line = json.loads(text)
    except ValueError:
        return None
    return line if isinstance(line, dict) and ("key" in line or "unavailable" in line) else None


def probe_main(spec: str, device: str) -> int:
    """The probe process: ``graph_check`` of each variant, one JSON line each, as it is made."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for item in json.loads(spec):
        v = Variant(**item)
        try:
            line = {"key": vkey(v), **(graph_check(v, device) if v.kind == "triton-graph" else flags_check(v, device))}
        except UserError as exc:
            if v.kind != "triton-graph":  # this variant's failure, not the graphs'
                print(json.dumps({"key": vkey(v), "error": one_line(exc)}), flush=True)
            else:
                print(json.dumps({"unavailable": one_line(exc)}), flush=True)
            return 0
        except Exception as exc:  # noqa: BLE001 - this variant's failure; the parent starts a fresh process
            print(json.dumps({"key": vkey(v), "error": one_line(exc)}), flush=True)
            return 0
        print(json.dumps(line), flush=True)
    return 0




def kernel_specs(variants: list[Variant]) -> list[dict]:
    """``triton_precompile``'s specs of the variants that launch Triton kernels (triton and
    triton-graph: the same kernels)."""
    from triton_precompile import SPEC_KEYS

    return [{k: getattr(v, k) for k in SPEC_KEYS} for v in variants if v.kind in ("triton", "triton-graph")]


def precompile_plan(variants: list[Variant], jobs: int, s: "Session") -> str:
    """Compile the kernels of every triton and triton-graph variant ahead, in ``jobs`` processes
    (``triton_precompile``), so that each variant's first run loads its kernels from Triton's
    cache instead of compiling them one after another here; one line on how it went. Its wall
    time counts against the budget; a kernel it misses is compiled by the first run, as before."""
    from triton_precompile import precompile, summary

    timeout_s = min(PRECOMPILE_S, max(s.left() / 3, 1.0))
    return summary(precompile(kernel_specs(variants), "cuda", jobs, timeout_s=timeout_s))


def base_record(v: Variant, model, device: str) -> dict:
    """The store-schema fields of a variant's runtime record (results.schema)."""
    from tlstm_bench.results import provenance

    tlstm = hasattr(model, "arch")
    steps = model.arch.sequential_steps(v.seq_len, model.depth) if tlstm else v.seq_len * v.depth
    return {**provenance(device), "kind": "runtime", "task": "runtime", "status": "ok", "error": None, "seed": 0,
            "config": model.arch.label if tlstm else "nn.LSTM", "depth": v.depth, "budget": v.budget,
            "implementation": IMPLEMENTATIONS[v.kind],
            "channels": model.channels, "tensor_size": getattr(model, "tensor_size", None),
            "params": sum(p.numel() for p in model.parameters()), "input_size": VOCAB, "output_size": VOCAB,
            "seq_len": v.seq_len, "batch": v.batch, "sequential_steps": steps, "dtype": "float32",
            "precision": v.precision, "flush_denormal": False, "clock": "cuda_events" if device == "cuda" else
            "perf_counter", "runs_per_sample": 1, "interleaved": True, "session_group": v.group,
            "variant": v.label, "menu": v.menu, "persistent": v.persistent, "train_step": v.train,
            "optimizer": "adam" if v.train else None, "tf32_off_elsewhere": True,
            "n": getattr(model, "num_locations", None), "kd": model.arch.kernel_entries if tlstm else None}


class Session:
    """The budget, the output folder and the records made so far."""

    def __init__(self, out: Path, budget_s: float, device: str, archive: Path | None = None):
        self.out, self.device, self.archive = out, device, archive
        self.start = time.monotonic()
        self.end = self.start + budget_s
        self.done: list[Variant] = []
        self.oracles: dict = {}
        out.mkdir(parents=True, exist_ok=True)
        self.log = (out / "stdout.txt").open("a")

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def left(self) -> float:
        return self.end - time.monotonic()

    def pack(self) -> None:
        """Refresh ``--archive`` (the one file that comes back) with everything under ``out``: a
        temporary file renamed over it, so a call cut at any moment returns the last whole one."""
        if self.archive is None:
            return
        self.log.flush()
        self.archive.parent.mkdir(parents=True, exist_ok=True)
        part = self.archive.with_name(self.archive.name + ".part")
        with tarfile.open(part, "w:gz") as tar:
            tar.add(self.out, arcname=self.out.name)
        os.replace(part, self.archive)

    def store(self, v: Variant) -> None:
        """Write the variant's record now (a cut run keeps what it made)."""
        from tlstm_bench.results import write_record
        from tlstm_bench.results.provenance import code_version
        from tlstm_bench.results.schema import record_key, record_problem, stable_hash, versioned_id

        rec = v.rec
        key = record_key(rec)
        if v.menu is not None or v.persistent is not None or v.batch != 1 or v.train:  # not `time`'s: own key
            key = stable_hash({"key": key, "variant": v.label, "batch": v.batch, "train": v.train})
        rec.update(key=key, id=versioned_id(key, code_version()))
        problem = record_problem(rec)
        assert problem is None, problem
        write_record(rec, "triton-session", root=self.out / "store")
        self.done.append(v)


def warm_up(s: Session, group: list[Variant]) -> list[Variant]:
    """Build, check (triton; triton-graph: in the probe) and run once (compiling, capturing) each
    variant; the ones that ran."""
    probed = graph_probe(s, group)
    live = []
    for v in group:
        if s.left() <= 0:
            v.rec = {"variant": v.label}
            s.say(f"skip {v.group} {v.config} L={v.depth} {v.label}: budget spent")
            continue
        t0 = time.monotonic()
        try:
            prepare(v, s, probed.get(vkey(v)))
            live.append(v)
        except Exception as exc:  # noqa: BLE001 - recorded; the next variant goes on
            v.rec = {**v.rec, "status": "failed", "error": v.rec.get("error") or one_line(exc)}
            if "kind" in v.rec:
                s.store(v)
        v.rec["warmup_s"] = round(time.monotonic() - t0, 2)
        s.say(f"warm {v.group} {v.config} L={v.depth} {v.label}: {v.rec['warmup_s']} s "
              f"{v.rec.get('error') or ''}{'WRONG ' if v.rec.get('wrong') else ''}"
              f"{'check %.1e' % v.rec['check_max_rel'] if 'check_max_rel' in v.rec else ''}")
    return live


def prepare(v: Variant, s: Session, probed: dict | None) -> None:
    """Build ``v``, run it once and check it (``probed``: a triton-graph variant's probe result,
    whose failure is its record's error, never tried here)."""
    if probed is not None and "error" in probed:
        model, _, _ = build(v, s.device)  # the record's fields; the capture is not tried here
        v.rec = {**base_record(v, model, s.device), "error": probed["error"]}
        raise RuntimeError(probed["error"])
    model, fn = step_fn(v, s.device)
    v.rec = base_record(v, model, s.device)
    fn()
    sync(s.device)
    if v.kind in ("triton", "triton-graph"):
        v.rec["kernels"] = model.__dict__.get("triton_last")  # a graph's: what its capture ran
        v.rec.update(check(v, s.device, s.oracles) if v.kind == "triton" else probed)
        if not v.rec["check_ok"]:
            v.rec["wrong"] = True  # timed anyway, never counted or tabled
    v.fn = fn


def time_rounds(s: Session, live: list[Variant], share_s: float, max_rounds: int) -> None:
    """Interleaved rounds: every variant once per round, at least MIN_ROUNDS, more until the share is spent."""
    stop = time.monotonic() + share_s
    rounds = 0
    while live and rounds < max_rounds and (rounds < MIN_ROUNDS or time.monotonic() < stop):
        for v in live:
            try:
                v.samples.append(timed_ms(v.fn, s.device))
            except Exception as exc:  # noqa: BLE001
                v.rec.update(status="failed", error=one_line(exc))
        live = [v for v in live if v.rec["status"] == "ok"]
        rounds += 1
    for v in live:
        finish(v)
        if profiled(v, s.device):
            v.rec["profile"] = profile_step(v.fn, s.device, v.seq_len)
        s.store(v)


def profiled(v: Variant, device: str) -> bool:
    """Whether a variant's record gets a profile (``profile_step``): the shapes whose time issue
    28 asks about, every kind there; every variant of a CPU dry run."""
    return device == "cpu" or (v.group, v.config, v.depth) in PROFILED


def profile_step(fn, device: str, seq_len: int) -> dict:
    """One more call of ``fn`` under the torch profiler: the time its kernels ran on the device
    per timestep, how many ran, and the five kernels that took most. The timed median less that
    is the host's share and the gaps between kernels. On a CPU (a dry run) the aten ops instead,
    nested ones counted in each: the shape of the answer, not a breakdown. Never raises: the
    time stands without its profile."""
    try:
        from evidence.timing import profiler_events  # the evidence script's reading of the profiler
        from torch.profiler import ProfilerActivity, profile

        cuda = device == "cuda"
        sync(device)
        with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
            fn()
            sync(device)
        by_name: dict[str, float] = {}
        count = 0
        for name, where, _, us in profiler_events(prof):
            if where != device or not (cuda or name.startswith("aten::")):
                continue
            count += 1
            by_name[name] = by_name.get(name, 0.0) + us
        top = sorted(by_name.items(), key=lambda item: -item[1])[:5]
        return {"device_us_per_step": round(sum(by_name.values()) / seq_len, 2), "events": count,
                "top_us_per_step": [[name[:100], round(us / seq_len, 2)] for name, us in top],
                "of": "CUDA kernels and copies on the device" if cuda else "CPU aten ops, nested ones in each"}
    except Exception as exc:  # noqa: BLE001 - the time stands without its profile
        return {"error": one_line(exc)}


def finish(v: Variant) -> None:
    """Median, quartiles and every sample, per timestep (ms_per_step) and per call."""
    from tlstm_bench.timing.protocol import summarize

    per_t = [ms / v.seq_len for ms in v.samples]
    v.rec.update(summarize(per_t), samples=per_t, repeats=len(per_t), warmup=1,
                 us_per_step=round(1000 * statistics.median(per_t), 2))
    if v.train:
        ms = statistics.median(v.samples)
        v.rec.update(ms_per_train_step=round(ms, 3), samples_per_s=round(1000 * v.batch / ms, 1))


def good(v: Variant) -> bool:
    return v.rec.get("status") == "ok" and "us_per_step" in v.rec and not v.rec.get("wrong")


def best(done: list[Variant], group: str, config: str, depth: int, kind: str = "triton",
         precision: str | None = "ieee") -> Variant | None:
    """The fastest correct variant of a kind (any tiles and path) at one shape and precision."""
    found = [v for v in done if good(v) and (v.group, v.config, v.depth, v.kind) == (group, config, depth, kind)
             and (precision is None or v.precision == precision)]
    return min(found, key=lambda v: v.rec["us_per_step"], default=None)


def table_rows(done: list[Variant], provenance: dict) -> list[dict]:
    """Tuning-table rows: per shape and precision the fastest correct triton variant (what it
    ran: the dispatcher's choice is recorded under ``kernels``), with fast's time beside the
    training shapes."""
    from tlstm_bench.models import parse_config

    rows = []
    shapes = sorted({(v.group, v.config, v.depth, v.precision) for v in done if v.kind == "triton"})
    for group, config, depth, precision in shapes:
        v = best(done, group, config, depth, "triton", precision)
        if v is None:
            continue
        ran = v.rec.get("kernels") or {}
        arch = parse_config(config)  # the kernels' compile-time features are part of the shape (tiles.table_key)
        row = dict(m=v.rec["channels"], n=v.rec["n"], kd=v.rec["kd"], batch=v.batch, dtype="float32",
                   precision=precision, norm=arch.norm, memory_conv=arch.memory_conv, menu=ran.get("menu", v.menu),
                   persistent=ran.get("persistent", v.persistent), us_per_step=v.rec["us_per_step"], config=config,
                   L=depth, seq_len=v.seq_len, **provenance)
        fast = best(done, group, config, depth, "fast", None)
        if v.train and fast is not None:
            row["fast_us_per_step"] = fast.rec["us_per_step"]
        rows.append(row)
    return rows


def _us(v: Variant | None) -> str:
    return "unmeasured" if v is None else f"{v.rec['us_per_step']:.1f} us ({v.label})"


def targets(done: list[Variant]) -> list[str]:
    """Issue 28's targets, each MET, MISSED or UNMEASURED, with its numbers."""
    lines = []

    def verdict(ok, what, numbers):
        lines.append(f"{'UNMEASURED' if ok is None else 'MET' if ok else 'MISSED'}: {what}: {numbers}")

    for config, limit in (("2d", 12.0), ("3d-cn", 20.0)):
        for kind, what in (("triton", ""), ("triton-graph", " (triton-graph: the step as one CUDA graph)")):
            v = best(done, "m100", config, 10, kind)
            verdict(None if v is None else v.rec["us_per_step"] <= limit, f"{config} L=10 <= {limit:g} us{what}",
                    _us(v))
    for config in PRESETS:
        a, b = best(done, "m100", config, 1), best(done, "m100", config, 10)
        ratio = None if a is None or b is None else b.rec["us_per_step"] / a.rec["us_per_step"]
        verdict(None if ratio is None else ratio <= 1.3, f"{config} t(10)/t(1) <= 1.3 (stretch 1.1)",
                "unmeasured" if ratio is None else f"{ratio:.2f} ({_us(b)} / {_us(a)})")
        for depth in (4, 10):
            t, ref = best(done, "m100", config, depth), best(done, "m100", "lstm", depth, "nnlstm")
            ok = None if t is None or ref is None else t.rec["us_per_step"] < ref.rec["us_per_step"]
            verdict(ok, f"{config} L={depth} faster than a flattened nn.LSTM", f"{_us(t)} vs {_us(ref)}")
    for config in ("2d", "3d-cn"):
        t, ref = best(done, "10m", config, 10), best(done, "10m", "slstm", 10, "cudnn")
        ok = None if t is None or ref is None else t.rec["us_per_step"] < ref.rec["us_per_step"]
        verdict(ok, f"10M {config} L=10 faster than sLSTM cudnn", f"{_us(t)} vs {_us(ref)}")
    for depth in (1, 10):
        fast = best(done, "train", "3d-cn", depth, "fast", None)
        for precision, factor in (("tf32x3", 5.0), ("ieee", 2.0), ("tf32", 5.0)):
            t = best(done, "train", "3d-cn", depth, "triton", precision)
            x = None if t is None or fast is None else fast.rec["us_per_step"] / t.rec["us_per_step"]
            verdict(None if x is None else x >= factor, f"train 3d-cn L={depth} batch 15 {precision} >= {factor:g}x fast",
                    "unmeasured" if x is None else f"{x:.2f}x ({_us(t)} vs fast {_us(fast)})")
    lines += graph_notes(done) + precision_notes(done) + profile_notes(done)
    lines.append(correctness(done))
    return lines


def correctness(done: list[Variant]) -> str:
    """The float64 check's verdict, with how many variants it covers: MET only when some were
    checked and none was wrong, never for a session whose triton variants all failed to run."""
    tried = [v for v in done if v.kind == "triton"]
    checked = [v for v in tried if "check_ok" in v.rec]
    wrong = [f"{v.group} {v.config} L={v.depth} {v.label}" for v in checked if v.rec.get("wrong")]
    state = "MISSED" if wrong else "MET" if checked else "UNMEASURED"
    unrun = f"; {len(tried) - len(checked)} failed before the check" if len(checked) < len(tried) else ""
    detail = f"wrong: {', '.join(wrong)}" if wrong else f"{len(checked)} of {len(tried)} checked right{unrun}"
    return f"{state}: every timed triton variant right against float64 eager: {detail}"


def graph_notes(done: list[Variant]) -> list[str]:
    """What the CUDA graph saved per timestep (no target: what direction 5 of the issue held):
    the fastest correct triton-graph against the fastest correct triton at each shape timed."""
    lines = []
    for config, depth in sorted({(v.config, v.depth) for v in done if v.kind == "triton-graph"}):
        g, t = best(done, "m100", config, depth, "triton-graph"), best(done, "m100", config, depth)
        if g is not None and t is not None:
            lines.append(f"GRAPH: {config} L={depth}: {_us(g)} against {_us(t)}: "
                         f"{t.rec['us_per_step'] - g.rec['us_per_step']:+.1f} us per timestep saved")
    return lines


def precision_notes(done: list[Variant]) -> list[str]:
    """What tensor cores gave at the 10M size (no target: the targets are ieee): the fastest
    correct variant at each other precision against the fastest correct ieee one, per 10M shape."""
    lines = []
    for config, depth, precision in sorted({(v.config, v.depth, v.precision) for v in done
                                            if v.group == "10m" and v.precision != "ieee"}):
        a, b = best(done, "10m", config, depth), best(done, "10m", config, depth, precision=precision)
        if a is not None and b is not None:
            lines.append(f"TENSOR CORES: 10M {config} L={depth}: {_us(b)} against {_us(a)}: "
                         f"x{a.rec['us_per_step'] / b.rec['us_per_step']:.2f}")
    return lines


def profile_notes(done: list[Variant]) -> list[str]:
    """Where the time of the fastest correct variant of each profiled shape goes: its kernels'
    device time per timestep against its timed median, and the kernel that took most."""
    lines = []
    for group, config, depth in sorted({(v.group, v.config, v.depth) for v in done if "profile" in v.rec}):
        found = [v for v in done if good(v) and (v.group, v.config, v.depth) == (group, config, depth)
                 and "device_us_per_step" in v.rec.get("profile", {})]
        for v in sorted(found, key=lambda v: v.rec["us_per_step"])[:2]:
            p = v.rec["profile"]
            first = p["top_us_per_step"][0] if p["top_us_per_step"] else ["-", 0.0]
            lines.append(f"PROFILE: {group} {config} L={depth} {v.label}: kernels {p['device_us_per_step']:.1f} us "
                         f"of {v.rec['us_per_step']:.1f} per timestep ({p['events']} events; most: "
                         f"{first[0][:40]} {first[1]:.1f})")
    return lines


def record_key(r: dict) -> str:
    """A stored record's ``vkey`` (a flattened nn.LSTM is stored as config ``nn.LSTM``)."""
    config = "lstm" if r["config"] == "nn.LSTM" else r["config"]
    return f"{r['session_group']} {config} L={r['depth']} {r['variant']}"


def recheck(s: Session, store: Path, jobs: int) -> None:
    """Check again, without timing, the variants that a session's records in ``store`` mark
    wrong (the check as it is now: ``check``), each result written into ``recheck.json`` as it
    is made: {vkey: the check's fields, or {"error": one line}}."""
    from tlstm_bench.results.store import load_records

    wrong = {record_key(r): r for r in load_records(root=store) if r.get("wrong")}
    todo = [v for v in plan(s.device) if vkey(v) in wrong]
    s.say(f"recheck: {len(todo)} variant(s) marked wrong in {store}")
    if s.device == "cuda" and jobs > 0 and todo:
        s.say(precompile_plan(todo, jobs, s))
    found: dict[str, dict] = {}
    for v in todo:
        if s.left() <= 0:
            s.say(f"skip {vkey(v)}: budget spent")
            continue
        v.rec = {"channels": wrong[vkey(v)]["channels"]}
        try:
            found[vkey(v)] = check(v, s.device, s.oracles)
        except Exception as exc:  # noqa: BLE001 - this variant's failure; the next goes on
            found[vkey(v)] = {"error": one_line(exc)}
        (s.out / "recheck.json").write_text(json.dumps(found, indent=1) + "\n")
        s.say(f"recheck {vkey(v)}: {verdict_line(found[vkey(v)])}")


def verdict_line(r: dict) -> str:
    """A check's result in one line: right or WRONG, its worst error, float32 eager's own beside."""
    if "error" in r:
        return r["error"]
    tf32 = f", TF32 {r['check_eager_tf32']:.1e}" if "check_eager_tf32" in r else ""
    return (f"{'right' if r['check_ok'] else 'WRONG'} {r['check_max_rel']:.1e} "
            f"(eager float32 {r['check_eager32']:.1e}{tf32})")


def rejudge(run: Path) -> list[str]:
    """A session's records (``run``/store) with the verdicts of its ``recheck.json`` in place of
    the ones it was timed with: ``table-rechecked.json`` and ``targets-rechecked.txt`` beside
    them (the records stay as the device wrote them); the targets' lines."""
    from dataclasses import replace

    from tlstm_bench.results.store import load_records

    checks = json.loads((run / "recheck.json").read_text())
    records = load_records(root=run / "store")
    planned = {vkey(v): v for v in plan(records[0]["device"])}
    done = []
    for r in records:
        if record_key(r) not in planned:
            continue
        v = replace(planned[record_key(r)], rec=dict(r))
        found = checks.get(record_key(r), {})
        if "check_ok" in found:
            v.rec.update(found, rechecked=True, wrong=not found["check_ok"])
        done.append(v)
    first = done[0].rec
    prov = dict(device=first["device_name"], triton=first["triton_version"], torch=first["torch_version"])
    (run / "table-rechecked.json").write_text(json.dumps({"entries": table_rows(done, prov)}, indent=1) + "\n")
    lines = targets(done)
    (run / "targets-rechecked.txt").write_text("\n".join(lines) + "\n")
    return lines


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="a folder outside $OUT for the records and files (required)")
    ap.add_argument("--archive", type=Path, help="pack --out into this .tar.gz after every group and at the end "
                                                 "(in $OUT: a cut call still returns the groups done)")
    ap.add_argument("--budget-s", type=float, default=300.0, help="stop starting work after this many seconds")
    ap.add_argument("--groups", default="train,m100,10m,floor",
                    help="which groups, in this order (floor: always last, sync_floor.py)")
    ap.add_argument("--rounds", type=int, default=30, help="at most this many timed rounds per group")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: a dry run at toy sizes under TRITON_INTERPRET=1 (tests)")
    ap.add_argument("--precompile-jobs", type=int, default=8,
                    help="compile the plan's kernels ahead in this many processes (0: as each is first run)")
    ap.add_argument("--recheck", type=Path, metavar="STORE",
                    help="check again, without timing, the variants a session's store marks wrong (recheck.json)")
    ap.add_argument("--rejudge", type=Path, metavar="RUN",
                    help="no device: RUN/store's records with RUN/recheck.json's verdicts -> *-rechecked files")
    ap.add_argument("--probe-graphs", help=argparse.SUPPRESS)  # graph_probe's processes: a JSON list of variants
    return ap


def main() -> int:
    ap = parser()
    args = ap.parse_args()
    if args.probe_graphs:
        return probe_main(args.probe_graphs, args.device)
    if args.rejudge:
        for line in rejudge(args.rejudge):
            print(line)
        return 0
    if args.out is None:
        ap.error("--out is required")
    if args.archive is not None and args.archive.resolve().is_relative_to(args.out.resolve()):
        ap.error("--archive must be outside --out (it packs --out)")
    try:
        triton = require_triton("benchmarks/triton_session.py", instead="")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: benchmarks/triton_session.py times kernels on a CUDA GPU; none is available", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # torch's products in plain float32 (ieee)
    torch.backends.cudnn.allow_tf32 = False

    from tlstm_bench.models import triton_tlstm

    s = Session(args.out, args.budget_s, args.device, args.archive)
    prov = dict(device=torch.cuda.get_device_name() if args.device == "cuda" else "cpu (interpreter dry run)",
                triton=triton.__version__, torch=torch.__version__)
    s.say(json.dumps(dict(prov, budget_s=args.budget_s, cooperative=triton_tlstm.cooperative_launch_supported(),
                          sms=torch.cuda.get_device_properties(0).multi_processor_count if args.device == "cuda"
                          else None)))
    if args.recheck:
        recheck(s, args.recheck, args.precompile_jobs)
        s.pack()
    else:
        run_groups(s, [g for g in args.groups.split(",") if g], args, prov)
    return 0


def run_groups(s: Session, groups: list[str], args, prov: dict) -> None:
    """Every group in turn (warm-up and checks, then timed rounds), the floor last (FLOOR_S of the
    budget kept for it), then the table and targets."""
    variants = plan(args.device)
    timed = [g for g in groups if g != "floor"]
    keep = FLOOR_S if "floor" in groups else 0.0
    if args.device == "cuda" and args.precompile_jobs > 0:
        s.say(precompile_plan([v for v in variants if v.group in timed], args.precompile_jobs, s))
    for i, group in enumerate(timed):
        live = warm_up(s, [v for v in variants if v.group == group])
        time_rounds(s, live, max(s.left() - keep, 0) / (len(timed) - i), args.rounds)
        s.say(f"group {group} done at {time.monotonic() - s.start:.0f} s")
        s.pack()
    floor = run_floor(s) if "floor" in groups else []
    (s.out / "table.json").write_text(json.dumps({"entries": table_rows(s.done, prov)}, indent=1) + "\n")
    for v in s.done:
        r = v.rec
        s.say(f"{v.group:<5} {v.config:<6} L={v.depth:<2} b={v.batch:<2} {v.label:<32} "
              f"{r.get('us_per_step', '-'):>8} us/t  check {r.get('check_max_rel', float('nan')):.1e} "
              f"{r.get('samples_per_s', '')} {r.get('error') or ''}")
    lines = targets(s.done)
    (s.out / "targets.txt").write_text("\n".join(lines + floor) + "\n")
    for line in lines:
        s.say(line)
    s.say(f"{len(s.done)} records in {s.out / 'store'}; {time.monotonic() - s.start:.0f} s")
    s.pack()


def run_floor(s: Session) -> list[str]:
    """The floor under a step (``sync_floor.py``: a grid barrier and a chain of dependent loads
    alone, a launch a step from the host and in a CUDA graph), checked and timed: ``floor.json``,
    and its ``FLOOR:`` lines for ``targets.txt``. A failure is one line; the session goes on."""
    import sync_floor

    try:
        results = sync_floor.measure(s.device, min(FLOOR_S / 2, max(s.left(), 0.0)), s.say)
    except Exception as exc:  # noqa: BLE001  (the floor explains the targets; it must not cost them)
        line = f"FLOOR: failed: {one_line(exc)}"
        s.say(line)
        return [line]
    (s.out / "floor.json").write_text(json.dumps(results, indent=1) + "\n")
    s.say(f"floor done at {time.monotonic() - s.start:.0f} s")
    s.pack()
    return sync_floor.lines(results)


if __name__ == "__main__":
    sys.exit(main())
