"""The one timing entry point, :func:`measure_cases`, and the groups of cases it times.

Every caller that times something (``time``, ``regress``, a sweep's runtime section, the
benchmarks, the GPU evidence script) calls :func:`measure_cases` (or its one-case wrapper
:func:`measure_runtime`); the pieces it is made of (a case's step, the clock, the warm-up,
the record) are in :mod:`tlstm_bench.timing.protocol`.

A group builds
and warms up its cases once, then times one sample of each case it is asked for per
round. :func:`run_groups` drives the rounds across every group, so the repeats are
interleaved across groups as they are within one.

Each round's samples also measure the process's CPU time against their wall time
(``cpu_share``: a busy machine is warned about through ``progress``); odd rounds run in the
reverse order; a clock that does not advance raises ``protocol.FrozenClock`` (a UserError).

Why processes: a CUDA error (a failed graph capture, an illegal memory access) is sticky:
after it every CUDA call of the process fails, so in one process one broken
implementation takes every other case down with it (the first H100 run: after the
``cuda-graph`` capture failed, "Offset increment outside graph capture" everywhere).
With ``isolate``, each implementation's cases live in a spawned worker process that the
parent drives over a pipe, one command at a time (never two processes on the device at
once); a worker that raises or dies fails its own cases only. A graph capture that fails
(``models.cuda_graph.CaptureFailed``: ``cuda-graph``, ``triton-graph``) is its case's
failure, one line; the cases after it in the same process are still tried, and if they
fail too their line says that a capture failed before them in that process.
"""

from __future__ import annotations

import math
import multiprocessing
import statistics
import time
import traceback
import uuid
from typing import Callable, Iterable

import torch

from ..errors import UserError
from ..events import Progress, note, reporter
from ..models import format_config, parse_config
from ..models.cuda_graph import CaptureFailed
from ..vocab import (CONTENDED_SHARE, DEFAULT_DTYPE, DEFAULT_PRECISION, TIMING_REPEATS, TIMING_SEQ_LEN, TIMING_VOCAB,
                     TIMING_WARMUP)
from .protocol import (Case, FrozenClock, Plan, Setup, StepRun, check_memory, check_settings, cpu_settings,
                       runtime_record, time_sample, time_step, warm_up)

WORKER_TIMEOUT_S = 1800.0  # one command (a warm-up with a compilation, a round of slow cases)
ROUND_NOTE_EVERY_S = 5.0  # a long run says how far it is at most this often


USER_ERROR = "error: "  # a case's failure that is bad input (a UserError), not a fault


class GroupFailed(Exception):
    """A group's process broke: every case it still held failed with this reason."""


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}".rstrip(": ")


