"""The plan and its budget: what each unit will cost, what is left, what earlier units found."""

from __future__ import annotations

import time

from .common import CORE_TLSTM, FAILING, INJECTED, ORACLE, ORACLE_CHAIN, PRIORITY_CONFIGS, RESERVED, SAFETY, _num
from .settings import make_settings


class Budget:
    """The run's deadline. ``tail`` is kept back for the supervisor's summary and figures."""

    def __init__(self, deadline: float, tail: float):
        self.deadline, self.tail = deadline, tail

    def left(self) -> float:
        return self.deadline - self.tail - time.time()

    def fits(self, estimate_s: float, reserve_s: float = 0.0, safety: float = SAFETY) -> bool:
        return estimate_s * safety + reserve_s <= self.left()

class Cost:
    """Seconds a run or a group will take: priors per implementation, corrected by what is measured.

    A run is sequential steps x (per-step overhead + FLOPs / rate). ``scale`` per
    (implementation, size) is the largest ratio measured / predicted seen so far.
    """

    STEP_S = {"cuda": {"eager": 1e-3, "fast": 3e-4, "cuda-graph": 1.5e-4, "fused": 4e-5, "cudnn": 4e-5,
                       "wavefront": 1e-3, "*": 3e-4},
              "cpu": {"eager": 1.5e-3, "fast": 2.5e-4, "fused": 5e-5, "wavefront": 8e-4, "*": 1e-3}}
    SETUP_S = {"cuda": {"cuda-graph": 0.6, "fast": 0.1, "eager": 0.05, "fused": 0.1, "cudnn": 0.1, "wavefront": 0.05,
                        "*": 3.0},
               "cpu": {"*": 0.1}}
    RATE = {"cuda": 1.5e13, "cpu": 1e10}
    PROFILE_S = {"cuda": 0.3, "cpu": 0.1}
    # A timing group's worker processes (one per implementation, started together): python,
    # torch and tlstm_bench imported, a CUDA context; measure_cases starts them per call.
    SPAWN_S = {"cuda": 8.0, "cpu": 4.0}

    def __init__(self, device: str):
        self.dev = device
        self.scale: dict = {}
        self.setup: dict = {}

    def _get(self, table: dict, impl: str) -> float:
        t = table[self.dev]
        return t.get(impl, t["*"])

    def step_flops(self, config: str, depth: int, channels: int) -> float:
        """Multiply-adds x 2 of one sequential step's recurrent products, forward + backward (x 3)."""
        from tlstm_bench.models import parse_config

        arch = parse_config(config)
        m = channels
        if arch.kind == "slstm":
            return 3 * 2 * 2 * m * 4 * m
        n = arch.tensor_size(depth) ** (arch.dims - 1)
        kd = arch.kernel_entries
        return 3 * 2 * n * kd * m * (4 * m + (kd if arch.memory_conv else 0))

    def steps(self, impl: str, config: str, depth: int, seq_len: int) -> int:
        return seq_len * depth if (config == "slstm" and impl in ("fused", "cudnn")) else seq_len + depth - 1

    def run_s(self, impl, size, config, depth, channels, seq_len, batch: int = 1, scaled: bool = True) -> float:
        base = self.steps(impl, config, depth, seq_len) * (
            self._get(self.STEP_S, impl) * (1.3 if config in ("3d-ln", "3d-cn") else 1.0)
            + batch * self.step_flops(config, depth, channels) / self.RATE[self.dev])
        if not scaled:
            return base
        scale = self.scale.get((impl, size)) or max([v for (i, _), v in self.scale.items() if i == impl],
                                                     default=1.0)
        return base * scale

    def setup_s(self, impl: str) -> float:
        return self.setup.get(impl, self._get(self.SETUP_S, impl))

    def learn(self, record: dict, size: str) -> None:
        impl = record["implementation"]
        measured = record["ms_per_step"] * record["seq_len"] / 1000.0
        predicted = self.run_s(impl, size, record["config"], record["depth"], record["channels"],
                               record["seq_len"], scaled=False)
        ratio = max(measured / max(predicted, 1e-9), 0.05)
        key = (impl, size)
        # the first measurement sets the scale; later ones may only raise it (a conservative estimate)
        self.scale[key] = ratio if key not in self.scale else max(self.scale[key], ratio)
        if record.get("setup_s") is not None:
            self.setup[impl] = max(self.setup.get(impl, 0.0), record["setup_s"])

    def group_s(self, cases, size, channels_of, seq_len, warmup, repeats) -> float:
        """A measure_cases call: its processes, then per case the build, a warm-up of up to twice
        ``warmup`` runs (it goes on until steady), the rounds, the profiled run and the fingerprint."""
        total = self.SPAWN_S[self.dev]
        for config, depth, impl in cases:
            run = self.run_s(impl, size, config, depth, channels_of(config, depth), seq_len)
            total += self.setup_s(impl) + run * (2 * warmup + repeats + 3) + self.PROFILE_S[self.dev]
        return total

