"""The runtime protocol of SPEC section 8, the paper's definition of runtime.

Milliseconds of one forward + loss + backward pass per timestep of a single example:
batch 1, a whole sequence of T timesteps, divided by T. Warm-up runs first and is not
kept; then ``repeats`` timed runs; the record holds the median, the quartiles and
every raw sample.

* CPU: ``time.perf_counter`` (monotonic), an explicit thread count
  (``torch.set_num_threads``), and subnormal floats flushed
  (``torch.set_flush_denormal(True)``; recorded as ``flush_denormal``), because the
  decaying recurrent state produces subnormals that slowed the same model 10-100x.
  Each sample also measures the process's CPU time against its wall time (``cpu_share``):
  how much of the sample the machine's other work took (:func:`time_sample`).
* CUDA: CUDA events around each run, synchronised before reading them.

Several cases (configuration x depth x implementation) are timed with their repeats
interleaved (round r times every case once before round r+1 starts), so slow phases of
a shared machine hit every case alike and ratios between cases stay meaningful.
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .. import checks
from ..checks import MAX_DIM
from ..audit import causal
from ..errors import UserError
from ..models import TLSTM_IMPLEMENTATIONS, build_model, check_runs_on, parse_config
from ..models.build import FAMILIES
from ..models.cuda_graph import GraphedStep, check_cuda
from ..models.memory import MemoryEstimate, check_fits, model_memory
from ..results import provenance
from ..vocab import (CUDA_IMPLEMENTATIONS, DEFAULT_DTYPE, DEFAULT_IMPLEMENTATION, DEFAULT_PRECISION, DTYPES,
                     GRAPHED_IMPLEMENTATIONS, MAX_REPEATS, TIMING_REPEATS, TIMING_SEQ_LEN, TIMING_VOCAB,
                     TIMING_WARMUP, check_precision, torch_device)


STEADY_WITHIN = 0.10  # warm-up goes on until its last two runs agree this closely (relative)


def default_implementation(config: str) -> str:
    """What runs when no implementation is named (``tlstm_bench.vocab.DEFAULT_IMPLEMENTATION``)."""
    return DEFAULT_IMPLEMENTATION[parse_config(config).kind]


@dataclass(frozen=True)
class Case:
    """One thing to time: a configuration at a depth with one implementation (None: the default)."""

    config: str
    depth: int
    implementation: str | None = None  # None: default_implementation(config)


def implementations_of(kind: str) -> list[str]:
    """Every implementation a case of this kind (``slstm``, ``tlstm``, ``lstm``) can be timed with:
    the model's sequence loops, and for the tLSTM the graphed steps (``cuda-graph``, ``triton-graph``)."""
    if kind != "tlstm":
        return list(FAMILIES[kind][0])
    return [*TLSTM_IMPLEMENTATIONS, *GRAPHED_IMPLEMENTATIONS]


def plan_cases(configs: list[str], depths: list[int], implementation: str | None, device: str) -> list[Case]:
    """The cases to time: every config x depth x implementation.

    No implementation: every sLSTM implementation (fused, cudnn, wavefront, loop) and the tLSTM's
    default (``fast``). ``all``: every registered implementation (those in
    ``CUDA_IMPLEMENTATIONS`` only on cuda). A name: used for the configurations that have it
    (an error if none does).
    """
    cases = []
    for config in configs:
        arch = parse_config(config)
        table = implementations_of(arch.kind)
        if implementation == "all" or (implementation is None and arch.kind != "tlstm"):
            names = [n for n in table if n not in CUDA_IMPLEMENTATIONS or device.startswith("cuda")]
        elif implementation is None:
            names = [default_implementation(config)]
        else:
            names = [implementation] if implementation in table else []
        cases += [Case(arch.label, d, n) for n in names for d in depths]
    if not cases:
        known = sorted(set(implementations_of("slstm")) | set(implementations_of("tlstm")))
        raise UserError(f"no configuration given has implementation {implementation!r}; "
                        f"use one of {', '.join(known)} or all")
    return cases