class CaseGroup:
    """Cases timed in this process: built and warmed up once, then one sample per case per round."""

    def __init__(self, cases: list[Case], setup: Setup, plan: Plan, *, contain: bool, delay=None, inspect=None,
                 flushed: bool = False):
        self.cases, self.setup, self.plan = cases, setup, plan
        self.contain, self.delay, self.inspect, self.flushed = contain, delay, inspect, flushed
        self.runs: dict[Case, StepRun] = {}
        self.warmup_runs: dict[Case, int] = {}
        self.number: dict[Case, int] = {}
        self.last: dict[Case, float] = {}
        self.samples: dict[Case, list[float]] = {}
        self.shares: dict[Case, list] = {}
        self.device = torch.device(setup.device)
        self.capture_failed: str | None = None  # "2d L=1": a capture failed in this process

    def prepare(self, cases: list[Case] | None = None) -> dict[Case, str]:
        """Build and warm up ``cases`` (default: every case); returns those that failed, with why
        (``contain``). A clock that sees no time pass fails every case: raised."""
        failed = {}
        for case in self.cases if cases is None else cases:
            try:
                run = self.setup.build(case)
                seconds = warm_up(run, self.device, self.plan.warmups[case])
                self.number[case] = self._runs_per_sample(run, seconds)
            except FrozenClock:
                raise  # no case can be timed with this clock
            except UserError as exc:
                if not self.contain:
                    raise
                failed[case] = USER_ERROR + str(exc)  # this implementation refuses this case
                continue
            except Exception as exc:  # noqa: BLE001 - contained: this case fails, the others go on
                if not self.contain:
                    raise
                failed[case] = _why(exc) + self._after_capture()
                if isinstance(exc, CaptureFailed) and self.capture_failed is None:
                    self.capture_failed = f"{case.config} L={case.depth}"
                continue
            self.runs[case], self.warmup_runs[case], self.samples[case] = run, len(seconds), []
            self.shares[case] = []
            self.last[case] = (seconds[-1] if seconds else 0.0) * self.number[case]
        return failed

    def _after_capture(self) -> str:
        """What to add to a later failure in a process where a graph capture failed."""
        return f" (after the failed graph capture of {self.capture_failed} in this process)" if self.capture_failed \
            else ""

    def _runs_per_sample(self, run: StepRun, warmup_s: list[float]) -> int:
        """1, or with ``min_sample_s`` enough back-to-back runs for a sample to last that long, from
        the fastest of a fresh run and the warm-up runs after the first (which pays the lazy
        initialisation): a preempted or cold run would make every sample too short."""
        min_s = self.setup.min_sample_s
        if min_s <= 0:
            return 1
        once = min([*warmup_s[1:], time_step(run, self.device)])
        return max(1, math.ceil(min_s / max(once, 1e-6)))

    def round(self, cases: list[Case]) -> dict[Case, float]:
        """One sample of each of ``cases`` (those this group holds), in order."""
        got = {}
        for case in cases:
            extra = self.delay(case) if self.delay else 0.0
            try:
                got[case], share = time_sample(self.runs[case], self.device, extra, self.number[case])
            except FrozenClock:
                raise  # no case can be timed with this clock
            except Exception as exc:  # noqa: BLE001 - the process may be broken: the group fails
                if not self.contain:
                    raise
                raise GroupFailed(f"{case.config} L={case.depth} failed, and with it this process: {_why(exc)}"
                                  + self._after_capture()) from exc
            self.last[case] = got[case] * self.number[case]
            self.samples[case].append(got[case])
            self.shares[case].append(share)
        return got

    def estimate(self) -> dict[Case, float]:
        """Seconds one sample of each held case took last."""
        return dict(self.last)

    def records(self, truncated: bool, isolated: bool) -> dict[Case, dict]:
        out = {}
        for case, run in self.runs.items():
            if not self.samples[case]:  # keep_going stopped the rounds before its first sample
                continue
            rec = runtime_record(case, run, self.samples[case], seq_len=self.setup.seq_len, device=self.device,
                                 dtype=self.setup.dtype, threads=self.setup.threads, flushed=self.flushed,
                                 warmup=self.plan.warmups[case], repeats=len(self.samples[case]),
                                 number=self.number[case], shares=self.shares[case])
            rec.update(warmup_runs=self.warmup_runs[case], truncated=truncated, isolated=isolated)
            if self.inspect is not None:
                rec.update(self.inspect(run, rec))
            out[case] = rec
        return out

    def close(self) -> None:
        self.runs.clear()


