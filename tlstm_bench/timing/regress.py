"""The CI gate on runtime vs depth: ``tlstm-bench regress`` (issue 12).

It runs a small fixed set of configurations at a few depths on this machine and compares
two kinds of quantities with a baseline shipped with the package
(``tlstm_bench/timing/baselines/<device kind>.json``, read with importlib.resources):

1. Counters (:mod:`~tlstm_bench.timing.counters`): operator calls, FLOPs and created
   bytes of one forward + loss and one backward, per case. They are integers that do not
   depend on the machine or its load, so they are compared exactly: any increase is a
   regression, reported with the counter, the configuration and the depth. They only
   move when the code, the torch version or the device kind changes; with another torch
   version than the baseline's they are shown but do not fail (rewrite the baseline).
2. Timing: the cases are timed in interleaved rounds, and two kinds of ratio are taken
   round by round (:mod:`~tlstm_bench.results.stats`):

   * ``CONFIG t(L)/t(1)``: the shape of each runtime-vs-depth curve (the paper's claim);
   * ``CONFIG/slstm @L``: each tLSTM over the fused sLSTM at the same depth, which sees a
     uniform slowdown that the curve's shape cannot.

   Each quantity's median over the rounds comes with a 95% sign-test interval. A
   quantity regresses when the LOWER end of its interval is above ``TOLERANCE`` x its
   baseline, in the first run and again in a confirming re-run. The interval makes the
   threshold adapt to the noise of that run; ``TOLERANCE`` covers what no within-run
   interval can see: the drift of these ratios between runs and between load regimes
   of a shared machine (see ``docs/ci-gate.md`` for the measurements behind 1.25).
   Absolute milliseconds are never compared. Speed-ups show as ``faster``, never fail.

Exit status (the CLI): 0 no regression, 1 regression, 2 could not measure (no or
unreadable baseline, settings that differ from the baseline's, bad input).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from ..atomic import atomic_write, read_regular_text
from ..errors import UserError
from . import inject as _inject
from .counters import COUNTERS, count_cases
from .measure import measure_cases
from .protocol import Case, default_implementation
from ..results.stats import median_interval, paired_ratios

TOLERANCE = 1.25  # timing: lower end of the 95% interval over this x baseline is a regression
LEVEL = 0.95
UPDATE_RUNS = 3  # --update: the baseline's ratios are the median of this many runs
FORMAT_VERSION = 2
DELAY_ENV = "TLSTM_BENCH_REGRESS_DELAY"  # test-only: "CONFIG@L=SECONDS[,...]" sleeps in that case's runs

# Fixed sets: what is measured must not change between the baseline and the check.
# Samples of >= 20 ms (short runs are hit by scheduling differently from long ones) in
# 21 interleaved rounds: enough pairs for a 95% interval between the 6th and 16th.
MODES = {
    "quick": {"configs": ["slstm", "2d", "3d-cn"], "depths": [1, 4], "channels": 64, "seq_len": 100,
              "repeats": 21, "warmup": 2, "threads": 1, "min_sample_s": 0.02},
    "full": {"configs": ["slstm", "2d", "2d-m", "2d-f", "3d", "3d-cn"], "depths": [1, 4, 7, 10],
             "channels": 64, "seq_len": 100, "repeats": 15, "warmup": 2, "threads": 1, "min_sample_s": 0.02},
}


@dataclass
class CounterRow:
    """One counter of one case; values are totals over the T timesteps of one run."""

    config: str
    depth: int
    counter: str  # one of counters.COUNTERS
    baseline: int | None
    measured: int
    seq_len: int
    verdict: str  # ok | regression | fewer | changed (other torch version) | new

    @property
    def quantity(self) -> str:
        return f"{self.counter} {self.config} L={self.depth}"

    @property
    def change(self) -> float | None:
        return self.measured / self.baseline if self.baseline else None

    def per_step(self, value: int | None) -> float | None:
        return None if value is None else value / self.seq_len


@dataclass
class TimingRow:
    quantity: str
    baseline: float | None
    measured: float  # median of the round-by-round ratios
    low: float  # its 95% interval
    high: float
    verdict: str  # ok | regression | faster | new
    confirmed: bool = False  # True: a regression in the first run and in the re-run

    @property
    def change(self) -> float | None:
        return self.measured / self.baseline if self.baseline else None

    @property
    def change_low(self) -> float | None:
        return self.low / self.baseline if self.baseline else None

    @property
    def change_high(self) -> float | None:
        return self.high / self.baseline if self.baseline else None


@dataclass
class RegressResult:
    status: int  # 0 ok, 1 regression (2 is raised as UserError)
    mode: str
    baseline_path: str
    counters: list[CounterRow] = field(default_factory=list)
    timing: list[TimingRow] = field(default_factory=list)
    updated: bool = False
    rerun: bool = False  # a confirming timing run was made
    tolerance: float = TOLERANCE
    torch_version: str = ""
    baseline_torch_version: str | None = None
    notes: list[str] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def counter_regressions(self) -> list[CounterRow]:
        return [r for r in self.counters if r.verdict == "regression"]

    @property
    def timing_regressions(self) -> list[TimingRow]:
        return [r for r in self.timing if r.verdict == "regression"]

    def to_json(self) -> dict:
        def counter(r: CounterRow) -> dict:
            return {**asdict(r), "quantity": r.quantity, "per_step_baseline": r.per_step(r.baseline),
                    "per_step_measured": r.per_step(r.measured), "change": r.change}

        def timing(r: TimingRow) -> dict:
            return {**asdict(r), "change": r.change, "change_low": r.change_low, "change_high": r.change_high}

        return {"status": self.status, "verdict": "regression" if self.status else "ok", "mode": self.mode,
                "baseline": self.baseline_path, "updated": self.updated, "rerun": self.rerun,
                "tolerance": self.tolerance, "level": LEVEL, "torch_version": self.torch_version,
                "baseline_torch_version": self.baseline_torch_version, "notes": self.notes,
                "wall_s": self.wall_s, "counters": [counter(r) for r in self.counters],
                "timing": [timing(r) for r in self.timing]}


def device_kind(device: str = "cpu") -> str:
    """``cpu``, or ``cuda-<gpu name>``: one baseline per kind (CUDA runs other kernels, so other counters)."""
    if device.startswith("cuda"):
        import torch

        name = torch.cuda.get_device_name(torch.device(device)) if torch.cuda.is_available() else "unknown"
        return "cuda-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return "cpu"


def default_baseline(device: str = "cpu") -> Path:
    """The shipped baseline for this kind of device (package data)."""
    return Path(str(resources.files("tlstm_bench.timing").joinpath("baselines", f"{device_kind(device)}.json")))


def update_target(device: str = "cpu", results_dir: "str | Path | None" = None) -> Path:
    """Where ``--update`` writes without ``--baseline``: the results folder (``results_dir``, else
    the default one), never the installed package.

    To ship it, copy it to ``tlstm_bench/timing/baselines/`` in a checkout (or pass that path
    as ``--baseline``).
    """
    from ..results.store import workspace

    return workspace(results_dir).baselines / f"{device_kind(device)}.json"


# ---- quantities -------------------------------------------------------------------------

def timing_ratios(records: list[dict]) -> dict[str, list[float]]:
    """Round-by-round ratios of one interleaved run, per quantity."""
    samples = {(r["config"], r["depth"]): r["samples"] for r in records}
    configs = list(dict.fromkeys(c for c, _ in samples))
    depths = sorted({d for _, d in samples})
    out = {}
    for c in configs:
        for d in depths[1:]:
            out[f"{c} t({d})/t({depths[0]})"] = paired_ratios(samples[c, d], samples[c, depths[0]])
    for c in configs:
        if c == "slstm" or ("slstm", depths[0]) not in samples:
            continue
        for d in depths:
            out[f"{c}/slstm @L={d}"] = paired_ratios(samples[c, d], samples["slstm", d])
    return out


def timing_summary(records: list[dict]) -> dict[str, tuple[float, float, float]]:
    """(median, low, high) per quantity."""
    return {q: median_interval(v, LEVEL) for q, v in timing_ratios(records).items()}


def parse_delay(text: str | None) -> Callable[[Case], float] | None:
    """The test-only sleep hook from ``$TLSTM_BENCH_REGRESS_DELAY`` ("2d@4=0.05").

    It sleeps inside the timed region and moves no counter: the tests use it to check the
    timing half of the gate on its own. The gate's power is measured with real extra work
    (:mod:`~tlstm_bench.timing.inject`).
    """
    if not text:
        return None
    table = {}
    for item in text.split(","):
        try:
            key, seconds = item.split("=")
            config, depth = key.split("@")
            table[config.strip(), int(depth)] = float(seconds)
        except ValueError:
            raise UserError(f"bad {DELAY_ENV} entry {item!r}; use CONFIG@L=SECONDS") from None
    return lambda case: table.get((case.config, case.depth), 0.0)


def read_baseline(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(read_regular_text(path))  # never opens a FIFO (issue 31: it would block)
        if not isinstance(data, dict) or not isinstance(data.get("modes", {}), dict):
            raise ValueError("not a baseline object")
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the baseline {path}: {exc}; fix it or rewrite it with --update") from None
    return data


def _cases(settings: dict, injection: str | None) -> list[Case]:
    """The gate's cases; with a test-only injection the tLSTMs run ``fast+NAME``."""
    slowed = _inject.implementation(injection) if injection else None

    def impl(config: str) -> str | None:
        return slowed if slowed and default_implementation(config) == "fast" else None

    return [Case(c, d, impl(c)) for c in settings["configs"] for d in settings["depths"]]