class State:
    """What earlier units found, rebuilt from the records (so a restarted worker knows it)."""

    def __init__(self, records: list[dict]):
        self.header = next((r for r in records if r["kind"] == "header"), None)
        self.finished = {r["unit"] for r in records if r["kind"] == "unit"}
        self.unit_status = {r["unit"]: r["status"] for r in records if r["kind"] == "unit"}
        self.timing_errors = [r for r in records if r["kind"] == "timing_error"]
        self.training_starts = [r for r in records if r["kind"] == "training_progress"]
        self.impls = {r["impl"]: r for r in records if r["kind"] == "implementation"}
        self.checks = [r for r in records if r["kind"] == "check"]
        self.timings = [r for r in records if r["kind"] == "timing"]
        self.fingerprints: dict = {}
        for r in self.timings:
            if r.get("fingerprint"):
                self.fingerprints.setdefault((r["size"], r["config"], r["depth"]), {})[r["implementation"]] = \
                    r["fingerprint"]

    def add_fingerprint(self, size: str, rec: dict) -> None:
        if rec.get("fingerprint"):
            self.fingerprints.setdefault((size, rec["config"], rec["depth"]), {})[rec["implementation"]] = \
                rec["fingerprint"]

    def add(self, record: dict) -> None:
        kind = record["kind"]
        if kind == "unit":
            self.finished.add(record["unit"])
            self.unit_status[record["unit"]] = record["status"]
        elif kind == "timing_error":
            self.timing_errors.append(record)
        elif kind == "training_progress":
            self.training_starts.append(record)
        elif kind == "implementation":
            self.impls[record["impl"]] = record
        elif kind == "check":
            self.checks.append(record)
        elif kind == "timing":
            self.timings.append(record)
            if record.get("fingerprint"):
                self.fingerprints.setdefault((record["size"], record["config"], record["depth"]), {})[
                    record["implementation"]] = record["fingerprint"]

    def family_impls(self, family: str, usable_only: bool = True) -> list[str]:
        return [name for name, r in self.impls.items()
                if r["family"] == family and r.get("role") != "oracle" and (r["available"] is True or not usable_only)]

    def _broken(self, uid: str) -> bool:
        return self.unit_status.get(uid) in ("failed", "crashed")

    def excluded(self) -> set[str]:
        """Implementations not to time again: those whose timing failed (measure_cases reported
        it through on_failure: a failed capture, a dead process), and those a unit died in (a
        segfault of the worker itself); the one that raised if the records name it, else every
        one in the unit."""
        out = {r["implementation"] for r in self.timing_errors}
        for uid, status in self.unit_status.items():
            if status not in ("failed", "crashed"):
                continue
            if uid.startswith("b"):
                named = {r["implementation"] for r in self.timing_errors if r.get("unit") == uid}
                out |= named or set(uid.split(":")[-1].split("+"))
            elif uid.startswith("c:"):  # a training run that died: the implementation it used
                out |= {r["implementation"] for r in self.training_starts if r["key"] == uid[2:]}
        return out - set(ORACLE.values())

    def correctness(self, impl: str, config: str) -> tuple[str, str | None]:
        """("passed" | "failed" | "unchecked" | "oracle", reason) for timing ``impl`` on ``config``."""
        if impl in ORACLE.values():
            return "oracle", None
        if self._broken(f"a:check:{impl}"):
            return "failed", f"its correctness checks on the device {self.unit_status[f'a:check:{impl}']}"
        failed = [c for c in self.checks if c["impl"] == impl and c["check"] == "equivalence"
                  and c["passed"] is False]
        if failed:
            f = failed[0]
            what = f.get("error") or f"{f['worst']} off by {_num(f['max_rel_error'], '.3g', 'inf/NaN')}"
            return "failed", (f"failed {len(failed)} equivalence check(s) on the device, e.g. {f['config']} "
                              f"L={f['depth']} {f['dtype']}: {what}")
        mine = [c for c in self.checks if c["impl"] == impl and c["check"] == "equivalence" and c["config"] == config
                and c["passed"] is True]
        if not mine:
            return "unchecked", ("no equivalence check of this configuration passed on the device "
                                 "(not run or unsupported)")
        return "passed", None

    def status(self, impl: str) -> str:
        info = self.impls.get(impl, {})
        if info.get("available") == "broken":
            return "broken"
        if self._broken(f"a:check:{impl}"):
            return "failed"
        checks = [c for c in self.checks if c["impl"] == impl and c["check"] == "equivalence"]
        if any(c["passed"] is False for c in checks):
            return "failed"
        return "passed" if any(c["passed"] for c in checks) else "unchecked"

    def best_ms(self, size: str, config: str, depth: int) -> dict:
        return {r["implementation"]: r["ms_per_step"] for r in self.timings
                if r["size"] == size and r["config"] == config and r["depth"] == depth and r.get("valid")}

