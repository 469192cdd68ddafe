"""Parts b, d and e: runtime through the one timing API (``measure_cases``), the regress
baseline through ``regress``, and the script's times against ``tlstm-bench time``'s."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from .common import CORE_TLSTM, FAILING, INJECTED, ROOT, TIME_CHECK, _fmt_ms, _num, interpreted
from .correctness import step_loss
from .plan import Cost, channels_of, regress_estimate
from .settings import Phase


class TimingPart:
    """Parts b, d and e, mixed into the Worker: their units."""

    def phase_impls(self, phase: Phase, family: str) -> list[str]:
        st = self.st
        if phase.select == "eager":
            return ["eager"] if family == "tlstm" else []
        usable = [n for n in st.family_impls(family) if st.status(n) != "broken" and n not in st.excluded()]
        passed = [n for n in self.ordered_check_impls(graphed=True) if n in usable and st.status(n) == "passed"]
        core = [n for n in passed if family == "slstm" or n in CORE_TLSTM or n in (INJECTED, FAILING)]
        if phase.select == "core":
            return core
        if phase.select == "extra":
            return [n for n in passed if n not in core]
        return [n for n in usable if st.status(n) in ("failed", "unchecked")]

    def channels_of(self, size: str):
        return channels_of(self.cfg, size)

    def timing_units(self, phase: Phase):
        for config in self.cfg.timed_configs:
            impls = self.phase_impls(phase, "slstm" if config == "slstm" else "tlstm")
            impls = [i for i in impls if not interpreted(i)]
            if not impls:
                continue
            cases = [(config, d, impl) for d in self.cfg.depths for impl in impls]
            uid = f"{phase.key}:{phase.size}:{config}:{'+'.join(impls)}"
            yield (uid, "b",
                   lambda cases=cases, phase=phase: self.cost.group_s(cases, phase.size, self.channels_of(phase.size),
                                                                      self.cfg.seq_len, phase.warmup, phase.repeats),
                   lambda cases=cases, phase=phase, uid=uid: self.time_group(phase, cases, uid))

    def measure(self, phase: Phase, cases: list, failures: dict, stopped: list) -> list[dict]:
        """One measure_cases call: these cases' depths and implementations interleaved, each
        implementation in a process of its own, a failure reported as its case's, the rounds
        stopped by the budget, profiler counts and fingerprints by ``inspect_run``."""
        from tlstm_bench.timing import measure_cases

        spec = self.cfg.sizes[phase.size]
        asked = []

        def keep_going(seconds: float) -> bool:
            asked.append(seconds)  # the first round always runs: a case needs one sample for a record
            ok = len(asked) == 1 or self.budget.fits(seconds + self.inspect_s(cases), self.reserve(), safety=1.1)
            if not ok:
                stopped.append(len(asked) - 1)
            return ok

        return measure_cases(cases, channels=spec.get("channels"), budget=spec.get("budget"), vocab=self.cfg.vocab,
                             seq_len=self.cfg.seq_len, device=str(self.dev), repeats=phase.repeats,
                             warmup=phase.warmup, threads=1 if self.dev.type == "cpu" else None, dtype="float32",
                             seed=0, isolate=True, on_failure=failures.__setitem__, keep_going=keep_going,
                             prepare=self.prepare_fn, inspect=inspect_run)

    def inspect_s(self, cases: list) -> float:
        """Seconds inspect_run takes after the rounds: a profiled run and a fingerprint per case."""
        return len(cases) * Cost.PROFILE_S[self.dev.type]

    def time_group(self, phase: Phase, group: list[tuple], uid: str = "") -> str | None:
        """Time one configuration's depths x implementations together (SPEC section 8, through
        the one timing API); record each case's time, counts and validity, or its failure."""
        from tlstm_bench.errors import UserError
        from tlstm_bench.timing import Case

        cases = [Case(*c) for c in group]
        failures, stopped = {}, []
        try:
            records = self.measure(phase, cases, failures, stopped)
        except UserError as exc:
            # measure_cases raises a case's UserError (an implementation that refuses this
            # configuration) for the whole call: time each implementation alone, so it fails alone.
            self.log(f"  {cases[0].config}: {exc}; timing each implementation on its own")
            records = []
            for impl in dict.fromkeys(c.implementation for c in cases):
                try:
                    records += self.measure(phase, [c for c in cases if c.implementation == impl], failures, stopped)
                except UserError as why:
                    failures.update({c: f"UserError: {why}" for c in cases if c.implementation == impl})
        for case, why in failures.items():
            self.emit("timing_error", "b", unit=uid, phase=phase.key, size=phase.size, config=case.config,
                      depth=case.depth, implementation=case.implementation, error=why.splitlines()[0],
                      detail=why[-3000:])
            self.log(f"  timing {case.config} L={case.depth} {case.implementation} failed (alone): "
                     f"{why.splitlines()[0]}")
        for rec in records:
            self.st.add_fingerprint(phase.size, rec)
        for rec in records:
            rec = self.emit("timing", "b", **self.judge(phase, rec, uid))
            self.cost.learn(rec, phase.size)
        if records:
            self.log("  " + ", ".join(f"L={r['depth']} {r['implementation']} {r['ms_per_step']:.3f}" for r in records))
        if stopped:
            return f"stopped after {stopped[0]} of {phase.repeats} rounds (budget)"
        return None

    def judge(self, phase: Phase, rec: dict, uid: str) -> dict:
        """The record with its validity: a passed correctness check of its configuration on the
        device, and a fingerprint that agrees with the reference implementation's at this size."""
        cfg = self.cfg
        verdict, reason = self.st.correctness(rec["implementation"], rec["config"])
        agrees = self.agreement(phase.size, rec)
        reasons = [reason] if reason else []
        bad = {k: v for k, v in agrees.items() if v is None or v > cfg.fingerprint_tolerance}
        if bad:
            reasons.append("loss/gradient fingerprint at the timed size disagrees with "
                           + ", ".join(f"{k} ({_num(v, '.2g')})" for k, v in bad.items()))
        return {**rec, "unit": uid, "phase": phase.key, "size": phase.size,
                "family": "slstm" if rec["config"] == "slstm" else "tlstm", "correctness": verdict,
                "valid": verdict in ("passed", "oracle") and not bad, "invalid_reason": "; ".join(reasons) or None,
                "agrees_with": agrees}

    def agreement(self, size: str, rec: dict) -> dict:
        """Relative differences of this record's fingerprint from the references' at the same size."""
        refs = ("fused", "wavefront") if rec["config"] == "slstm" else ("eager", "fast")
        known = self.st.fingerprints.get((size, rec["config"], rec["depth"]), {})
        out = {}
        for ref in refs:
            if ref == rec["implementation"] or ref not in known:
                continue
            if ref != "eager" and self.st.status(ref) != "passed":
                continue
            fingerprint = rec.get("fingerprint")
            if fingerprint is None:
                out[ref] = None
                continue
            a, b = fingerprint, known[ref]
            out[ref] = max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-12) for k in ("loss", "grad_norm"))
            break  # the first available reference decides
        return out

    def regress_estimate(self) -> float:
        return regress_estimate(self.cost, self.cfg.regress_settings)

    def unit_regress(self) -> str:
        info = write_regress_baseline(self.out, str(self.dev), self.cfg.regress_settings)
        self.emit("baseline", "d", **info)
        self.log(f"  regress baseline written: {info['file']} ({', '.join(info['modes'])}); "
                 f"commit it as {info['install_as']}")
        return info["file"]

    def time_check_cases(self) -> list[dict]:
        """Up to three of b1's records (the first, middle and last depth of TIME_CHECK's row)."""
        rows = sorted((r for r in self.st.timings if r["size"] == TIME_CHECK["size"] and r["config"] ==
                       TIME_CHECK["config"] and r["implementation"] == TIME_CHECK["implementation"]),
                      key=lambda r: r["depth"])
        if not rows:
            return []
        picks = {0, len(rows) // 2, len(rows) - 1}
        return [rows[i] for i in sorted(picks)]

    def time_check_estimate(self) -> float:
        rows = self.time_check_cases()
        runs = sum(r["ms_per_step"] * r["seq_len"] / 1000.0 for r in rows) or 0.1
        phase = next(p for p in self.cfg.phases if p.key == "b1")
        start = 12.0 if self.dev.type == "cuda" else 6.0  # python, torch, the CLI, a CUDA context
        return start + runs * (2 * phase.warmup + phase.repeats + 1)

    def unit_time_check(self) -> str:
        """Re-time b1's cases through ``tlstm-bench time`` (a subprocess, its own process as a
        user's would be) and record script / time per case: the two must agree (issue 23)."""
        rows = self.time_check_cases()
        if not rows:
            return "not run: b1 timed no case of the row to compare"
        phase = next(p for p in self.cfg.phases if p.key == "b1")
        cmd = time_command(rows, str(self.dev), phase.warmup, phase.repeats, self.cfg.vocab)
        left = max(10.0, self.budget.left())
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=left, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            got = {r["depth"]: r for r in json.loads(proc.stdout)}
        except ValueError:
            got = {}
        pairs = compare_with_time(rows, got, TIME_CHECK["agree_within"])
        self.emit("time_check", "e", command="python " + " ".join(cmd[1:]), returncode=proc.returncode,
                  stderr=proc.stderr[-2000:], rows=pairs, agree_within=TIME_CHECK["agree_within"],
                  agree=bool(pairs) and all(p["agrees"] for p in pairs))
        for p in pairs:
            self.log(f"  {p['config']} L={p['depth']} {p['implementation']}: script {_fmt_ms(p['script_ms'])} ms, "
                     f"time {_fmt_ms(p['time_ms'])} ms, ratio script/time {_num(p['ratio'], '.3f')}")
        return None


def inspect_run(run, rec: dict) -> dict:
    """measure_cases' ``inspect``, in the process that holds the run, after its rounds: one more
    step under the torch profiler (CUDA kernels executed, or CPU aten ops, per timestep) and a
    fingerprint of that step (loss, gradient norm). Never raises: a failure here would fail
    the whole group's records, and the time stands without the count."""
    import torch

    dev, seq_len = run.x.device, rec["seq_len"]
    extra = {"launches_per_step": None, "launch_unit": None, "kernels_per_step": None, "cpu_ops_per_step": None,
             "host_launches_per_step": None, "profile_error": None, "fingerprint": None}
    try:
        _, counts = profile_launches(torch, dev, run)
        extra.update(counts)
        per = {k: (v / seq_len if v is not None else None) for k, v in counts.items() if k.endswith("_total")}
        if dev.type == "cuda":
            extra.update(kernels_per_step=per["kernels_total"], launches_per_step=per["kernels_total"],
                         host_launches_per_step=per["host_kernel_launches_total"],
                         launch_unit="CUDA kernels executed per timestep (torch profiler, device activity)")
        else:
            extra.update(cpu_ops_per_step=per["cpu_ops_total"], launches_per_step=per["cpu_ops_total"],
                         launch_unit="CPU aten ops per timestep, nested ones included (no GPU: "
                                     "CPU operators counted instead of kernels)")
    except Exception as exc:  # noqa: BLE001 - the count is context; the time stands without it
        extra["profile_error"] = f"{type(exc).__name__}: {exc}"
    try:
        grads = [g for g in run.gradients().values() if g is not None]
        extra["fingerprint"] = {"loss": float(step_loss(run)),
                                "grad_norm": math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))}
    except Exception as exc:  # noqa: BLE001 - no fingerprint: the agreement check says so
        extra["profile_error"] = f"fingerprint: {type(exc).__name__}: {exc}"
    return extra