def _measure_timing(settings: dict, device: str, cases: list[Case], delay) -> list[dict]:
    # isolate=False: the gate is one measurement of fixed implementations (an error fails it), and
    # its test hooks (delay, the injected fast+NAME copies) live in this process only
    return measure_cases(cases, channels=settings["channels"], seq_len=settings["seq_len"], device=device,
                         repeats=settings["repeats"], warmup=settings["warmup"], threads=settings["threads"],
                         delay=delay, min_sample_s=settings["min_sample_s"], isolate=False)


def _measure_counters(settings: dict, device: str, cases: list[Case]) -> dict[str, dict[str, int]]:
    counts = count_cases(cases, channels=settings["channels"], seq_len=settings["seq_len"], device=device)
    return {f"{c.config} L={c.depth}": v for c, v in counts.items()}


# ---- comparisons ------------------------------------------------------------------------

def compare_counters(expected: dict, measured: dict, seq_len: int, *, same_torch: bool = True) -> list[CounterRow]:
    """Exact comparison; an increase is a regression (with another torch version: ``changed``)."""
    rows = []
    for key, values in measured.items():
        config, depth = key.rsplit(" L=", 1)
        for name in COUNTERS:
            value, base = values[name], expected.get(key, {}).get(name)
            if base is None:
                verdict = "new"
            elif value == base:
                verdict = "ok"
            elif not same_torch:
                verdict = "changed"
            else:
                verdict = "regression" if value > base else "fewer"
            rows.append(CounterRow(config, int(depth), name, base, value, seq_len, verdict))
    return rows