def check_cost(impl: str, device: str) -> float:
    """Seconds one equivalence check takes (6 forward + backward passes at T = 7; a capture or a
    compilation for implementations that have one): a prior, for the plan."""
    if device != "cuda":
        return 0.1
    return {"fast": 0.15, "fused": 0.15, "cudnn": 0.15, "wavefront": 0.15, INJECTED: 0.15, FAILING: 0.15,
            "cuda-graph": 0.8}.get(impl, 2.0)

def regress_estimate(cost: Cost, settings: dict | None) -> float:
    """Seconds ``regress --update`` takes for its quick and full modes (part d): the counters
    once, then UPDATE_RUNS timed runs of the fixed set (on CUDA each in worker processes)."""
    from tlstm_bench.timing.protocol import default_implementation
    from tlstm_bench.timing.regress import MODES, UPDATE_RUNS

    total = 0.0
    for mode in ("quick", "full"):
        s = {**MODES[mode], **(settings or {})}
        one = cost.SPAWN_S[cost.dev] if cost.dev == "cuda" else 0.0
        for config in s["configs"]:
            for depth in s["depths"]:
                impl = default_implementation(config)  # what the gate's cases run
                run = cost.run_s(impl, "m100", config, depth, s["channels"], s["seq_len"])
                total += 0.1 + 2 * run  # the counters: an untimed run and a counted one
                one += 0.1 + (2 * s["warmup"] + 1) * run + s["repeats"] * max(s["min_sample_s"], run)
        total += UPDATE_RUNS * one
    return total

def channels_of(cfg, size: str):
    """(config, depth) -> M of the size ``size`` (M given, or solved for the size's budget)."""
    from tlstm_bench.models import parse_budget, solve_channels

    spec = cfg.sizes[size]
    if "channels" in spec:
        return lambda config, depth: spec["channels"]
    count = parse_budget(spec["budget"], input_size=cfg.vocab, output_size=cfg.vocab)
    return lambda config, depth: solve_channels(config, depth, count, cfg.vocab, cfg.vocab)