def profile_launches(torch, dev, fn, with_cpu: bool = False):
    """Run ``fn`` once under the torch profiler; count device kernels (CUDA) or aten ops (CPU)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = dev.type == "cuda"
    # On the GPU only device activity (kernels, and the runtime's launch calls): recording
    # every CPU operator too would multiply the events, and the time, several-fold.
    activities = ([ProfilerActivity.CPU] if with_cpu or not cuda else []) + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize(dev)
    with profile(activities=activities) as prof:
        result = fn()
        if cuda:
            torch.cuda.synchronize(dev)
    rows = _profiler_rows(prof)
    if not cuda:
        ops = sum(1 for name, device, _ in rows if device == "cpu" and name.startswith("aten::"))
        return result, {"cpu_ops_total": ops}
    if not with_cpu and not any(device == "cuda" for _, device, _ in rows):
        return profile_launches(torch, dev, fn, with_cpu=True)  # a torch that needs CPU activity to see kernels
    return result, {**count_device_events(rows), "profiled_activities": "cpu+cuda" if with_cpu else "cuda"}

def count_device_events(rows) -> dict:
    """Kernels, memory copies/sets, host launch calls and graph launches among profiler events
    ``(name, "cuda" | "cpu", activity type or None)``."""
    kernels = memops = host = graphs = runtime = 0
    for name, device, activity in rows:
        if device == "cuda":
            if (activity or "").startswith("gpu_mem") or name.startswith(("Memcpy", "Memset")):
                memops += 1
            else:
                kernels += 1
        elif name.startswith(("cuda", "cu")):
            runtime += 1  # a CUDA runtime or driver call
            host += "LaunchKernel" in name
            graphs += "GraphLaunch" in name
    if not runtime:  # this profiler did not record the API calls: say unknown, not zero
        host = graphs = None
    return {"kernels_total": kernels, "memops_total": memops, "host_kernel_launches_total": host,
            "graph_launches": graphs}

def _profiler_rows(prof) -> list[tuple[str, str, str | None]]:
    """(name, "cuda" | "cpu", activity type or None) per event."""
    return [row[:3] for row in profiler_events(prof)]


def profiler_events(prof) -> list[tuple[str, str, str | None, float]]:
    """(name, "cuda" | "cpu", activity type or None, microseconds) per event of a finished torch
    profile; the raw kineto list when this torch has it (fast), else the parsed events."""
    try:
        rows = []
        for e in prof.profiler.kineto_results.events():
            dev = "cuda" if str(e.device_type()).upper().endswith("CUDA") else "cpu"
            activity = e.activity_type() if hasattr(e, "activity_type") else None
            rows.append((e.name(), dev, activity, e.duration_ns() / 1000.0))
        return rows
    except Exception:  # noqa: BLE001 - another torch: fall back to the public, slower list
        return [(e.name, "cuda" if str(e.device_type).upper().endswith("CUDA") else "cpu", None,
                 float(e.time_range.elapsed_us())) for e in prof.events()]

def time_command(rows: list[dict], device: str, warmup: int, repeats: int, vocab: int) -> list[str]:
    """`python -m tlstm_bench time` for these records' cases, with the script's settings."""
    first = rows[0]
    cmd = [sys.executable, "-m", "tlstm_bench", "time", first["config"],
           "--depths", ",".join(str(r["depth"]) for r in rows), "--channels", str(first["channels"]),
           "--seq-len", str(first["seq_len"]), "--implementation", first["implementation"], "--device", device,
           "--repeats", str(repeats), "--warmup", str(warmup), "--vocab", str(vocab), "--dtype", first["dtype"],
           "--json", "--no-store"]
    return cmd + (["--threads", "1"] if device == "cpu" else [])

def compare_with_time(rows: list[dict], got: dict, within: float) -> list[dict]:
    """One row per script record: its ms, time's ms for the same case, the ratio, and whether
    they agree within ``within`` (relative)."""
    out = []
    for r in rows:
        other = got.get(r["depth"])
        ratio = r["ms_per_step"] / other["ms_per_step"] if other else None
        out.append({"config": r["config"], "implementation": r["implementation"], "depth": r["depth"],
                    "script_ms": r["ms_per_step"], "time_ms": other["ms_per_step"] if other else None,
                    "ratio": ratio, "agrees": ratio is not None and abs(ratio - 1.0) <= within})
    return out

def write_regress_baseline(out_dir: Path, device: str, settings: dict | None) -> dict:
    """The one call into the regress gate's public API (timing.regress.regress with update=True).

    Writes ``baseline-<device kind>.json`` into ``out_dir`` with the quick and the full mode;
    copied to ``tlstm_bench/timing/baselines/<device kind>.json`` (package data) it is what
    ``tlstm-bench regress --device cuda`` compares against.
    """
    from tlstm_bench.timing.regress import device_kind, regress

    kind = device_kind(device)
    path = Path(out_dir) / f"baseline-{kind}.json"
    modes = {}
    for quick in (True, False):
        result = regress(quick=quick, update=True, baseline=path, device=device, settings=settings)
        modes[result.mode] = {"timing": {row.quantity: row.measured for row in result.timing},
                              "counters": {row.quantity: row.measured for row in result.counters}}
    return {"file": path.name, "device_kind": kind, "modes": modes,
            "install_as": f"tlstm_bench/timing/baselines/{kind}.json"}
