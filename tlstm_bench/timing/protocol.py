"""The runtime protocol of SPEC section 8, the paper's definition of runtime.

Milliseconds of one forward + loss + backward pass per timestep of a single example:
batch 1, a whole sequence of T timesteps, divided by T. Warm-up runs first and is not
kept; then ``repeats`` timed runs; the record holds the median, the quartiles and
every raw sample.

* CPU: ``time.perf_counter`` (monotonic), an explicit thread count
  (``torch.set_num_threads``), and subnormal floats flushed
  (``torch.set_flush_denormal(True)``; recorded as ``flush_denormal``), because the
  decaying recurrent state produces subnormals that slowed the same model 10-100x.
* CUDA: CUDA events around each run, synchronised before reading them.

Several cases (configuration x depth x implementation) are timed with their repeats
interleaved (round r times every case once before round r+1 starts), so slow phases of
a shared machine hit every case alike and ratios between cases stay meaningful.
"""

from __future__ import annotations

import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable

import torch
from torch.nn import functional as F

from .. import checks
from ..audit import causal
from ..errors import UserError
from ..events import Progress, note, reporter
from ..models import SLSTM_IMPLEMENTATIONS, TLSTM_IMPLEMENTATIONS, build_model, format_config, parse_config
from ..models.memory import MAX_DIM, MemoryEstimate, check_fits, model_memory
from ..results import provenance
from ..vocab import (CUDA_IMPLEMENTATIONS, DEFAULT_DTYPE, DEFAULT_IMPLEMENTATION, DTYPES, MAX_REPEATS, TIMING_REPEATS,
                     TIMING_SEQ_LEN, TIMING_VOCAB, TIMING_WARMUP, torch_device)


def default_implementation(config: str) -> str:
    """What runs when no implementation is named (``tlstm_bench.vocab.DEFAULT_IMPLEMENTATION``)."""
    return DEFAULT_IMPLEMENTATION[parse_config(config).kind]


@dataclass(frozen=True)
class Case:
    """One thing to time: a configuration at a depth with one implementation (None: the default)."""

    config: str
    depth: int
    implementation: str | None = None  # None: default_implementation(config)


def plan_cases(configs: list[str], depths: list[int], implementation: str | None, device: str) -> list[Case]:
    """The cases to time: every config x depth x implementation.

    No implementation: every sLSTM implementation (fused, wavefront, loop) and the tLSTM's
    default (``fast``). ``all``: every registered implementation (those in
    ``CUDA_IMPLEMENTATIONS`` only on cuda). A name: used for the configurations that have it
    (an error if none does).
    """
    cases = []
    for config in configs:
        arch = parse_config(config)
        table = SLSTM_IMPLEMENTATIONS if arch.kind == "slstm" else TLSTM_IMPLEMENTATIONS
        if implementation == "all" or (implementation is None and arch.kind == "slstm"):
            names = [n for n in table if n not in CUDA_IMPLEMENTATIONS or device.startswith("cuda")]
        elif implementation is None:
            names = [default_implementation(config)]
        else:
            names = [implementation] if implementation in table else []
        cases += [Case(arch.label, d, n) for n in names for d in depths]
    if not cases:
        known = sorted(set(SLSTM_IMPLEMENTATIONS) | set(TLSTM_IMPLEMENTATIONS))
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
    """Set the thread count and flush subnormals for the measurement; restore afterwards."""
    if threads is not None:
        checks.threads(threads, "threads")
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    flushed = bool(torch.set_flush_denormal(True))
    try:
        yield flushed
    finally:
        torch.set_flush_denormal(False)  # torch's default; do not leak into the caller
        torch.set_num_threads(old_threads)


