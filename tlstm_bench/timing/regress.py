"""The CI gate on runtime vs depth: ``tlstm-bench regress``.

It times a small fixed set of configurations at a few depths on this machine, all in
one run with the repeats interleaved, and compares dimensionless quantities with a
baseline shipped with the package (``tlstm_bench/timing/baselines/<device kind>.json``,
read with importlib.resources):

* ``CONFIG t(L)/t(1)``: each curve's runtime at depth L over its runtime at L=1 (the
  shape of the runtime-vs-depth curve, which is what the paper claims about);
* ``CONFIG/slstm @L``: each tLSTM's runtime over the fused sLSTM's at the same L.

Absolute milliseconds are never compared: they move with the machine's load by far
more than any regression we want to catch. Ratios measured in the same interleaved
rounds largely cancel that load.

Threshold. A quantity regresses when it is more than ``THRESHOLD`` (2x) its baseline
value, in the first measurement AND in a confirming re-measurement (the smaller of the
two is compared). Why 2x, measured on this 2-core machine shared with other jobs (load
average 5-7 while this was written): (1) five back-to-back quick runs under the same
load spread the ratios by up to 1.37x (max/min; most by 1.1x); (2) the load itself
shifts them systematically: the fused sLSTM's t(10)/t(1) was 5.4 on the idle machine
and 7.4 under that load, 1.37x. A CI run may meet either regime, so 1.37 x 1.37 = 1.9
is the worst honest drift; 2x is just above it, and the confirming run keeps one load
spike from failing CI. What 2x still catches: a tLSTM path falling back to ``eager``
(about 3x on ``2d/slstm``), per-step overhead that grows with depth (a flat curve's
t(4)/t(1) of 1.3 turning into ~3), a curve losing its flatness. Speed-ups are reported,
never failed; rewrite the baseline with ``--update`` after a deliberate change.
Settings: M=64, T=100, one thread, and every sample the mean of enough back-to-back
runs to last 50 ms (short runs are hit by scheduling differently from long ones).

Exit status (the CLI): 0 no regression, 1 regression (which quantity, by how much),
2 could not measure (no or unreadable baseline, a measurement error).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from ..errors import UserError
from .protocol import Case, measure_cases
from ..atomic import atomic_write

THRESHOLD = 2.0
DELAY_ENV = "TLSTM_BENCH_REGRESS_DELAY"  # test-only: "CONFIG@L=SECONDS[,...]" slows that case

# Fixed sets: what is measured must not change between the baseline and the check.
MODES = {
    # At M=32, T=50 a run of the L=1 sLSTM lasts about 1 ms and its ratios jumped 3x
    # between identical runs here; M=64, T=100 and 50 ms samples keep them within ~1.4x.
    "quick": {"configs": ["slstm", "2d", "3d-cn"], "depths": [1, 4], "channels": 64, "seq_len": 100,
              "repeats": 11, "warmup": 2, "threads": 1, "min_sample_s": 0.05},
    "full": {"configs": ["slstm", "2d", "2d-m", "2d-f", "3d", "3d-cn"], "depths": [1, 4, 7, 10],
             "channels": 64, "seq_len": 100, "repeats": 7, "warmup": 2, "threads": 1, "min_sample_s": 0.05},
}


@dataclass
class Row:
    quantity: str
    baseline: float | None
    measured: float
    change: float | None  # measured / baseline
    verdict: str  # ok | regression | faster | new


@dataclass
class RegressResult:
    status: int  # 0 ok, 1 regression (2 is raised as UserError)
    mode: str
    baseline_path: str
    rows: list[Row] = field(default_factory=list)
    updated: bool = False
    records: list[dict] = field(default_factory=list)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == "regression"]


def device_kind(device: str = "cpu") -> str:
    """``cpu``, or ``cuda-<gpu name>`` (one baseline per kind of GPU)."""
    if device.startswith("cuda"):
        import torch

        name = torch.cuda.get_device_name(torch.device(device)) if torch.cuda.is_available() else "unknown"
        return "cuda-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return "cpu"


def default_baseline(device: str = "cpu") -> Path:
    """The shipped baseline for this kind of device (package data)."""
    return Path(str(resources.files("tlstm_bench.timing").joinpath("baselines", f"{device_kind(device)}.json")))


def update_target(device: str = "cpu") -> Path:
    """Where ``--update`` writes without ``--baseline``: the workspace, never the installed package.

    To ship it, copy it to ``tlstm_bench/timing/baselines/`` in a checkout (or pass that path
    as ``--baseline``).
    """
    from ..results.store import workspace

    return workspace().baselines / f"{device_kind(device)}.json"


def quantities(records: list[dict]) -> dict[str, float]:
    """The dimensionless quantities of one interleaved run."""
    ms = {(r["config"], r["depth"]): r["ms_per_step"] for r in records}
    configs = list(dict.fromkeys(c for c, _ in ms))
    depths = sorted({d for _, d in ms})
    out = {}
    for c in configs:
        for d in depths:
            if d != depths[0]:
                out[f"{c} t({d})/t({depths[0]})"] = ms[c, d] / ms[c, depths[0]]
    for c in configs:
        if c == "slstm":
            continue
        for d in depths:
            out[f"{c}/slstm @L={d}"] = ms[c, d] / ms["slstm", d]
    return out


def parse_delay(text: str | None) -> Callable[[Case], float] | None:
    """The test-only slowdown hook from ``$TLSTM_BENCH_REGRESS_DELAY`` ("2d@4=0.05")."""
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
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("modes", {}), dict):
            raise ValueError("not a baseline object")
        return data
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the baseline {path}: {exc}; fix it or rewrite it with --update") from None


def _measure(settings: dict, device: str, delay) -> tuple[list[dict], dict[str, float]]:
    cases = [Case(c, d) for c in settings["configs"] for d in settings["depths"]]
    records = measure_cases(cases, channels=settings["channels"], seq_len=settings["seq_len"], device=device,
                            repeats=settings["repeats"], warmup=settings["warmup"],
                            threads=settings["threads"], delay=delay, min_sample_s=settings["min_sample_s"])
    return records, quantities(records)


def regress(*, quick: bool = False, update: bool = False, baseline: "str | Path | None" = None,
            device: str = "cpu", delay: Callable[[Case], float] | None = None,
            settings: dict | None = None, threshold: float = THRESHOLD) -> RegressResult:
    """Measure the fixed curves and compare them with (or, with ``update``, write) the baseline.

    ``settings`` overrides the mode's fixed set (tests only); ``delay`` is the test-only
    slowdown hook of :func:`~tlstm_bench.timing.protocol.measure_cases`.
    """
    mode = "quick" if quick else "full"
    settings = {**MODES[mode], **(settings or {})}
    if baseline is not None:
        path = Path(baseline)
    else:
        path = update_target(device) if update else default_baseline(device)
    data = read_baseline(path)
    if not update:
        if not data:
            raise UserError(f"no baseline at {path}; measure one with `tlstm-bench regress --update`"
                            + (" --quick" if quick else ""))
        if mode not in data.get("modes", {}):
            raise UserError(f"the baseline {path} has no {mode!r} entry; add it with `tlstm-bench regress "
                            f"--update{' --quick' if quick else ''}`")
        entry = data["modes"][mode]
        if entry.get("settings") != settings:
            raise UserError(f"the baseline {path} was measured with other settings ({entry.get('settings')}); "
                            "rewrite it with --update")
    records, measured = _measure(settings, device, delay)
    if update:
        first = records[0]
        data = {"version": 1, "device_kind": device_kind(device), "modes": {}, **data}
        data["modes"][mode] = {
            "settings": settings, "threshold": threshold, "quantities": measured,
            "device_name": first["device_name"], "torch_version": first["torch_version"],
            "git_commit": first["git_commit"], "date": first["date"],
            "ms_per_step": {f"{r['config']} L={r['depth']}": r["ms_per_step"] for r in records},
        }
        atomic_write(path, lambda fh: fh.write(json.dumps(data, indent=1, sort_keys=True) + "\n"))
        rows = [Row(q, None, v, None, "new") for q, v in measured.items()]
        return RegressResult(0, mode, str(path), rows, updated=True, records=records)
    expected = data["modes"][mode]["quantities"]
    rows = _compare(expected, measured, threshold)
    if any(r.verdict == "regression" for r in rows):
        # Confirm: measure again; a quantity fails only if both runs exceed the threshold.
        _, again = _measure(settings, device, delay)
        rows = _compare(expected, {q: min(v, again.get(q, v)) for q, v in measured.items()}, threshold)
    status = 1 if any(r.verdict == "regression" for r in rows) else 0
    return RegressResult(status, mode, str(path), rows, records=records)


def _compare(expected: dict[str, float], measured: dict[str, float], threshold: float) -> list[Row]:
    rows = []
    for q, value in measured.items():
        base = expected.get(q)
        if base is None or base <= 0:
            rows.append(Row(q, None, value, None, "new"))
            continue
        change = value / base
        verdict = "regression" if change > threshold else ("faster" if change < 1 / threshold else "ok")
        rows.append(Row(q, base, value, change, verdict))
    return rows