def _serve(conn, cases, setup: Setup, plan: Plan, prepare, inspect) -> None:
    """A worker process: one CaseGroup, driven by the parent's commands until ``stop``."""
    try:
        if prepare is not None:
            prepare()
        with cpu_settings(setup.threads) as flushed:
            group = CaseGroup(cases, setup, plan, contain=True, inspect=inspect, flushed=flushed)
            while True:
                command, arg = conn.recv()
                if command == "stop":
                    break
                method = {"prepare": group.prepare, "round": group.round, "records": group.records}[command]
                result = method(*arg)
                conn.send(("ok", (result, group.estimate())))
    except UserError as exc:
        conn.send(("user_error", str(exc)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails this group's cases
        conn.send(("error", _why(exc) + "\n" + traceback.format_exc(limit=6)))
    finally:
        conn.close()


class WorkerGroup:
    """The same three steps as :class:`CaseGroup`, run by a spawned worker process."""

    def __init__(self, cases: list[Case], setup: Setup, plan: Plan, prepare, inspect):
        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold a CUDA context
        self.cases = cases
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, cases, setup, plan, prepare, inspect), daemon=True)
        self.process.start()
        child.close()
        self.last: dict[Case, float] = {}

    def _ask(self, command: str, *arg):
        try:
            self.conn.send((command, arg))
            if not self.conn.poll(WORKER_TIMEOUT_S):
                raise GroupFailed(f"no answer to {command!r} within {WORKER_TIMEOUT_S:.0f} s")
            status, payload = self.conn.recv()
        except (EOFError, OSError):  # the pipe broke: the worker died (at start-up too)
            self.process.join(5)
            raise GroupFailed(f"the worker process died (exit code {self.process.exitcode})") from None
        if status == "user_error":
            raise UserError(payload)
        if status == "error":
            raise GroupFailed(payload)
        result, self.last = payload
        return result

    def prepare(self, cases: list[Case] | None = None) -> dict[Case, str]:
        return self._ask("prepare", cases)

    def round(self, cases: list[Case]) -> dict[Case, float]:
        return self._ask("round", cases)

    def estimate(self) -> dict[Case, float]:
        return dict(self.last)

    def records(self, truncated: bool, isolated: bool) -> dict[Case, dict]:
        return self._ask("records", truncated, isolated)

    def close(self) -> None:
        try:
            if self.process.is_alive():
                self.conn.send(("stop", ()))
            self.process.join(10)
        except (OSError, BrokenPipeError):
            pass
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()


def measure_cases(cases: Iterable[Case], *, channels=None, budget=None, vocab: int | None = TIMING_VOCAB,
                  input_size=None, output_size=None, seq_len: int = TIMING_SEQ_LEN, device: str = "cpu",
                  repeats: int = TIMING_REPEATS, warmup: int = TIMING_WARMUP, threads: int | None = None,
                  dtype: str = DEFAULT_DTYPE, seed: int = 0, repeats_for: Callable[[Case], int] | None = None,
                  warmup_for: Callable[[Case], int] | None = None,
                  delay: Callable[[Case], float] | None = None, min_sample_s: float = 0.0,
                  isolate: bool | None = None, on_failure: Callable[[Case, str], None] | None = None,
                  keep_going: Callable[[float], bool] | None = None, prepare: Callable[[], None] | None = None,
                  inspect: Callable[[StepRun, dict], dict] | None = None, progress: Progress = None,
                  precision: str = DEFAULT_PRECISION) -> list[dict]:
    """THE timing entry point: time every case with interleaved repeats; one record per case.

    Every caller (``time``, ``regress``, sweeps, the benchmarks and the GPU evidence script)
    comes here, so a number means the same thing whoever measured it: each case is built
    once, warmed up to a steady state (:func:`warm_up`), then timed in rounds, round r
    timing every case once before round r+1 starts, so a slow phase of a shared machine hits
    every case alike and ratios between cases stay meaningful. Records come in the order given,
    with one ``measurement`` id (their samples pair round by round) and, on a CPU, ``cpu_share``
    (see the module docstring). ``threads`` None: torch's current count.

    ``repeats_for(case)`` may lower a slow case's repeats (it drops out of later rounds),
    ``warmup_for(case)`` its minimum warm-up; ``delay(case)`` (tests) adds seconds to each run.
    ``min_sample_s`` > 0 makes each sample the mean of ``number`` back-to-back runs, ``number``
    chosen so a sample lasts that long (as ``timeit``; ``time`` and sweeps use
    ``vocab.CPU_MIN_SAMPLE_S`` on a CPU, the gate 20 ms).

    Failures: ``isolate`` (default: on a CUDA device when the cases have more than one
    implementation) times each implementation's cases in a process of its own, the rounds
    still interleaved across processes, so one implementation's CUDA error (a failed
    capture, an illegal access: they poison the whole CUDA context) cannot fail another's
    cases. With ``on_failure``, a case that cannot be built, warmed up or timed (and every
    case of its process when the process breaks) is reported as ``on_failure(case, why)``
    and left out of the records; without it the error is raised. A ``UserError`` (bad input)
    is always raised.

    ``keep_going(seconds)``, asked before each round with its estimated seconds, may stop the
    rounds early (a time budget): each case keeps its samples, its record says ``truncated``.
    ``prepare()`` runs first in each process (registers an implementation); ``inspect(run,
    record)``, after the rounds in the process that holds the run, returns fields to add to
    its record (profiler counts). Both must be picklable (module-level) to isolate.

    ``progress``: an :mod:`tlstm_bench.events` reporter, or True (stderr lines). ``precision``:
    of the float32 products (``vocab.PRECISIONS``; not ieee: triton only).
    """
    cases = list(cases)
    report = reporter(progress)
    dev = check_settings(cases, repeats=repeats, warmup=warmup, seq_len=seq_len, seed=seed, dtype=dtype,
                          device=device, precision=precision)
    check_memory(cases, channels=channels, budget=budget, vocab=vocab, input_size=input_size,
                 output_size=output_size, seq_len=seq_len, device=str(dev), dtype=dtype)
    setup = Setup(channels=channels, budget=budget, vocab=vocab, input_size=input_size, output_size=output_size,
                  seq_len=seq_len, device=str(dev), dtype=dtype, seed=seed, threads=threads,
                  min_sample_s=min_sample_s, precision=precision)
    plan = Plan(wanted={c: (repeats_for(c) if repeats_for else repeats) for c in cases},
                warmups={c: (warmup_for(c) if warmup_for else warmup) for c in cases})
    if isolate is None:
        isolate = dev.type == "cuda" and len({setup.implementation(c) for c in cases}) > 1
    records = run_groups(cases, setup, plan, isolate=isolate, delay=delay, on_failure=on_failure,
                         keep_going=keep_going, prepare=prepare, inspect=inspect, report=report)
    return [records[c] for c in cases if c in records]


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