class _Run:
    """A built model with its fixed input and target: one call = forward + loss + backward."""

    def __init__(self, case: Case, *, channels, budget, vocab, input_size, output_size, seq_len,
                 device, dtype, seed):
        torch.manual_seed(seed)
        self.model = build_model(case.config, case.depth, vocab=vocab, input_size=input_size,
                                 output_size=output_size, channels=channels, budget=budget,
                                 implementation=case.implementation or default_implementation(case.config))
        self.model.to(device=device, dtype=dtype)
        gen = torch.Generator().manual_seed(seed)
        out = self.model.output_size
        if self.model.tokens:
            x = torch.randint(0, self.model.input_size, (1, seq_len), generator=gen)
        else:
            x = torch.randn(1, seq_len, self.model.input_size, generator=gen, dtype=dtype)
        self.x = x.to(device)
        self.target = torch.randint(0, out, (seq_len,), generator=gen).to(device)

    def loss(self) -> torch.Tensor:
        """The forward pass and the loss (what the counters call the ``fwd`` pass)."""
        y, _ = self.model(self.x)
        return F.cross_entropy(y.reshape(-1, y.shape[-1]), self.target)

    def __call__(self) -> None:
        for p in self.model.parameters():
            p.grad = None
        self.loss().backward()


def _time_once(run: _Run, device: torch.device, extra_delay: float, number: int = 1) -> float:
    """Seconds of one forward + loss + backward (the mean of ``number`` back-to-back runs)."""
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
        return start.elapsed_time(end) / 1000.0 / number
    t0 = time.perf_counter()
    for _ in range(number):
        run()
    if extra_delay:
        time.sleep(extra_delay * number)  # test-only slowdown hook (see measure_cases ``delay``)
    return (time.perf_counter() - t0) / number