def _quantile(values: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of a non-empty list."""
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(samples: list[float]) -> dict:
    """Median, quartiles and IQR of the per-repeat ms per step."""
    q25, q75 = _quantile(samples, 0.25), _quantile(samples, 0.75)
    return {"ms_per_step": statistics.median(samples), "ms_q25": q25, "ms_q75": q75, "ms_iqr": q75 - q25}


@contextmanager
def cpu_settings(threads: int | None):
    """Set the thread count and flush subnormals for the measurement, and turn TF32 off (float32
    is timed as float32: cuDNN allows TF32 by default, so its LSTM would round its products
    otherwise; the record says ``tf32``); restore afterwards."""
    if threads is not None:
        checks.threads(threads, "threads")
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    flushed = bool(torch.set_flush_denormal(True))
    old_tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield flushed
    finally:
        torch.set_flush_denormal(False)  # torch's default; do not leak into the caller
        torch.set_num_threads(old_threads)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old_tf32


class StepRun:
    """A built model with its fixed input and target: one call = forward + loss + backward.

    The input and target are fixed buffers: a caller that wants other data copies it into
    ``x`` and ``target`` in place (a captured step reads them at their addresses). For a
    graphed implementation (``cuda-graph``, ``triton-graph``: ``vocab.GRAPHED_IMPLEMENTATIONS``)
    the model runs the loop it maps to, and the first call captures the whole step as one CUDA
    graph (:class:`~tlstm_bench.models.cuda_graph.GraphedStep`); every call replays it. What
    the triton kernels ran (``model.triton_last``) is what the capture ran: a replay runs no
    Python, so it stays as the capture left it.
    """

    def __init__(self, case: Case, *, channels, budget, vocab, input_size, output_size, seq_len,
                 device, dtype, seed, precision: str = DEFAULT_PRECISION):
        self.case = case
        self.implementation = case.implementation or default_implementation(case.config)
        self.precision = check_precision(precision, self.implementation)
        loop = GRAPHED_IMPLEMENTATIONS.get(self.implementation)
        if loop is not None:
            check_cuda(device, self.implementation)
        torch.manual_seed(seed)
        self.model = build_model(case.config, case.depth, vocab=vocab, input_size=input_size,
                                 output_size=output_size, channels=channels, budget=budget,
                                 implementation=loop or self.implementation)
        self.model.to(device=device, dtype=dtype)
        self.model.precision = precision  # read by the triton kernels (docs/triton.md, "Precision")
        gen = torch.Generator().manual_seed(seed)
        out = self.model.output_size
        if self.model.tokens:
            x = torch.randint(0, self.model.input_size, (1, seq_len), generator=gen)
        else:
            x = torch.randn(1, seq_len, self.model.input_size, generator=gen, dtype=dtype)
        self.x = x.to(device)
        self.target = torch.randint(0, out, (seq_len,), generator=gen).to(device)
        self.graphed = loop is not None
        self._step: GraphedStep | None = None
        self.last_loss: torch.Tensor | None = None  # the loss of the last call (a static buffer when graphed)

    def loss(self) -> torch.Tensor:
        """The forward pass and the loss (what the counters call the ``fwd`` pass)."""
        y, _ = self.model(self.x)
        return F.cross_entropy(y.reshape(-1, y.shape[-1]), self.target)

    def __call__(self) -> None:
        if self.graphed:
            if self._step is None:
                self._step = GraphedStep(self.loss, self.model.parameters(), implementation=self.implementation,
                                         context=self._captured)
            self.last_loss = self._step()
            return
        for p in self.model.parameters():
            p.grad = None
        loss = self.loss()
        loss.backward()
        self.last_loss = loss.detach()

    def _captured(self) -> str:
        """What a failed capture was capturing, in a few words (the triton kernels' path)."""
        ran = self.model.__dict__.get("triton_last")
        if ran is None:
            return f"the {self.model.implementation} loop"
        if ran["persistent"]:
            return "the persistent triton kernels: a cooperative launch, which TLSTM_TRITON_PERSISTENT=0 avoids"
        return "the per-step triton kernels"

    def gradients(self) -> dict[str, torch.Tensor | None]:
        """Every parameter's gradient after the last call, by name."""
        return {name: p.grad for name, p in self.model.named_parameters()}


def time_sample(run: StepRun, device: torch.device, extra_delay: float = 0.0,
                number: int = 1) -> tuple[float, float | None]:
    """(seconds of one forward + loss + backward, the mean of ``number`` back-to-back runs; the
    share of that wall time the process ran on its CPU threads, None on CUDA).

    The share is the contention check: CPU time over wall time x threads (with one thread, the
    CPU time of this thread alone, so a progress bar's thread does not count). 1.0: the process
    had its cores the whole time; 0.5: it waited half the time for a core another process held.
    A clock that sees no time pass (frozen, faked) is refused: a 0 ms sample is not a measurement.
    """
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(number):
            run()
        if extra_delay:
            torch.cuda._sleep(int(extra_delay * number * 1e9))  # test hook only; roughly cycles
        end.record()
        torch.cuda.synchronize(device)
        return _advanced(start.elapsed_time(end) / 1000.0, run) / number, None
    threads = torch.get_num_threads()
    cpu_clock = time.thread_time if threads == 1 else time.process_time
    c0, t0 = cpu_clock(), time.perf_counter()
    for _ in range(number):
        run()
    if extra_delay:
        time.sleep(extra_delay * number)  # test-only slowdown hook (see measure_cases ``delay``)
    wall = _advanced(time.perf_counter() - t0, run)
    return wall / number, min(1.0, (cpu_clock() - c0) / (wall * threads))


class FrozenClock(UserError):
    """A timed run that took no time: the clock is frozen or faked. Bad input for every case."""


def _advanced(seconds: float, run: StepRun) -> float:
    if seconds > 0:
        return seconds
    case = getattr(run, "case", None)
    what = f" while timing {case.config} L={case.depth}" if case is not None else ""
    raise FrozenClock(f"the clock did not advance{what} ({seconds} s for a whole run): a frozen or faked "
                    "clock (faketime?) cannot time anything, so nothing is recorded")


def time_step(run: StepRun, device: torch.device, extra_delay: float = 0.0, number: int = 1) -> float:
    """Seconds of one forward + loss + backward (the mean of ``number`` back-to-back runs)."""
    return time_sample(run, device, extra_delay, number)[0]


def warm_up(run: StepRun, device: torch.device, minimum: int) -> list[float]:
    """Untimed runs until the step is in a steady state; returns their seconds.

    At least ``minimum`` runs. From two on, more (up to ``minimum`` more) until the last two
    agree within ``STEADY_WITHIN``: a first compilation, a CUDA-graph capture, cuDNN's
    algorithm search or a GPU clocking up must not reach the timed rounds (on the H100 the
    first groups of a run were timed slower than the same cases later).
    """
    seconds = [time_step(run, device) for _ in range(minimum)]
    if minimum >= 2:
        while len(seconds) < 2 * minimum and abs(seconds[-1] - seconds[-2]) > STEADY_WITHIN * seconds[-1]:
            seconds.append(time_step(run, device))
    return seconds


def runtime_record(case: Case, run: StepRun, samples_s: list[float], *, seq_len, device, dtype, threads,
                   flushed, warmup, repeats, number=1, shares: list | None = None) -> dict:
    model = run.model
    samples = [1000.0 * s / seq_len for s in samples_s]
    shares = [round(s, 3) for s in shares] if shares and None not in shares else None
    return {
        **provenance(device),
        "causal": causal(model.arch, model.depth),
        "config": model.arch.label,
        "init": model.arch.init,
        "implementation": run.implementation,
        "depth": model.depth,
        "channels": model.channels,
        "tensor_size": model.tensor_size,
        "params": sum(p.numel() for p in model.parameters()),
        "input_size": model.input_size,
        "output_size": model.output_size,
        "seq_len": seq_len,
        "batch": 1,
        "sequential_steps": model.arch.sequential_steps(seq_len, model.depth),
        "device": device.type,
        "threads": torch.get_num_threads() if threads is None else threads,
        "dtype": dtype,
        "tf32": (torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32) if device.type == "cuda"
        else None,
        "precision": run.precision,
        **({"kernels": model.__dict__["triton_last"]} if "triton_last" in model.__dict__ else {}),
        "flush_denormal": flushed,
        "clock": "cuda_events" if device.type == "cuda" else "perf_counter",
        "warmup": warmup,
        "repeats": repeats,
        "runs_per_sample": number,
        "interleaved": True,
        **summarize(samples),
        "samples": samples,
        "cpu_share": round(statistics.median(shares), 3) if shares else None,
        "cpu_shares": shares,
    }


def check_memory(cases: list[Case], *, channels, budget, vocab, input_size, output_size, seq_len: int,
                 device: str, dtype: str) -> None:
    """Refuse, before any model is built, cases that cannot fit on the device together: every
    case's model is held for the whole measurement, one pass runs at a time (batch 1)."""
    weights, peak = 0, MemoryEstimate(0, 0, 0)
    for case in cases:
        one = model_memory(case.config, case.depth, channels=channels, budget=budget, vocab=vocab,
                           input_size=input_size, output_size=output_size, batch=1, seq_len=seq_len, dtype=dtype)
        weights += one.weights
        if one.activations + one.data > peak.activations + peak.data:
            peak = one
    what = f"timing {cases[0].config} at L={cases[0].depth}" if len(cases) == 1 else f"timing these {len(cases)} cases"
    check_fits(MemoryEstimate(weights, peak.activations, peak.data), device, f"{what} at T={seq_len}",
               "lower the depth, --channels/--budget or --seq-len")


@dataclass(frozen=True)
class Setup:
    """What every case of one measurement is built and timed with (picklable: workers get it)."""

    channels: int | None
    budget: str | None
    vocab: int | None
    input_size: int | None
    output_size: int | None
    seq_len: int
    device: str
    dtype: str
    seed: int
    threads: int | None
    min_sample_s: float
    precision: str = DEFAULT_PRECISION

    def implementation(self, case: Case) -> str:
        return case.implementation or default_implementation(case.config)

    def build(self, case: Case) -> StepRun:
        return StepRun(case, channels=self.channels, budget=self.budget, vocab=self.vocab,
                       input_size=self.input_size, output_size=self.output_size, seq_len=self.seq_len,
                       device=torch.device(self.device), dtype=getattr(torch, self.dtype), seed=self.seed,
                       precision=self.precision)


@dataclass(frozen=True)
class Plan:
    """How many timed runs (``wanted``) and minimum warm-up runs each case gets."""

    wanted: dict
    warmups: dict


def check_settings(cases: list[Case], *, repeats, warmup, seq_len, seed, dtype, device,
                   precision: str = DEFAULT_PRECISION) -> torch.device:
    """One-line errors for settings no measurement can have; the device to time on."""
    if not cases:
        raise UserError("nothing to time: give at least one configuration and depth")
    for case in cases:
        check_precision(precision, case.implementation or default_implementation(case.config))
    checks.integer(repeats, "repeats", maximum=MAX_REPEATS)
    checks.integer(warmup, "warmup", minimum=0, maximum=MAX_REPEATS)
    checks.integer(seq_len, "seq_len (T)", maximum=MAX_DIM)
    checks.seed(seed)
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    dev = torch_device(device)
    refused = []  # before any case is built or warmed up, when no case could run here
    for implementation in dict.fromkeys(case.implementation or default_implementation(case.config)
                                        for case in cases):
        try:
            check_runs_on(implementation, dev)
        except UserError as why:
            refused.append(why)
        else:
            break  # one can run: a refused case is its own failure (measure_cases' on_failure)
    else:
        raise refused[0]
    return dev