def plan_rows(device: str, tiny: bool, budget_s: float, skip=()) -> list[tuple[str, str, float]]:
    """(step, what, prior estimate s) in run order, assuming every registered implementation passes."""
    from tlstm_bench.timing import implementations_of

    cfg, cost = make_settings(tiny), Cost(device)
    from tlstm_bench.vocab import CUDA_IMPLEMENTATIONS

    on = {"slstm": [n for n in implementations_of("slstm") if n not in ORACLE_CHAIN],
          "tlstm": [n for n in implementations_of("tlstm") if n not in ORACLE_CHAIN
                    and (device == "cuda" or n not in CUDA_IMPLEMENTATIONS)]}
    rows = [("start", "python, torch import, CUDA context, provenance", 10.0 if device == "cuda" else 4.0)]
    configs = [c for c in PRIORITY_CONFIGS if c != "slstm"]
    n_checks = len(configs) * len(cfg.check_depths) * len(cfg.dtypes)
    a = sum(check_cost(i, device) * len(cfg.check_depths) * len(cfg.dtypes) for i in on["slstm"])
    a += sum(check_cost(i, device) * (n_checks + 2) for i in on["tlstm"])
    a_cap = cfg.a_share * budget_s
    a_row = ("a", f"checks of {', '.join(on['slstm'] + on['tlstm'])} + audit (capped at {a_cap:.0f} s)",
             min(a_cap, a + 8 * (1.5 if device == "cuda" else 0.5)))
    for step in (s for s in cfg.order if s not in skip):
        if step == "a":
            rows.append(a_row)
        elif step.startswith("b"):
            rows.append(plan_phase_row(cfg, cost, step, on))
        elif step.startswith("c:"):
            spec = next(t for t in cfg.training if t.key == step[2:])
            rows.append((step, f"{spec.config} L={spec.depth} M={spec.channels}: at most (time cap)",
                         spec.time_share * budget_s))
        elif step == "d":
            rows.append(("d", "regress baseline (quick + full modes)", regress_estimate(cost, cfg.regress_settings)))
        elif step == "e":
            rows.append(("e", "three of b1's cases re-timed by `tlstm-bench time`", 12.0 if device == "cuda" else 6.0))
    rows.append(("end", "summary and figures (kept back from the budget)", cfg.summary_reserve_s))
    return rows

def plan_phase_row(cfg, cost: Cost, step: str, on: dict) -> tuple[str, str, float]:
    phase = next(p for p in cfg.phases if p.key == step)
    if phase.select == "unverified":
        return step, "failed / unchecked implementations (none if all pass)", 0.0
    total, n = 0.0, 0
    for config in cfg.timed_configs:
        family = "slstm" if config == "slstm" else "tlstm"
        core = [i for i in on[family] if family == "slstm" or i in CORE_TLSTM]
        impls = {"core": core, "extra": [i for i in on[family] if i not in core],
                 "eager": ["eager"] if family == "tlstm" else []}[phase.select]
        cases = [(config, d, i) for d in cfg.depths for i in impls]
        if cases:
            total += cost.group_s(cases, phase.size, channels_of(cfg, phase.size), cfg.seq_len, phase.warmup,
                                  phase.repeats)
            n += len(cases)
    return step, f"{phase.size} {phase.select}: {n} cases, {phase.warmup} warm-up + {phase.repeats} repeats", total

def print_plan(device: str, tiny: bool, budget_s: float, skip=()) -> None:
    """The plan with the prior estimates (no measurement): what runs in which order, and when the
    budget would cut it if every estimate held."""
    rows = plan_rows(device, tiny, budget_s, skip)
    # the reserved parts (d runs first anyway) and the summary are kept back from the start
    kept = sum(SAFETY * est if step in RESERVED else est for step, _, est in rows if step in (*RESERVED, "end"))
    print(f"plan for --device {device}{' --tiny' if tiny else ''} --budget-s {budget_s:.0f} (prior estimates; "
          f"the run corrects them with what it measures; {kept:.0f} s kept back for parts "
          f"{'/'.join(RESERVED)} and the summary)\n")
    print("| step | what | estimate s | done by s |\n|---|---|---|---|")
    total = 0.0
    for step, what, est in rows:
        total += est
        mark = "" if total <= budget_s else " (cut: over the budget)"
        print(f"| {step} | {what} | {est:.0f} | {total:.0f}{mark} |")