def runtime_record(case: Case, run: _Run, samples_s: list[float], *, seq_len, device, dtype, threads,
                   flushed, warmup, repeats, number=1) -> dict:
    model = run.model
    samples = [1000.0 * s / seq_len for s in samples_s]
    return {
        **provenance(device),
        "causal": causal(model.arch, model.depth),
        "config": model.arch.label,
        "implementation": model.implementation,
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
        "flush_denormal": flushed,
        "clock": "cuda_events" if device.type == "cuda" else "perf_counter",
        "warmup": warmup,
        "repeats": repeats,
        "runs_per_sample": number,
        "interleaved": True,
        **summarize(samples),
        "samples": samples,
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


def measure_cases(cases: Iterable[Case], *, channels=None, budget=None, vocab: int | None = TIMING_VOCAB,
                  input_size=None, output_size=None, seq_len: int = TIMING_SEQ_LEN, device: str = "cpu",
                  repeats: int = TIMING_REPEATS, warmup: int = TIMING_WARMUP, threads: int | None = None,
                  dtype: str = DEFAULT_DTYPE, seed: int = 0, repeats_for: Callable[[Case], int] | None = None,
                  warmup_for: Callable[[Case], int] | None = None,
                  delay: Callable[[Case], float] | None = None, min_sample_s: float = 0.0,
                  progress: Progress = None) -> list[dict]:
    """Time every case with interleaved repeats; one record per case, in the order given.

    ``repeats_for(case)`` may lower the repeats of a slow case (e.g. the oracle at L=10);
    such a case simply drops out of the later rounds; ``warmup_for(case)`` likewise lowers
    its warm-up (the pure-Python oracle has nothing to warm up). ``delay(case)`` is a test-only hook
    that adds that many seconds inside the timed region of each run of a case (how the
    regression tests inject a slowdown into one curve).

    ``min_sample_s`` > 0 makes each sample the mean of ``number`` back-to-back runs, with
    ``number`` chosen from the last warm-up run so a sample lasts about that long (as
    ``timeit`` does). Without it a run of a small model lasts a few ms, and on a loaded
    machine such short runs are hit by scheduling differently from long ones, which
    skews the ratios between cases; the gate (``regress``) uses 50 ms.

    ``progress``: a reporter of :mod:`tlstm_bench.events` (a ``note`` per warm-up and per
    round), or True for plain lines on stderr; silent by default.
    """
    cases = list(cases)
    report = reporter(progress)
    dev = _check_settings(cases, repeats=repeats, warmup=warmup, seq_len=seq_len, seed=seed, dtype=dtype,
                          device=device)
    check_memory(cases, channels=channels, budget=budget, vocab=vocab, input_size=input_size,
                 output_size=output_size, seq_len=seq_len, device=str(dev), dtype=dtype)
    wanted = {c: (repeats_for(c) if repeats_for else repeats) for c in cases}
    warmups = {c: (warmup_for(c) if warmup_for else warmup) for c in cases}
    with cpu_settings(threads) as flushed:
        runs = {case: _Run(case, channels=channels, budget=budget, vocab=vocab, input_size=input_size,
                           output_size=output_size, seq_len=seq_len, device=dev, dtype=getattr(torch, dtype),
                           seed=seed)
                for case in cases}
        # Warm-up: not timed, not kept (allocator, caches, lazy init, CUDA graph capture).
        for case, run in runs.items():
            note(report, f"warm-up {case.config} L={case.depth} {run.model.implementation}", "detail")
            for _ in range(warmups[case]):
                run()
        number = _runs_per_sample(runs, dev, min_sample_s)
        samples = _timed_rounds(runs, wanted, number, dev, delay, report)
        return [runtime_record(c, runs[c], samples[c], seq_len=seq_len, device=dev, dtype=dtype,
                               threads=threads, flushed=flushed, warmup=warmups[c], repeats=wanted[c],
                               number=number[c])
                for c in cases]


def _check_settings(cases: list[Case], *, repeats, warmup, seq_len, seed, dtype, device) -> torch.device:
    """One-line errors for settings no measurement can have; the device to time on."""
    if not cases:
        raise UserError("nothing to time: give at least one configuration and depth")
    checks.integer(repeats, "repeats", maximum=MAX_REPEATS)
    checks.integer(warmup, "warmup", minimum=0, maximum=MAX_REPEATS)
    checks.integer(seq_len, "seq_len (T)", maximum=MAX_DIM)
    checks.seed(seed)
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    return torch_device(device)


def _runs_per_sample(runs: dict, dev: torch.device, min_sample_s: float) -> dict[Case, int]:
    """How many back-to-back runs make one sample of each case (1 unless ``min_sample_s``)."""
    number = {c: 1 for c in runs}
    if min_sample_s > 0:
        for case, run in runs.items():
            once = _time_once(run, dev, 0.0)
            number[case] = max(1, math.ceil(min_sample_s / max(once, 1e-6)))
    return number


def _timed_rounds(runs: dict, wanted: dict, number: dict, dev: torch.device, delay, report) -> dict:
    """Round r times every case that still wants samples once, before round r+1 starts."""
    samples: dict[Case, list[float]] = {c: [] for c in runs}
    rounds = max(wanted.values())
    for round_ in range(rounds):
        note(report, f"round {round_ + 1}/{rounds}", "detail")
        for case, run in runs.items():
            if len(samples[case]) < wanted[case]:
                samples[case].append(_time_once(run, dev, delay(case) if delay else 0.0, number[case]))
    return samples


def measure_runtime(config, depth, *, channels=None, budget=None, vocab=TIMING_VOCAB, input_size=None,
                    output_size=None, seq_len=TIMING_SEQ_LEN, device="cpu", implementation=None,
                    repeats=TIMING_REPEATS, warmup=TIMING_WARMUP, threads=None, dtype=DEFAULT_DTYPE,
                    seed=0) -> dict:
    """Time one configuration at one depth (SPEC section 8) and return its record.

    ``vocab`` gives token input and output; pass ``vocab=None`` with ``input_size`` and
    ``output_size`` for real-valued input. Exactly one of ``channels`` and ``budget``.
    The record's ``ms_per_step`` is the median over ``repeats`` of the milliseconds of
    forward + loss + backward over T steps divided by T; ``samples`` are the raw values.
    """
    if input_size is not None and vocab == TIMING_VOCAB:
        vocab = None  # real input asked for; the token default does not apply
    label = config if isinstance(config, str) else format_config(parse_config(config))
    (record,) = measure_cases([Case(label, depth, implementation)],
                              channels=channels, budget=budget, vocab=vocab, input_size=input_size,
                              output_size=output_size, seq_len=seq_len, device=device, repeats=repeats,
                              warmup=warmup, threads=threads, dtype=dtype, seed=seed)
    return record