def compare_timing(expected: dict, measured: dict, tolerance: float = TOLERANCE) -> list[TimingRow]:
    rows = []
    for q, (median, low, high) in measured.items():
        base = expected.get(q, {}).get("median")
        if not base or base <= 0:
            rows.append(TimingRow(q, None, median, low, high, "new"))
            continue
        verdict = "regression" if low / base > tolerance else ("faster" if high / base < 1 / tolerance else "ok")
        rows.append(TimingRow(q, base, median, low, high, verdict))
    return rows


def _confirm(first: list[TimingRow], second: list[TimingRow]) -> list[TimingRow]:
    """A timing regression stands only if both runs show it; the milder run is reported."""
    again = {r.quantity: r for r in second}
    rows = []
    for row in first:
        other = again.get(row.quantity)
        if row.verdict != "regression" or other is None:
            rows.append(row)
        elif other.verdict == "regression":
            milder = row if row.low <= other.low else other
            rows.append(TimingRow(**{**asdict(milder), "confirmed": True}))
        else:
            rows.append(other)
    return rows


# ---- the gate ---------------------------------------------------------------------------

def _check_against(data: dict, path: Path, mode: str, settings: dict, quick: bool, device: str) -> dict:
    flag = " --quick" if quick else ""
    if not data:
        raise UserError(f"no baseline at {path}; measure one with `tlstm-bench regress --update{flag}`")
    if data.get("version") != FORMAT_VERSION:
        raise UserError(f"the baseline {path} has format version {data.get('version')}, this gate reads "
                        f"{FORMAT_VERSION} (counters + timing intervals); rewrite it with "
                        f"`tlstm-bench regress --update{flag}`")
    if data.get("device_kind") != device_kind(device):
        raise UserError(f"the baseline {path} is for {data.get('device_kind')}, this is {device_kind(device)}; "
                        f"use that device's baseline or write one with `tlstm-bench regress --update{flag}`")
    if mode not in data.get("modes", {}):
        raise UserError(f"the baseline {path} has no {mode!r} entry; add it with `tlstm-bench regress --update{flag}`")
    entry = data["modes"][mode]
    if entry.get("settings") != settings:
        raise UserError(f"the baseline {path} was measured with other settings ({entry.get('settings')}); "
                        "rewrite it with --update")
    return entry