def run_groups(cases: list[Case], setup: Setup, plan: Plan, *, isolate: bool, delay, on_failure, keep_going,
               prepare, inspect, report) -> dict[Case, dict]:
    """Build, warm up and time ``cases`` in groups; the records of every case that did not fail."""
    failures: dict[Case, str] = {}
    with cpu_settings(setup.threads) as flushed:
        groups = _start(cases, setup, plan, isolate, delay, on_failure is not None, prepare, inspect, flushed)
        try:
            groups = _prepare(groups, plan, failures, report)
            truncated = _rounds(groups, plan, keep_going, failures, report)
            records = _collect(groups, truncated, isolate, failures)
        finally:
            for group in groups:
                group.close()
    measurement = uuid.uuid4().hex[:12]  # the records whose samples pair round by round
    for record in records.values():
        record["measurement"] = measurement
    _contention_note(records, report)
    refused = [why[len(USER_ERROR):] for why in failures.values() if why.startswith(USER_ERROR)]
    if refused and (on_failure is None or not records):
        raise UserError(refused[0])  # bad input: for every case, or for a caller that contains nothing
    for case, why in failures.items():
        note(report, f"{case.config} L={case.depth} {setup.implementation(case)} failed: {why.splitlines()[0]}",
             "error")
        if on_failure is None:
            raise RuntimeError(f"timing {case.config} L={case.depth} {setup.implementation(case)} failed: {why}")
        on_failure(case, why)
    return records


def _contention_note(records: dict, report) -> None:
    """A warning when the machine's other work took a large share of the samples' time."""
    shares = [r["cpu_share"] for r in records.values() if r.get("cpu_share") is not None]
    if not shares or statistics.median(shares) >= CONTENDED_SHARE:
        return
    threads = max(r["threads"] for r in records.values())
    what = ("the threads waited for each other, so no depth is ordered (marked ≈): use --threads 1"
            if threads > 1 else "the ratios, paired round by round, hold where they are not marked ≈")
    note(report, f"warning: the machine was busy: this process had {statistics.median(shares):.0%} of its time "
                 f"on the CPU, so the milliseconds are slower than this machine's; {what}", "warning")


