"""summary.md from the records (no torch: the supervisor writes it whatever the worker did)."""

from __future__ import annotations

import math

from .common import PAPER_SAMPLES, PRIORITY_CONFIGS, TARGET_FACTOR, _fmt_ms, _latest, _num


def final_invalidations(timings: list[dict], tolerance: float) -> dict:
    """(size, config, depth, impl) -> reason, for cases whose fingerprint disagrees with the oracle's
    measured later in the run (eager is timed after the fast paths)."""
    out = {}
    oracle = {(r["size"], r["config"], r["depth"]): r["fingerprint"] for r in timings
              if r["implementation"] == "eager" and r.get("fingerprint")}
    for r in timings:
        ref = oracle.get((r["size"], r["config"], r["depth"]))
        fp = r.get("fingerprint")
        if ref is None or fp is None or r["implementation"] == "eager" or not r.get("valid"):
            continue  # already invalid when written: nothing new to say
        diff = max(abs(fp[k] - ref[k]) / max(abs(ref[k]), 1e-12) for k in ("loss", "grad_norm"))
        if diff > tolerance:
            out[(r["size"], r["config"], r["depth"], r["implementation"])] = \
                f"fingerprint differs from eager's by {diff:.2g} (checked at the end of the run)"
    return out

def timing_table(timings: list[dict], size: str, invalid: dict) -> tuple[list[str], dict]:
    rows = [r for r in timings if r["size"] == size]
    if not rows:
        return [], {}
    depths = sorted({r["depth"] for r in rows})
    cells: dict = {}
    for r in rows:
        key = (r["config"], r["implementation"])
        ok = r.get("valid") and (size, r["config"], r["depth"], r["implementation"]) not in invalid
        cells.setdefault(key, {})[r["depth"]] = (r, ok)
    channels = {}
    for r in rows:
        channels.setdefault(r["config"], set()).add(r["channels"])
    lines = ["| config | implementation | M | " + " | ".join(f"L={d}" for d in depths) + " | t(max L)/t(1) |",
             "|---|---|---|" + "---|" * (len(depths) + 1)]
    order = {c: i for i, c in enumerate(PRIORITY_CONFIGS)}
    for (config, impl), by_depth in sorted(cells.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        parts = []
        for d in depths:
            if d not in by_depth:
                parts.append("-")
                continue
            r, ok = by_depth[d]
            k = r.get("launches_per_step")
            parts.append(f"{_fmt_ms(r['ms_per_step'])}" + (f" ({k:.0f})" if k is not None else "")
                         + ("" if ok else " INVALID"))
        lo, hi = by_depth.get(depths[0]), by_depth.get(depths[-1])
        growth = f"{hi[0]['ms_per_step'] / lo[0]['ms_per_step']:.2f}" if lo and hi else "-"
        ms = "/".join(str(m) for m in sorted(channels[config]))
        lines.append(f"| `{config}` | {impl} | {ms} | " + " | ".join(parts) + f" | {growth} |")
    return lines, cells

STATUS = {"complete": "complete: every unit ran",
          "budget": "STOPPED BY THE TIME BUDGET: the units listed under 'Not run' were cut",
          "interrupted": "INTERRUPTED (signal): partial results",
          "crashed": "a worker CRASHED and could not be restarted: partial results",
          "error": "ERROR before any measurement (see log.txt)"}


def summary_markdown(records: list[dict], status: str) -> str:
    header = next((r for r in records if r["kind"] == "header"), None)
    tol = (header["settings"] if header else {}).get("fingerprint_tolerance", 5e-3)
    timings = _latest(records, "timing")
    invalid = final_invalidations(timings, tol)
    out = header_section(records, header, status) + correctness_section(records)
    out += runtime_sections(timings, invalid) + targets_section(timings, invalid, records)
    out += training_section(records) + baseline_section(records) + time_check_section(records)
    out += failures_section(records, invalid)
    return "\n".join(out)


def header_section(records: list[dict], header: dict | None, status: str) -> list[str]:
    prov = header["provenance"] if header else (records[-1]["provenance"] if records else {})
    end = next((r for r in reversed(records) if r["kind"] == "end"), {})
    return ["# GPU evidence run" + (" (CPU dry run)" if header and header.get("tiny") else ""), "",
            f"- status: **{STATUS.get(status, status)}**; {end.get('elapsed_s', '?')} s of a "
            f"{end.get('budget_s', '?')} s budget",
            f"- device: {prov.get('gpu_name') or prov.get('device_name')} ({prov.get('device')}), driver "
            f"{prov.get('driver_version')}, capability {prov.get('gpu_capability')}",
            f"- torch {prov.get('torch_version')}, CUDA {prov.get('cuda_version')}, cuDNN {prov.get('cudnn_version')}, "
            f"triton {prov.get('triton_version')}, TF32 matmul/cuDNN {prov.get('allow_tf32_matmul')}/"
            f"{prov.get('allow_tf32_cudnn')}",
            f"- commit {prov.get('git_commit')} ({prov.get('commit_source')}; dirty {prov.get('git_dirty')}), "
            f"code hash {prov.get('code_hash')}",
            f"- arguments: `{' '.join(prov.get('argv', []))}`", ""]


def correctness_section(records: list[dict]) -> list[str]:
    out = ["## a. Correctness on the device", ""]
    for r in _latest(records, "implementation"):
        state = {True: "available", False: "not available", "broken": "BROKEN"}.get(r["available"], r["available"])
        out.append(f"- `{r['impl']}` ({r['family']}{', a whole graphed step' if r.get('graphed') else ''}): {state}"
                   + (f" ({r['reason']})" if r.get("reason") else ""))
    checks = _latest(records, "check")
    if checks:
        out += [""] + checks_table(checks) + failed_checks(checks)
    audits = _latest(records, "audit")
    if audits:
        out += ["", "Separability audit on the device: " + "; ".join(
            f"{a['config']} L={a['depth']} {a['implementation']}: {a['verdict']}" for a in audits)]
    return out + [""]


def checks_table(checks: list[dict]) -> list[str]:
    """Per implementation, check and dtype: passed / run and the worst relative error."""
    out = ["| implementation | check | dtype | passed / run | worst relative error | tolerance |",
           "|---|---|---|---|---|---|"]
    groups: dict = {}
    for c in checks:
        groups.setdefault((c["impl"], c["check"] + (" (step)" if c.get("how") else ""), c["dtype"]), []).append(c)
    for (impl, check, dtype), cs in groups.items():
        ran = [c for c in cs if c["passed"] is not None]
        if not ran:
            out.append(f"| `{impl}` | {check} | {dtype} | unsupported | - | - |")
            continue
        worst = max(ran, key=lambda c: c["max_rel_error"] if c["max_rel_error"] is not None else math.inf)
        out.append(f"| `{impl}` | {check} | {dtype} | {sum(c['passed'] is True for c in ran)} / {len(ran)} | "
                   f"{_num(worst['max_rel_error'], '.2e', 'inf/NaN')} ({worst['config']} L={worst['depth']}: "
                   f"{worst['worst']}) | {worst['tolerance']:.0e} |")
    return out


def failed_checks(checks: list[dict]) -> list[str]:
    out = []
    failed = [c for c in checks if c["passed"] is False]
    for c in failed[:12]:
        error = c.get("error") or ""
        what = ((error.strip().splitlines() or [""])[0]
                or f"{c['worst']} off by {_num(c['max_rel_error'], '.3g', 'inf/NaN')}")
        out.append(f"- FAILED: `{c['impl']}` {c['check']} {c['config']} L={c['depth']} {c['dtype']}: {what}"
                   + ("" if c.get("affects_timing") else " (does not affect the timings)"))
    if len(failed) > 12:
        out.append(f"- ... and {len(failed) - 12} more failed checks (records.jsonl, kind 'check')")
    for c in [c for c in checks if c["passed"] is None]:
        out.append(f"- unsupported: `{c['impl']}` {c['config']} L={c['depth']} {c['dtype']}: {c.get('unsupported')}")
    return out


def runtime_sections(timings: list[dict], invalid: dict) -> list[str]:
    out = []
    for size, title in (("m100", "M = 100"), ("wiki", "the Wikipedia size (10M parameters, 205 symbols)")):
        lines, _ = timing_table(timings, size, invalid)
        if not lines:
            continue
        first = next(r for r in timings if r["size"] == size)
        out += [f"## b. Runtime at {title}", "",
                f"ms per timestep, forward + loss + backward, batch 1, T = {first['seq_len']}, {first['dtype']}, "
                f"median of interleaved repeats ({first['clock']}; through measure_cases, each implementation in "
                f"a process of its own); in brackets: {first.get('launch_unit') or 'launches per timestep'}. "
                "INVALID: the implementation failed a check (see part a and the records' invalid_reason).",
                ""] + lines + [""]
    return out


def training_section(records: list[dict]) -> list[str]:
    trains = [r for r in records if r["kind"] == "training"]
    if not trains:
        return []
    out = ["## c. Training", "", "| run | config | L | M | implementation | solved | samples to solve | paper | "
           "samples seen | test accuracy | samples/s | wall s | stop |", "|" + "---|" * 13]
    for r in trains:
        paper = f"{r['paper_samples']:,}" if r.get("paper_samples") else "-"
        solve = f"{r['samples_to_solve']:,}" if r.get("samples_to_solve") else "-"
        out.append(f"| {r['key']} | `{r['config']}` | {r['depth']} | {r['channels']} | {r['implementation']} | "
                   f"{'yes' if r.get('solved') else 'no'} | {solve} | {paper} | {r.get('samples_seen') or 0:,} | "
                   f"{_num(r.get('test_metric'), '.3f')} | {_num(r.get('samples_per_s'), '.0f')} | "
                   f"{_num(r.get('wall_time_s'), '.0f')} | {r.get('stop')} |")
    return out + [""]


def baseline_section(records: list[dict]) -> list[str]:
    out = []
    for b in _latest(records, "baseline"):
        out += ["## d. Regress baseline", "",
                f"`{b['file']}` ({b['device_kind']}; modes {', '.join(b['modes'])}): commit it as "
                f"`{b['install_as']}` to gate `tlstm-bench regress --device "
                f"{'cpu' if b['device_kind'] == 'cpu' else 'cuda'}` on this kind of device.", ""]
    return out


def failures_section(records: list[dict], invalid: dict) -> list[str]:
    """Timing failures, late invalidations, units not run or cut short."""
    out = []
    failed = _latest(records, "timing_error")
    if failed:
        out += ["## Timing failures (each contained to its implementation)", ""] + [
            f"- {r['size']} `{r['config']}` L={r['depth']} {r['implementation']}: {r['error']}" for r in failed[:20]]
        out += ([f"- ... and {len(failed) - 20} more (records.jsonl, kind 'timing_error')"] if len(failed) > 20
                else []) + [""]
    if invalid:
        out += ["## Invalidated at the end of the run", ""] + [
            f"- {k[0]} `{k[1]}` L={k[2]} {k[3]}: {v}" for k, v in invalid.items()] + [""]
    units = _latest(records, "unit")
    cut = [u for u in units if u["status"] != "done"]
    if cut:
        out += ["## Not run, cut short, or failed", ""] + [
            f"- {u['unit']}: {u['status']}" + (f" ({u.get('note') or u.get('error')})"
                                                if (u.get('note') or u.get('error')) else "") for u in cut] + [""]
    partial = [u for u in units if u["status"] == "done" and u.get("note") and "budget" in str(u["note"])]
    if partial:
        out += ["Units cut short by the budget: " + "; ".join(f"{u['unit']} ({u['note']})" for u in partial), ""]
    return out


def time_check_section(records: list[dict]) -> list[str]:
    """Part e: the script's times against `tlstm-bench time`'s for the same cases (issue 23: 10%)."""
    checks = _latest(records, "time_check")
    if not checks:
        return []
    c = checks[-1]
    within = c["agree_within"]
    out = ["## e. The script against `tlstm-bench time`", "",
           f"`{c['command']}` (exit status {c['returncode']}), run after the rest on the same machine. "
           f"Agreement within {within:.0%}: **{'yes' if c['agree'] else 'NO'}**.", "",
           "| config | implementation | L | script ms | time ms | script / time |", "|---|---|---|---|---|---|"]
    for r in c["rows"]:
        out.append(f"| `{r['config']}` | {r['implementation']} | {r['depth']} | {_fmt_ms(r['script_ms'])} | "
                   f"{_fmt_ms(r['time_ms'])} | {_num(r['ratio'], '.3f')} |")
    if not c["rows"] or any(r["time_ms"] is None for r in c["rows"]):
        out.append(f"\n`time` gave no record for some case; its stderr ends: `{c['stderr'][-300:]}`")
    return out + [""]

def targets_section(timings: list[dict], invalid: dict, records: list[dict]) -> list[str]:
    """Issues 8's and 19's targets, each met / NOT met / not measured, with the numbers behind it."""
    def ok(r):
        return r.get("valid") and (r["size"], r["config"], r["depth"], r["implementation"]) not in invalid

    good = [r for r in timings if ok(r)]
    m100 = [r for r in good if r["size"] == "m100"]
    out = ["## Targets (issues 8 and 19)", ""] + graph_target(records)
    depths = sorted({r["depth"] for r in m100})
    if len(depths) >= 2:
        out += depth_targets(m100, depths[0], depths[-1])
    out += slstm_targets(good) + kernel_note(timings) + training_targets(records)
    return out + [""]


def graph_target(records: list[dict]) -> list[str]:
    """Each graphed step against ``eager`` (float64, as a whole step, on replay): ``cuda-graph``'s
    always (issue 18's target), another's (``triton-graph``) where it was checked."""
    from tlstm_bench.vocab import GRAPHED_IMPLEMENTATIONS  # no torch

    out = []
    for name in GRAPHED_IMPLEMENTATIONS:
        checks = [c for c in records if c["kind"] == "check" and c["impl"] == name and c["dtype"] == "float64"
                  and c["check"] == "equivalence"]
        if not checks:
            if name == "cuda-graph":
                out.append(f"- `{name}` agrees with `eager` (float64, as a whole step, on replay): not measured")
            continue
        configs = sorted({c["config"] for c in checks})
        worst = max((c["max_rel_error"] if c["max_rel_error"] is not None else math.inf) for c in checks)
        verdict = "met" if all(c["passed"] is True for c in checks) and len(configs) == 6 else "NOT met"
        out.append(f"- `{name}` agrees with `eager` on the device (float64, as a whole step, on replay), every "
                   f"tLSTM configuration: {verdict} ({len(configs)} configurations, {len(checks)} checks, worst "
                   f"relative error {worst:.1e})")
    return out


def depth_targets(m100: list[dict], lo: int, hi: int) -> list[str]:
    """t(L=hi)/t(L=lo) per configuration (issue 8: <= 1.25; issue 19: <= 1.1), the sLSTM's for
    contrast, and the 2D tLSTM's time per step at L=hi (issue 8: 50 us; issue 19: 15 us)."""
    out = []
    for config in (c for c in PRIORITY_CONFIGS if c != "slstm"):
        best = _best_curve(m100, config, lo, hi)
        if best is None:
            out.append(f"- `{config}` t(L={hi})/t(L={lo}) <= 1.25 / 1.1 with the best implementation: not measured")
            continue
        impl, r_lo, r_hi = best
        ratio = r_hi["ms_per_step"] / r_lo["ms_per_step"]
        out.append(f"- `{config}` t(L={hi})/t(L={lo}) ({impl}) = {ratio:.2f}: <= 1.25 {_met(ratio <= 1.25)}, "
                   f"<= 1.1 {_met(ratio <= 1.1)} ({_why(r_lo)} at L={lo}, {_why(r_hi)} at L={hi})")
    expect = {"fused": " (layer by layer: expected to grow about linearly in L)",
              "cudnn": " (one multi-layer cuDNN call)",
              "wavefront": " (T+L-1 sequential steps, each a batched cell call)"}
    for impl in sorted({r["implementation"] for r in m100 if r["config"] == "slstm"}):
        rs = {r["depth"]: r for r in m100 if r["config"] == "slstm" and r["implementation"] == impl}
        if lo in rs and hi in rs:
            growth = rs[hi]["ms_per_step"] / rs[lo]["ms_per_step"]
            out.append(f"- sLSTM `{impl}` t(L={hi})/t(L={lo}) = {growth:.2f}{expect.get(impl, '')}; "
                       f"{_why(rs[lo])} at L={lo}, {_why(rs[hi])} at L={hi}")
    two_d = [r for r in m100 if r["config"] == "2d" and r["depth"] == hi]
    if two_d:
        b = min(two_d, key=lambda r: r["ms_per_step"])
        us = 1000 * b["ms_per_step"]
        out.append(f"- 2D tLSTM at M={b['channels']}, L={hi}, {us:.1f} us per timestep ({b['implementation']}): "
                   f"<= 50 us {_met(us <= 50)}, <= 15 us {_met(us <= 15)} ({_why(b)})")
    return out


def slstm_targets(good: list[dict]) -> list[str]:
    """Issue 19 (the paper's claim): every tLSTM configuration at L >= 5 faster than the fastest
    sLSTM at the same depth and size."""
    out = []
    for size in ("m100", "wiki"):
        fastest: dict = {}  # (config, depth) -> the fastest valid implementation's ms
        for r in (r for r in good if r["size"] == size and r["depth"] >= 5):
            key = (r["config"], r["depth"])
            fastest[key] = min(fastest.get(key, r["ms_per_step"]), r["ms_per_step"])
        slstm = {d: ms for (c, d), ms in fastest.items() if c == "slstm"}
        slower = sorted(k for k, ms in fastest.items() if k[0] != "slstm" and k[1] in slstm and ms >= slstm[k[1]])
        if not slstm:
            out.append(f"- {size}: every tLSTM at L >= 5 faster than the fastest sLSTM: not measured")
            continue
        out.append(f"- {size}: every tLSTM at L >= 5 faster than the fastest sLSTM: {_met(not slower)}"
                   + (f" (not faster: {', '.join(f'{c} L={d}' for c, d in slower)})" if slower else ""))
    return out


def kernel_note(timings: list[dict]) -> list[str]:
    by = {(r["size"], r["config"], r["depth"], r["implementation"]): r for r in timings}
    hidden = [k for k, r in by.items() if k[3] == "cuda-graph" and r.get("kernels_per_step") is not None
              and (k[:3] + ("fast",)) in by and by[k[:3] + ("fast",)].get("kernels_per_step")
              and r["kernels_per_step"] < 0.5 * by[k[:3] + ("fast",)]["kernels_per_step"]]
    if not hidden:
        return []
    return [f"- note: for {len(hidden)} case(s) the profiler counted far fewer kernels for `cuda-graph` than "
            "for `fast` (the same kernels): it may not see kernels launched inside a CUDA graph, so "
            "cuda-graph's kernel counts are a lower bound"]


def training_targets(records: list[dict]) -> list[str]:
    out = []
    for key, paper in PAPER_SAMPLES.items():
        runs = [r for r in records if r["kind"] == "training" and r["key"] == f"{key}-3d-cn"]
        if not runs:
            out.append(f"- {key}: 3d-cn solved within {TARGET_FACTOR}x the paper's {paper:,} samples: not measured")
            continue
        r = runs[-1]
        if r.get("paper_samples") is None:
            out.append(f"- {key}: dry-run sizes, no paper comparison")
        elif r.get("solved"):
            s = r["samples_to_solve"]
            out.append(f"- {key}: 3d-cn solved after {s:,} samples vs the paper's {paper:,} ({s / paper:.2f}x): "
                       f"{_met(s <= TARGET_FACTOR * paper)}")
        else:
            out.append(f"- {key}: 3d-cn NOT solved within its cap ({r.get('samples_seen') or 0:,} samples, test "
                       f"accuracy {r.get('test_metric')}, stop: {r.get('stop')}); the paper needed {paper:,}")
    return out


def _met(yes: bool) -> str:
    return "met" if yes else "NOT met"


def _best_curve(rows, config, lo, hi):
    best = None
    for impl in sorted({r["implementation"] for r in rows if r["config"] == config}):
        rs = {r["depth"]: r for r in rows if r["config"] == config and r["implementation"] == impl}
        if lo in rs and hi in rs and (best is None or rs[hi]["ms_per_step"] < best[2]["ms_per_step"]):
            best = (impl, rs[lo], rs[hi])
    return best

def _why(r) -> str:
    """ms per step with the launches behind it: a flat curve is launch-bound when us/launch is small."""
    k = r.get("launches_per_step")
    if not k:
        return f"{r['ms_per_step']:.4f} ms"
    host = r.get("host_launches_per_step")
    unit = "kernels" if r.get("kernels_per_step") is not None else "CPU ops"
    return (f"{r['ms_per_step']:.4f} ms, {k:.0f} {unit}/step" + (f" ({host:.0f} launched by the host)"
                                                                  if host is not None else "")
            + f", {1000 * r['ms_per_step'] / k:.2f} us each")