def _update(result: RegressResult, data: dict, path: Path, settings: dict, device: str, cases: list[Case],
            counters: dict, runs: int, start: float) -> RegressResult:
    """Time ``runs`` times, write the baseline (counters + each ratio's median over the runs)."""
    records = [_measure_timing(settings, device, cases, None) for _ in range(max(1, runs))]
    summaries = [timing_summary(r) for r in records]
    timing = {q: {"median": statistics.median(s[q][0] for s in summaries), "runs": [s[q][0] for s in summaries],
                  "intervals": [list(s[q][1:]) for s in summaries]} for q in summaries[0]}
    first = records[0][0]
    # Keep the other mode's entry unless it is of the old format (unreadable now anyway).
    modes = {k: v for k, v in data.get("modes", {}).items() if k != result.mode and "counters" in v}
    data = {"version": FORMAT_VERSION, "device_kind": device_kind(device), "modes": modes}
    data["modes"][result.mode] = {
        "settings": settings, "level": LEVEL, "counters": counters, "timing": timing,
        "device_name": first["device_name"], "cpu_model": first.get("cpu_model"),
        "torch_version": first["torch_version"], "git_commit": first["git_commit"],
        "git_dirty": first.get("git_dirty"), "date": first["date"],
        "ms_per_step": {f"{r['config']} L={r['depth']}": r["ms_per_step"] for r in records[0]},
    }
    atomic_write(path, lambda fh: fh.write(json.dumps(data, indent=1, sort_keys=True) + "\n"))
    result.updated = True
    result.records = records[0]
    result.counters = compare_counters({}, counters, settings["seq_len"])
    # Shown for a new baseline: its median and the range of the runs' medians.
    result.timing = [TimingRow(q, None, t["median"], min(t["runs"]), max(t["runs"]), "new")
                     for q, t in timing.items()]
    result.wall_s = time.perf_counter() - start
    return result


def regress(*, quick: bool = False, update: bool = False, baseline: "str | Path | None" = None,
            device: str = "cpu", delay: Callable[[Case], float] | None = None, inject: str | None = None,
            settings: dict | None = None, tolerance: float = TOLERANCE,
            update_runs: int = UPDATE_RUNS) -> RegressResult:
    """Count and time the fixed set, and compare with (or, with ``update``, write) the baseline.

    ``settings`` overrides the mode's fixed set (tests only). ``delay`` (a sleep) and
    ``inject`` (real extra work in the fast tLSTM's loops, :mod:`~tlstm_bench.timing.inject`)
    are test-only slowdowns.
    """
    import torch

    start = time.perf_counter()
    mode = "quick" if quick else "full"
    settings = {**MODES[mode], **(settings or {})}
    if baseline is not None:
        path = Path(baseline)
    else:
        path = update_target(device) if update else default_baseline(device)
    inject = _inject.check_injection(inject)
    if update and (inject or delay):
        raise UserError("a baseline cannot be written with a test-only slowdown switched on")
    data = read_baseline(path)
    entry = None if update else _check_against(data, path, mode, settings, quick, device)
    cases = _cases(settings, inject)
    counters = _measure_counters(settings, device, cases)
    result = RegressResult(0, mode, str(path), tolerance=tolerance, torch_version=torch.__version__)

    if update:
        return _update(result, data, path, settings, device, cases, counters, update_runs, start)
    result.baseline_torch_version = entry.get("torch_version")
    same_torch = result.baseline_torch_version == torch.__version__
    if not same_torch:
        result.notes.append(f"counters not gated: the baseline was counted with torch {result.baseline_torch_version}, "
                            f"this is torch {torch.__version__}; rewrite it with --update")
    result.counters = compare_counters(entry["counters"], counters, settings["seq_len"], same_torch=same_torch)
    records = _measure_timing(settings, device, cases, delay)
    result.records = records
    rows = compare_timing(entry["timing"], timing_summary(records), tolerance)
    if any(r.verdict == "regression" for r in rows):
        again = compare_timing(entry["timing"], timing_summary(_measure_timing(settings, device, cases, delay)),
                               tolerance)
        rows = _confirm(rows, again)
        result.rerun = True
    result.timing = rows
    result.status = 1 if result.counter_regressions or result.timing_regressions else 0
    result.wall_s = time.perf_counter() - start
    return result