def _start(cases, setup, plan, isolate, delay, contain, prepare, inspect, flushed) -> list:
    if not isolate:
        if prepare is not None:
            prepare()
        return [CaseGroup(cases, setup, plan, contain=contain, delay=delay, inspect=inspect, flushed=flushed)]
    if delay is not None:
        raise ValueError("the test-only delay hook is not available with isolate (it does not cross processes)")
    by_impl: dict[str, list[Case]] = {}
    for case in cases:
        by_impl.setdefault(setup.implementation(case), []).append(case)
    return [WorkerGroup(group, setup, plan, prepare, inspect) for group in by_impl.values()]


def _prepare(groups: list, plan: Plan, failures: dict, report) -> list:
    """Warm up each group in turn, a case at a time (never two groups on the device at once),
    saying which case is warming up and, for one that took a while (a large model, an oracle),
    what its rounds will take. Returns the groups still alive."""
    alive, total = [], sum(len(g.cases) for g in groups)
    done = 0
    for group in groups:
        try:
            for case in group.cases:
                done += 1
                note(report, f"warm-up {done}/{total}: {case.config} L={case.depth} "
                     f"{case.implementation or 'default'}", "detail")
                start = time.perf_counter()
                failures.update(group.prepare([case]))
                took, sample = time.perf_counter() - start, group.estimate().get(case)
                if took >= ROUND_NOTE_EVERY_S and sample:
                    note(report, f"warm-up {done}/{total} took {_duration(took)}; its {plan.wanted[case]} "
                         f"rounds will take about {_duration(sample * plan.wanted[case])}", "detail")
        except GroupFailed as exc:
            failures.update({c: str(exc) for c in group.cases if c not in failures})
            group.close()
            continue
        alive.append(group)
    return alive


def _rounds(groups: list, plan: Plan, keep_going, failures: dict, report) -> bool:
    """Round r samples every case that wants more, group by group; True if stopped early.

    Odd rounds go in the reverse order (groups and cases): a load that grows or falls during a
    round then slows the first and the last case alike over two rounds, instead of always the
    same one, and a paired ratio is not biased by the order."""
    rounds = max(plan.wanted.values())
    done: dict[Case, int] = {}
    _estimate_note(groups, plan, rounds, report)
    start = last_note = time.perf_counter()
    for r in range(rounds):
        step = 1 if r % 2 == 0 else -1
        ordered = groups[::step]
        want = {id(g): [c for c in g.estimate() if done.get(c, 0) < plan.wanted[c]][::step] for g in ordered}
        if not any(want.values()):
            break
        if keep_going is not None:
            need = sum(g.estimate()[c] for g in groups for c in want[id(g)])
            if not keep_going(need):
                note(report, f"stopped after {r} of {rounds} rounds", "warning")
                return True
        now = time.perf_counter()
        if r and now - last_note >= ROUND_NOTE_EVERY_S:
            left = (now - start) / r * (rounds - r)
            note(report, f"round {r + 1}/{rounds}, about {_duration(left)} left", "detail")
            last_note = now
        for group in list(ordered):
            if not want[id(group)]:
                continue
            try:
                group.round(want[id(group)])
            except GroupFailed as exc:
                failures.update({c: str(exc) for c in group.estimate() if c not in failures})
                groups.remove(group)
                group.close()
                continue
            for c in want[id(group)]:
                done[c] = done.get(c, 0) + 1
    return False


def _estimate_note(groups: list, plan: Plan, rounds: int, report) -> None:
    """After the warm-up, what the rounds will take: each case's last sample x its repeats."""
    seconds = {c: s for g in groups for c, s in g.estimate().items()}
    if seconds:
        total = sum(s * plan.wanted[c] for c, s in seconds.items())
        note(report, f"timing {len(seconds)} case(s) in {rounds} interleaved rounds: about {_duration(total)}")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"


def _collect(groups: list, truncated: bool, isolated: bool, failures: dict) -> dict[Case, dict]:
    records = {}
    for group in groups:
        try:
            records.update(group.records(truncated, isolated))
        except GroupFailed as exc:
            failures.update({c: str(exc) for c in group.estimate() if c not in failures})
        for case in group.estimate():
            if case not in records and case not in failures:
                failures[case] = "stopped before its first sample (keep_going)"
    return records
