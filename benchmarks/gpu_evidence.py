#!/usr/bin/env python3
"""GPU evidence (issue 8): one prepared device run under one time budget.

    PYTHONPATH=. python3 benchmarks/gpu_evidence.py --out OUT --budget-s 420 --commit SHA
    PYTHONPATH=. python3 benchmarks/gpu_evidence.py --out /tmp/ev --device cpu --tiny   # dry run, minutes

What it measures (docs/gpu-evidence.md has the reasoning and the time estimates), in this
order (the most important first, so that a budget cut loses the least):

d. first: the regress baseline for this device (``regress --update``'s file,
   ``baseline-<device kind>.json``), so it is never cut.
a. correctness on the device: every registered implementation against its oracle
   (tLSTM: ``eager``; sLSTM: ``loop``) in float32 and float64, outputs, final state and
   every gradient, every configuration at L = 1 and 3; gradient accumulation over two
   backward passes; ``cuda-graph`` as a whole step (StepRun) against ``eager`` on replay,
   in processes of its own; the separability audit for 2d and 3d-cn.
b. runtime through ``measure_cases`` (SPEC section 8; batch 1, T = 100): one call per
   configuration (its depths and implementations interleaved, each implementation in a
   process of its own, a failure recorded as that implementation's), at M = 100 and at
   the Wikipedia size (10M parameters, 205 symbols), every registered implementation,
   with the kernels per timestep (torch profiler) and a loss/gradient fingerprint.
c. training at the paper's sizes (memorization, addition; 3d-cn, then the sLSTM) through
   ``train()``, resumed chunk by chunk from a checkpoint so that the time cap holds.
e. last, its time kept back from the start: three of b's cases re-timed through
   ``python -m tlstm_bench time`` and the ratio script / time recorded (issue 23: 10%).

Each unit of work is started only if its estimate fits in what is left, and a timing
call also checks before each round.

Files in --out (at most 8): records.jsonl (one JSON record a line, appended and
flushed as it goes; every record has a ``provenance`` block), log.txt, summary.md,
runtime_m100.png, runtime_wiki.png, training.png, baseline-<device kind>.json.

Processes: this process (the supervisor) never imports torch. It starts a worker (this
script with --worker) that measures. If the worker dies (a sticky CUDA error, a
segfault), the supervisor records the unit it died in and starts a new worker, which
skips every unit the records show finished. SIGTERM or Ctrl-C: the worker stops, the
supervisor writes the summary and figures from what was measured (exit 143 / 130).
Exit 0: complete or stopped by the budget (the summary says which); 3: finished, but a
worker crashed in some unit (the records say which); 2: bad arguments.
"""

from __future__ import annotations

import time

START_WALL = time.time()  # the budget counts from here, before any heavy import
RUN_START = [START_WALL]  # the supervisor's start; a worker sets it from --deadline - --budget-s

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import functools  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import importlib.util  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # a plain checkout, run as `python3 benchmarks/gpu_evidence.py`
    sys.path.insert(0, str(ROOT))

RECORDS, LOG, SUMMARY = "records.jsonl", "log.txt", "summary.md"
FIGURES = {"m100": "runtime_m100.png", "wiki": "runtime_wiki.png", "training": "training.png"}
MAX_FILES = 8
PRIORITY_CONFIGS = ("slstm", "2d", "3d-cn", "2d-m", "2d-f", "3d", "3d-ln")  # the paper's headline ones first
TINY_TIMED_CONFIGS = ("slstm", "2d")  # the dry run times fewer: each group starts its worker processes
EXTRA_MODULES = ("tlstm_bench.models.triton_tlstm",)  # may register more implementations (issue 9)
ORACLE = {"tlstm": "eager", "slstm": "loop"}
ORACLE_CHAIN = ("eager", "loop", "reference")  # the oracles (``reference`` checks ``eager`` in CI): not timed as rows
CORE_TLSTM = ("fast", "cuda-graph")  # b1/b2; every other passing tLSTM implementation is "extra" (b1x/b2x)
PAPER_SAMPLES = {"memorization": 54_000, "addition": 298_000}  # paper Table 2, 3D tLSTM+CN
TARGET_FACTOR = 1.5  # issue 8: solved within 1.5x the paper's samples
SAFETY = 1.25  # a unit starts only if SAFETY x its estimate fits
EXIT_STOPPED_TERM, EXIT_STOPPED_INT, EXIT_CUDA_BROKEN, EXIT_CRASHED = 143, 130, 75, 3
# Under Triton's interpreter (the CPU dry run) a triton run takes seconds, not milliseconds:
# the dry run checks it on a small subset and does not time it (timing is the same code for
# every implementation, and the dry run's groups already show it).
INTERPRETED_CONFIGS = ("2d",)
INJECTED = "wrong-test"  # --test-inject-wrong registers this deliberately wrong implementation
FAILING = "failing-test"  # --test-inject-failing: right in part a, kills its process when timed
RESERVED = ("d", "e")  # parts whose time is kept back from the start until they have run
TIME_CHECK = {"config": "2d", "implementation": "fast", "size": "m100", "agree_within": 0.10}


# ---------------------------------------------------------------------------- settings
@dataclasses.dataclass(frozen=True)
class TrainSpec:
    key: str
    task: str
    options: dict
    config: str
    depth: int
    channels: int
    batch: int
    time_share: float  # of the budget: the cap on this run's wall time
    sample_cap: int
    eval_every: int | None  # None: the task's default (100 batches)
    paper_samples: int | None


@dataclasses.dataclass(frozen=True)
class Phase:
    key: str
    size: str  # "m100" or "wiki"
    # "core": fused, wavefront, fast, cuda-graph (when they passed part a); "extra": any other
    # implementation that passed (e.g. triton: its own groups, so that a slow compilation cannot
    # cost the core numbers); "eager": the oracle; "unverified": failed or unchecked ones.
    select: str
    warmup: int
    repeats: int


@dataclasses.dataclass(frozen=True)
class Settings:
    tiny: bool
    depths: tuple
    seq_len: int
    vocab: int
    sizes: dict  # "m100" / "wiki" -> build_model keywords (channels or budget)
    check_channels: int
    check_batch: int
    check_seq_len: int
    check_vocab: int
    check_depths: tuple
    dtypes: tuple
    tolerance: dict  # dtype -> largest relative error (norm of the difference / norm of the oracle's)
    fingerprint_tolerance: float
    audit_configs: tuple
    audit_depths: tuple
    a_share: float  # part a may use at most this share of the budget
    phases: tuple
    training: tuple
    order: tuple  # the priority order of phases and training runs
    regress_settings: dict | None
    summary_reserve_s: float
    timed_configs: tuple = PRIORITY_CONFIGS


def make_settings(tiny: bool) -> Settings:
    # d first: the regress baseline is never cut (the first H100 run lost it to the budget);
    # e last, with its time kept back: it compares b1's numbers with `tlstm-bench time`.
    order = ("d", "a", "b1", "c:memorization-3d-cn", "b1x", "b2", "b2x", "c:addition-3d-cn", "b3",
             "c:memorization-slstm", "c:addition-slstm", "b4", "b5", "e")
    if tiny:
        # the dry run leaves out b4 (eager at the Wikipedia size: b3's code at b2's size)
        order = tuple(step for step in order if step != "b4")
        w, r = 1, 2
        phases = (Phase("b1", "m100", "core", w, r), Phase("b1x", "m100", "extra", w, r),
                  Phase("b2", "wiki", "core", w, r), Phase("b2x", "wiki", "extra", w, r),
                  Phase("b3", "m100", "eager", w, r), Phase("b4", "wiki", "eager", w, r),
                  Phase("b5", "m100", "unverified", w, r))
        # Small, but with far more distinct sequences than the 100 test samples: the online
        # stream redraws any sample that is in the test set, and loops forever when all are.
        mem = dict(task="memorization", options={"symbols": 3, "alphabet": 8}, channels=8, batch=15,
                   sample_cap=300, eval_every=150, paper_samples=None)
        add = dict(task="addition", options={"digits": 2}, channels=8, batch=15, sample_cap=300,
                   eval_every=150, paper_samples=None)
        training = (TrainSpec("memorization-3d-cn", config="3d-cn", depth=2, time_share=0.05, **mem),
                    TrainSpec("addition-3d-cn", config="3d-cn", depth=2, time_share=0.05, **add),
                    TrainSpec("memorization-slstm", config="slstm", depth=2, time_share=0.05, **mem),
                    TrainSpec("addition-slstm", config="slstm", depth=2, time_share=0.05, **add))
        return Settings(tiny=True, depths=(1, 3), seq_len=10, vocab=205,
                        sizes={"m100": {"channels": 8}, "wiki": {"budget": "40K"}},
                        check_channels=6, check_batch=2, check_seq_len=5, check_vocab=7, check_depths=(1, 3),
                        dtypes=("float32", "float64"), tolerance={"float32": 5e-3, "float64": 1e-9},
                        fingerprint_tolerance=5e-3, audit_configs=("2d", "3d-cn"), audit_depths=(1, 3),
                        a_share=0.5, phases=phases, training=training, order=order,
                        regress_settings={"configs": ["slstm", "2d"], "depths": [1, 2], "channels": 6,
                                          "seq_len": 8, "repeats": 2, "warmup": 1, "threads": 1,
                                          "min_sample_s": 0.0},
                        summary_reserve_s=8.0, timed_configs=TINY_TIMED_CONFIGS)
    phases = (Phase("b1", "m100", "core", 3, 7), Phase("b1x", "m100", "extra", 3, 7),
              Phase("b2", "wiki", "core", 2, 4), Phase("b2x", "wiki", "extra", 2, 4),
              Phase("b3", "m100", "eager", 2, 5), Phase("b4", "wiki", "eager", 1, 3),
              Phase("b5", "m100", "unverified", 2, 3))
    mem = dict(task="memorization", options={"symbols": 20}, channels=100, batch=15, sample_cap=5_000_000,
               eval_every=None, paper_samples=PAPER_SAMPLES["memorization"])
    add = dict(task="addition", options={"digits": 15}, channels=400, batch=15, sample_cap=5_000_000,
               eval_every=None, paper_samples=PAPER_SAMPLES["addition"])
    training = (TrainSpec("memorization-3d-cn", config="3d-cn", depth=10, time_share=0.18, **mem),
                TrainSpec("addition-3d-cn", config="3d-cn", depth=7, time_share=0.14, **add),
                TrainSpec("memorization-slstm", config="slstm", depth=10, time_share=0.07,
                          **{**mem, "paper_samples": None}),
                TrainSpec("addition-slstm", config="slstm", depth=7, time_share=0.07,
                          **{**add, "paper_samples": None}))
    return Settings(tiny=False, depths=(1, 2, 3, 4, 7, 10), seq_len=100, vocab=205,
                    sizes={"m100": {"channels": 100}, "wiki": {"budget": "10M"}},
                    check_channels=20, check_batch=3, check_seq_len=7, check_vocab=11, check_depths=(1, 3),
                    dtypes=("float32", "float64"), tolerance={"float32": 5e-3, "float64": 1e-9},
                    fingerprint_tolerance=5e-3, audit_configs=("2d", "3d-cn"), audit_depths=(1, 3),
                    a_share=0.16, phases=phases, training=training, order=order, regress_settings=None,
                    summary_reserve_s=10.0)


# ---------------------------------------------------------------------------- small helpers
def interpreted(impl: str) -> bool:
    """Whether ``impl`` runs under Triton's CPU interpreter here (the dry run; never on a GPU)."""
    return impl == "triton" and os.environ.get("TRITON_INTERPRET") == "1"


class Stop(KeyboardInterrupt):
    """Raised in the worker by SIGTERM: stop now, keep what is written (train() re-raises it)."""


def _raise_stop(signum, frame):
    raise Stop(f"signal {signum}")


def clean(value):
    """JSON-safe: NaN/inf become None, tuples lists, unknown objects their str."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def read_records(path: Path) -> list[dict]:
    """Every whole record of a JSON-lines file (a half-written last line is ignored)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


class Log:
    """Timestamped lines to log.txt and stdout (the device tool shows the end of stdout)."""

    def __init__(self, path: Path, who: str):
        self.path, self.who = path, who

    def __call__(self, message: str) -> None:
        line = f"[{time.time() - RUN_START[0]:7.1f}s {self.who}] {message}"
        print(line, flush=True)
        with open(self.path, "a") as fh:
            fh.write(line + "\n")


class Records:
    """records.jsonl: one record a line, appended, flushed and synced as it is written."""

    def __init__(self, path: Path, provenance: dict):
        self.path, self.provenance = path, provenance

    def write(self, kind: str, part: str, **fields) -> dict:
        record = {"kind": kind, "part": part, "t_s": round(time.time() - RUN_START[0], 3), **fields,
                  "provenance": self.provenance}
        line = json.dumps(clean(record), sort_keys=True)
        with open(self.path, "a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return record


class Budget:
    """The run's deadline. ``tail`` is kept back for the supervisor's summary and figures."""

    def __init__(self, deadline: float, tail: float):
        self.deadline, self.tail = deadline, tail

    def left(self) -> float:
        return self.deadline - self.tail - time.time()

    def fits(self, estimate_s: float, reserve_s: float = 0.0, safety: float = SAFETY) -> bool:
        return estimate_s * safety + reserve_s <= self.left()


def code_hash() -> str:
    """sha256 over the package and this script: says which code ran when git is absent."""
    h = hashlib.sha256()
    files = sorted((ROOT / "tlstm_bench").rglob("*.py")) + [Path(__file__).resolve()]
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _git_files_commit() -> str | None:
    """HEAD's commit from the .git files themselves (no git executable needed)."""
    git = ROOT / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: <path>"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.split(None, 1)[1]
        for base in (git, Path((git / "commondir").read_text().strip()) if (git / "commondir").exists() else None):
            if base is None:
                continue
            base = base if base.is_absolute() else git / base
            if (base / ref).exists():
                return (base / ref).read_text().strip()
            packed = base / "packed-refs"
            if packed.exists():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
    except (OSError, IndexError):
        return None
    return None


def code_provenance(commit_arg: str | None) -> dict:
    """Commit (git, else the .git files, else --commit), dirty flag, code hash. No torch."""
    from tlstm_bench.results.provenance import code_version, git_info

    info = {**git_info(), "code_version": code_version()}
    source = "git" if info.get("git_commit") else None
    if not info.get("git_commit"):
        info["git_commit"] = _git_files_commit()
        source = ".git files" if info["git_commit"] else None
    if not info.get("git_commit") and commit_arg:
        info["git_commit"], source = commit_arg, "--commit"
    if commit_arg and info.get("git_commit") and commit_arg != info["git_commit"]:
        info["commit_arg_mismatch"] = commit_arg
    info["commit_source"] = source or "unknown"
    info["git_commit"] = info.get("git_commit") or "unknown"
    info["code_hash"] = code_hash()
    return info


def supervisor_argv(argv: list[str]) -> list[str]:
    """The command line as given (a worker's argv less the supervisor's additions)."""
    out, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a == "--worker":
            continue
        elif a in ("--deadline", "--state-file"):
            skip = 1
        else:
            out.append(a)
    return out


def nvidia_smi(query: str) -> str | None:
    """One ``nvidia-smi --query-gpu`` answer (first GPU), or None where there is no nvidia-smi."""
    try:
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = smi.stdout.strip().splitlines()
    return lines[0].strip() if smi.returncode == 0 and lines else None


def script_args(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("worker", "deadline", "state_file")}


# ---------------------------------------------------------------------------- supervisor
def supervise(args) -> int:
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"error: --out {out} is not empty; give an empty or new folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / LOG, "supervisor")
    deadline = START_WALL + args.budget_s
    grace = max(5.0, min(60.0, 0.1 * args.budget_s))
    fd, state_file = tempfile.mkstemp(prefix="gpu-evidence-", suffix=".unit")
    os.close(fd)
    holder = {"child": None, "signal": None, "signal_at": None}

    def on_signal(signum, frame):
        holder["signal"], holder["signal_at"] = signum, time.time()
        child = holder["child"]
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if args.device == "cpu" and args.tiny and importlib.util.find_spec("triton") is not None:
        # The CPU dry run exercises the triton implementation too (issue 9), through Triton's
        # interpreter: it must be switched on before the worker defines the kernels.
        env["TRITON_INTERPRET"] = "1"
    cmd = [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--worker", "--deadline",
           repr(deadline), "--state-file", state_file]
    log(f"budget {args.budget_s:.0f} s (until +{args.budget_s:.0f} s, hard stop at +{args.budget_s + grace:.0f} s); "
        f"device {args.device}{' tiny' if args.tiny else ''}; out {out}")
    status, crashes = None, 0
    # On a fresh machine matplotlib's first import builds its font cache (seconds): do it now,
    # while the worker measures, not in the time kept back for the summary.
    threading.Thread(target=_warm_matplotlib, daemon=True).start()
    while status is None:
        Path(state_file).write_text("")
        child = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, bufsize=1)
        holder["child"] = child
        threading.Thread(target=_forward_stderr, args=(child.stderr,), daemon=True).start()
        stopped_at = None
        while child.poll() is None:
            try:
                child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            now = time.time()
            if stopped_at is None and now > deadline + grace:
                log("the hard stop passed with the worker still running: stopping it")
                child.send_signal(signal.SIGTERM)
                stopped_at = now
            asked = min(t for t in (stopped_at, holder["signal_at"], math.inf) if t is not None)
            if now > asked + 15 and child.poll() is None:
                child.kill()  # it did not stop within 15 s of SIGTERM (stuck in a device call)
        rc = child.returncode
        unit = Path(state_file).read_text().strip()
        if holder["signal"] is not None:
            status = "interrupted"
        elif rc == 2:
            status = "error"  # bad input the worker reported (e.g. --device cuda without CUDA): no restart
        elif rc == 0:
            ends = [r for r in read_records(out / RECORDS) if r["kind"] == "worker_end"]
            status = ends[-1]["status"] if ends else "complete"
        elif stopped_at is not None:
            status = "budget"
        elif rc == EXIT_CUDA_BROKEN:
            crashes += 1  # the worker recorded the unit that broke the context; a fresh one goes on
            log("the worker's CUDA context broke; starting a new worker, which skips every finished unit")
            if crashes > 3 or deadline - time.time() < (10 if args.tiny else 30):
                status = "crashed"
        else:
            crashes += 1
            unit = unit or "(before the first unit)"
            prov = _provenance_from(out, args)
            how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
            Records(out / RECORDS, prov).write("unit", unit[0] if unit[0] in "abcd" else "-",
                                               unit=unit, status="crashed", note=f"worker died: {how}")
            log(f"the worker died ({how}) in unit {unit}")
            if crashes > 3 or unit.startswith("(") or deadline - time.time() < (10 if args.tiny else 30):
                status = "crashed"  # died before any unit (would die again), too often, or too late
            else:
                log("starting a new worker; it skips every finished unit")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Path(state_file).unlink(missing_ok=True)
    finalize(out, args, status, crashes, log)
    if status == "interrupted":
        return EXIT_STOPPED_INT if holder["signal"] == signal.SIGINT else EXIT_STOPPED_TERM
    if status == "error":
        return 2
    return EXIT_CRASHED if crashes else 0


def _warm_matplotlib() -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except Exception:  # noqa: BLE001 - the figures will say what is wrong
        pass


def _forward_stderr(stream) -> None:
    """The worker's stderr, without the profiler's two "USDT:" lines per profiled run (torch 2.13)."""
    for line in stream:
        if not line.startswith("USDT:"):
            sys.stderr.write(line)
            sys.stderr.flush()


def _provenance_from(out: Path, args) -> dict:
    """The worker's provenance block if it wrote one, else what the supervisor knows without torch."""
    for r in read_records(out / RECORDS):
        if r["kind"] == "header":
            return r["provenance"]
    return {**code_provenance(args.commit), "args": script_args(args), "argv": supervisor_argv(sys.argv[1:]),
            "driver_version": "unknown", "device": args.device,
            "note": "written by the supervisor: the worker wrote no header (torch and GPU details unknown)"}


def finalize(out: Path, args, status: str, crashes: int, log: Log) -> None:
    prov = _provenance_from(out, args)
    records = read_records(out / RECORDS)
    skipped = [r["unit"] for r in records if r["kind"] == "unit" and r["status"].startswith("skipped")]
    Records(out / RECORDS, prov).write("end", "-", status=status, crashes=crashes,
                                       elapsed_s=round(time.time() - START_WALL, 1), budget_s=args.budget_s,
                                       units_skipped=skipped)
    records = read_records(out / RECORDS)
    text = summary_markdown(records, status)
    if status in ("error", "crashed"):
        tail = (out / LOG).read_text().splitlines()[-8:] if (out / LOG).exists() else []
        text += "\n## Last lines of log.txt\n\n```\n" + "\n".join(tail) + "\n```\n"
    (out / SUMMARY).write_text(text)
    try:
        draw_figures(out, records)
    except Exception as exc:  # noqa: BLE001 - figures are a convenience; the records are the evidence
        log(f"figures failed: {type(exc).__name__}: {exc}")
    files = sorted(p.name for p in out.iterdir())
    if len(files) > MAX_FILES:
        log(f"WARNING: {len(files)} files in --out (limit {MAX_FILES}): {files}")
    log(f"done ({status}); files: {', '.join(files)}")
    print("\n" + text, flush=True)


# ---------------------------------------------------------------------------- cost model
class Cost:
    """Seconds a run or a group will take: priors per implementation, corrected by what is measured.

    A run is sequential steps x (per-step overhead + FLOPs / rate). ``scale`` per
    (implementation, size) is the largest ratio measured / predicted seen so far.
    """

    STEP_S = {"cuda": {"eager": 1e-3, "fast": 3e-4, "cuda-graph": 1.5e-4, "fused": 4e-5, "wavefront": 1e-3,
                       "*": 3e-4},
              "cpu": {"eager": 1.5e-3, "fast": 2.5e-4, "fused": 5e-5, "wavefront": 8e-4, "*": 1e-3}}
    SETUP_S = {"cuda": {"cuda-graph": 0.6, "fast": 0.1, "eager": 0.05, "fused": 0.1, "wavefront": 0.05, "*": 3.0},
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
        return seq_len * depth if (config == "slstm" and impl == "fused") else seq_len + depth - 1

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


# ---------------------------------------------------------------------------- worker state
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


# ---------------------------------------------------------------------------- worker
class Worker:
    def __init__(self, args):
        import torch

        self.args = args
        self.cfg = make_settings(args.tiny)
        self.out = Path(args.out)
        self.log = Log(self.out / LOG, "worker")
        self.torch = torch
        from tlstm_bench.vocab import torch_device

        self.dev = torch_device(args.device)
        if self.dev.type == "cpu":
            torch.set_num_threads(1)  # the dry run shares a small machine; timing uses 1 thread too
        existing = read_records(self.out / RECORDS)
        self.st = State(existing)
        self.prov = self.st.header["provenance"] if self.st.header else self.run_provenance()
        self.records = Records(self.out / RECORDS, self.prov)
        self.cost = Cost(self.dev.type)
        for r in self.st.timings:
            self.cost.learn(r, r["size"])
        self.budget = Budget(args.deadline, self.cfg.summary_reserve_s)
        self.state_file = Path(args.state_file) if args.state_file else None
        # part a's share of the budget counts from part a's start (d runs before it); a restarted
        # worker counts it again from its own start
        self.a_deadline = time.time() + self.cfg.a_share * args.budget_s
        # Registries are per process: a restarted worker needs these again even when the
        # unit that first recorded them is finished.
        self.import_notes = []
        import importlib

        for name in EXTRA_MODULES:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                self.import_notes.append(f"{name} not importable ({exc})")
        self.prepare_fn = functools.partial(prepare_process, wrong=args.test_inject_wrong,
                                            failing=args.test_inject_failing, seq_len=self.cfg.seq_len)
        self.prepare_fn()  # this process runs part a and training: the same registries and settings

    # -- provenance ----------------------------------------------------------------------
    def run_provenance(self) -> dict:
        torch = self.torch
        from tlstm_bench.results import provenance

        prov = {**provenance(self.dev), **code_provenance(self.args.commit)}
        prov.update(args=script_args(self.args), argv=supervisor_argv(sys.argv[1:]), cudnn_version=None,
                    driver_version="unknown",
                    gpu_name=None, gpu_capability=None, gpu_memory_gib=None, gpu_multiprocessors=None,
                    triton_version=None, allow_tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
                    allow_tf32_cudnn=torch.backends.cudnn.allow_tf32,
                    float32_matmul_precision=torch.get_float32_matmul_precision(),
                    cuda_version=torch.version.cuda)
        try:
            prov["cudnn_version"] = torch.backends.cudnn.version()
        except Exception:  # noqa: BLE001 - a torch without cuDNN
            pass
        try:
            import triton

            prov["triton_version"] = triton.__version__
        except Exception:  # noqa: BLE001 - triton is optional
            pass
        if self.dev.type == "cuda":
            p = torch.cuda.get_device_properties(self.dev)
            prov.update(gpu_name=p.name, gpu_capability=f"{p.major}.{p.minor}",
                        gpu_memory_gib=round(p.total_memory / 2**30, 1), gpu_multiprocessors=p.multi_processor_count)
        prov["driver_version"] = nvidia_smi("driver_version") or "unknown"
        prov["nvidia_smi"] = nvidia_smi("name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit")
        return prov

    # -- running units -----------------------------------------------------------------------
    def emit(self, kind: str, part: str, **fields) -> dict:
        record = self.records.write(kind, part, **fields)
        self.st.add(record)
        return record

    def cuda_broken(self) -> bool:
        if self.dev.type != "cuda":
            return False
        try:
            self.torch.ones(4, device=self.dev).add_(1).sum().item()
            self.torch.cuda.synchronize(self.dev)
            return False
        except Exception:  # noqa: BLE001 - any failure here means the context is gone
            return True

    def reserve(self, part: str = "") -> float:
        """Seconds kept back for the parts in RESERVED that have not run yet (other than ``part``)."""
        est = {"d": self.regress_estimate, "e": self.time_check_estimate}
        done = {u.split(":")[0] for u in self.st.finished}
        return sum(SAFETY * est[p]() for p in RESERVED
                   if p != part and p not in done and p not in self.args.skip)

    def run(self) -> int:
        if not self.st.header:
            self.emit("header", "-", tiny=self.cfg.tiny, budget_s=self.args.budget_s, device=self.dev.type,
                      settings=dataclasses.asdict(self.cfg))
            self.log(f"device {self.prov.get('gpu_name') or self.prov.get('device_name')}, torch "
                     f"{self.prov['torch_version']}, CUDA {self.prov.get('cuda_version')}, cuDNN "
                     f"{self.prov.get('cudnn_version')}, driver {self.prov.get('driver_version')}, commit "
                     f"{self.prov['git_commit'][:12]} ({self.prov['commit_source']}), code {self.prov['code_hash']}")
        status, ran = "complete", 0
        for unit in self.plan():
            uid, part, estimate, fn = unit
            if uid in self.st.finished:
                continue
            est = estimate()
            reserve = self.reserve(part)
            if not self.budget.fits(est, reserve):
                self.emit("unit", part, unit=uid, status="skipped_budget", est_s=round(est, 2),
                          left_s=round(self.budget.left(), 1), note=f"needs ~{est * SAFETY:.0f} s + {reserve:.0f} s "
                          f"kept for parts {'/'.join(RESERVED)}, {self.budget.left():.0f} s left")
                self.log(f"skip {uid}: estimate {est:.1f} s does not fit ({self.budget.left():.0f} s left)")
                status = "budget"
                continue
            if self.state_file:
                self.state_file.write_text(uid)
            if uid == self.args.test_crash_unit:
                os.kill(os.getpid(), signal.SIGKILL)  # test hook: a worker that dies like a segfault
            self.log(f"start {uid} (estimate {est:.1f} s, {self.budget.left():.0f} s left)")
            t0 = time.time()
            try:
                note = fn()
                self.emit("unit", part, unit=uid, status="done", est_s=round(est, 2),
                          took_s=round(time.time() - t0, 2), note=note)
                if note and "budget" in str(note):
                    status = "budget"
            except Stop:
                self.emit("unit", part, unit=uid, status="interrupted", est_s=round(est, 2),
                          took_s=round(time.time() - t0, 2))
                raise
            except Exception as exc:  # noqa: BLE001 - one broken unit must not lose the rest
                self.emit("unit", part, unit=uid, status="failed", est_s=round(est, 2),
                          took_s=round(time.time() - t0, 2), error=f"{type(exc).__name__}: {exc}",
                          traceback=traceback.format_exc()[-4000:])
                self.log(f"unit {uid} failed: {type(exc).__name__}: {exc}")
                if self.cuda_broken():
                    self.log("the CUDA context is broken: exiting so the supervisor starts a fresh worker")
                    if self.state_file:
                        self.state_file.write_text("")  # recorded above as failed; not a crash to record again
                    return EXIT_CUDA_BROKEN
            self.log(f"end {uid} ({time.time() - t0:.1f} s)")
            ran += 1
            if ran == self.args.test_stop_after_units:
                self.budget.deadline = time.time() + self.budget.tail  # test hook: the budget runs out now
        self.emit("worker_end", "-", status=status)
        return 0

    # -- the plan ------------------------------------------------------------------------
    def plan(self):
        """Units in priority order: (id, part, estimate() -> s, run() -> note). Lazy: later units
        depend on what earlier ones found (which implementations passed)."""
        cfg = self.cfg
        for step in cfg.order:
            if step in self.args.skip:
                continue
            if step == "a":
                yield "a:implementations", "a", lambda: 5.0 if self.dev.type == "cuda" else 1.0, self.unit_discover
                yield "a:graph-step", "a", self.graph_step_estimate, self.unit_graph_step
                yield from self.check_units()
                yield "a:audit", "a", self.audit_estimate, self.unit_audit
            elif step.startswith("b"):
                phase = next(p for p in cfg.phases if p.key == step)
                yield from self.timing_units(phase)
            elif step.startswith("c:"):
                spec = next(s for s in cfg.training if s.key == step[2:])
                yield f"c:{spec.key}", "c", lambda spec=spec: self.train_first_estimate(spec), \
                    lambda spec=spec: self.unit_train(spec)
            elif step == "d":
                yield "d:regress-baseline", "d", self.regress_estimate, self.unit_regress
            elif step == "e":
                yield "e:time-check", "e", self.time_check_estimate, self.unit_time_check

    # -- part a --------------------------------------------------------------------------
    def unit_discover(self) -> str:
        """Every registered implementation (``implementations_of``: the registries and the graphed
        step), each probed on a tiny model here, except the graphed ones: a capture that fails
        poisons its process, so ``cuda-graph`` is probed and checked in a process of its own
        (unit a:graph-step)."""
        from tlstm_bench.timing import implementations_of
        from tlstm_bench.vocab import GRAPHED_IMPLEMENTATIONS

        self.a_deadline = time.time() + self.cfg.a_share * self.args.budget_s
        self.emit("implementation", "a", impl="eager", family="tlstm", available=True, role="oracle",
                  reason="the tLSTM oracle of the timed implementations (itself tested against `reference` in CI)")
        for family in ("slstm", "tlstm"):
            for name in implementations_of(family):
                if name in ORACLE_CHAIN or name in GRAPHED_IMPLEMENTATIONS:
                    continue
                available, reason = self.probe(family, name)
                self.emit("implementation", "a", impl=name, family=family, available=available, reason=reason)
                self.log(f"implementation {name} ({family}): "
                         + ("available" if available is True
                            else f"{'BROKEN' if available else 'not available'}: {reason}"))
        return "; ".join(self.import_notes) or None

    def probe(self, family: str, name: str):
        """(True | False | "broken", reason): a forward and backward of a tiny model with ``name``."""
        from tlstm_bench.errors import UserError
        from tlstm_bench.models import build_model

        torch = self.torch
        try:
            torch.manual_seed(0)
            model = build_model("slstm" if family == "slstm" else "2d", 2, vocab=5, channels=4,
                                implementation=name).to(self.dev)
            y, _ = model(torch.randint(0, 5, (1, 4)).to(self.dev))
            y.sum().backward()
            if self.dev.type == "cuda":
                torch.cuda.synchronize(self.dev)
            return True, None
        except UserError as exc:
            return False, str(exc)
        except Exception as exc:  # noqa: BLE001 - recorded; the implementation is not timed
            return "broken", f"{type(exc).__name__}: {exc}"

    def check_units(self):
        cfg = self.cfg
        for impl in self.ordered_check_impls():
            family = self.st.impls[impl]["family"]
            configs = ["slstm"] if family == "slstm" else [c for c in PRIORITY_CONFIGS if c != "slstm"]
            if interpreted(impl):
                configs = list(INTERPRETED_CONFIGS)
            per = check_cost(impl, self.dev.type)
            count = len(configs) * len(cfg.check_depths) * len(cfg.dtypes)
            # estimate: the first check of each configuration (the unit stops itself at part a's share)
            yield (f"a:check:{impl}", "a", lambda per=per, n=len(configs): per * n,
                   lambda impl=impl, configs=configs, per=per, count=count: self.unit_checks(impl, configs, per, count))

    def ordered_check_impls(self, graphed: bool = False) -> list[str]:
        """The available implementations, the known ones first; the graphed step only if asked
        (its checks are unit a:graph-step, not a:check)."""
        usable = [n for n, r in self.st.impls.items() if r["available"] is True and r.get("role") != "oracle"
                  and (graphed or not r.get("graphed"))]
        first = [n for n in ("fused", "cudnn", "wavefront", "fast", "cuda-graph") if n in usable]
        return first + [n for n in usable if n not in first]

    # -- part a: the graphed step, in processes of its own -----------------------------------
    def graph_step_estimate(self) -> float:
        n = len([c for c in PRIORITY_CONFIGS if c != "slstm"]) * len(self.cfg.check_depths)
        return Cost.SPAWN_S[self.dev.type] + n * (0.8 if self.dev.type == "cuda" else 0.05)

    def unit_graph_step(self) -> str | None:
        """``cuda-graph`` vs ``eager`` as whole steps (StepRun), float64, loss and every parameter
        gradient, on replay after new data was copied into the input buffers; every tLSTM
        configuration at the check depths. In a spawned process: a capture that fails poisons
        that process's CUDA context, never this one; a process that breaks is replaced (twice
        at most) for the cases it had left."""
        from tlstm_bench.vocab import GRAPHED_IMPLEMENTATIONS

        cfg = self.cfg
        items = [(c, d) for d in cfg.check_depths for c in PRIORITY_CONFIGS if c != "slstm"]
        opts = dict(device=str(self.dev), channels=cfg.check_channels, vocab=cfg.check_vocab,
                    seq_len=cfg.check_seq_len, seed=5, tolerance=cfg.tolerance["float64"])
        for name in GRAPHED_IMPLEMENTATIONS:
            timeout = max(30.0, self.budget.left() - self.reserve("a"))
            results, unavailable = run_graph_checks(name, items, opts, timeout, self.prepare_fn)
            if unavailable:
                self.emit("implementation", "a", impl=name, family="tlstm", available=False, reason=unavailable,
                          graphed=True)
                self.log(f"implementation {name} (tlstm, a whole graphed step): not available: {unavailable}")
                continue
            broken = [r for r in results if r.get("error")]
            available = True if len(broken) < len(results) else "broken"
            self.emit("implementation", "a", impl=name, family="tlstm", graphed=True, available=available,
                      reason=broken[0]["error"].splitlines()[0] if broken else None)
            for r in results:
                self.emit_graph_check(name, r, opts)
            self.log(f"  {name}: {len(results)} step checks against eager (float64), "
                     f"{sum(r.get('passed') is not True for r in results)} failed")
        return None

    def emit_graph_check(self, name: str, r: dict, opts: dict) -> dict:
        errors = r.get("errors") or {}
        worst = max(errors, key=errors.get) if errors else None
        rec = self.emit("check", "a", check="equivalence", how="whole step, on replay", impl=name,
                        reference="eager", config=r["config"], depth=r["depth"], dtype="float64",
                        channels=opts["channels"], batch=1, seq_len=opts["seq_len"], device=self.dev.type,
                        passed=r.get("passed", False), tolerance=opts["tolerance"],
                        max_rel_error=errors.get(worst) if worst else None, worst=worst, errors=errors,
                        error=r.get("error"), affects_timing=True)
        if rec["passed"] is not True:
            what = (r.get("error") or "").splitlines()[0] if r.get("error") else f"{worst} off by {errors[worst]:.3g}"
            self.log(f"  FAILED {name} {r['config']} L={r['depth']} float64 (step): {what}")
        return rec

    def unit_checks(self, impl: str, configs: list[str], per: float, count: int) -> str | None:
        """Equivalence with the oracle (float64 first: the tight one), then gradient accumulation."""
        cfg = self.cfg
        order = [(dtype, depth, config) for dtype in reversed(cfg.dtypes) for depth in reversed(cfg.check_depths)
                 for config in configs]
        if interpreted(impl):
            order = [("float32", max(cfg.check_depths), config) for config in configs]
            count = len(order)
        done, failed, last = 0, 0, per
        for dtype, depth, config in order:
            if time.time() + last * SAFETY > self.a_deadline or not self.budget.fits(last, self.reserve()):
                left = len(order) - done
                self.log(f"  {impl}: {left} check(s) left unchecked (part a's share of the budget is used)")
                return f"{left} of {count} checks not run: part a's share of the budget (budget)"
            t0 = time.time()
            rec = self.guarded_check(self.check_one, impl, config, depth, dtype)
            last = time.time() - t0
            done += 1
            failed += rec["passed"] is False
        family = self.st.impls[impl]["family"]
        if family == "tlstm" and not interpreted(impl):
            for config in ("2d", "3d-cn"):
                if time.time() + last * 2 * SAFETY > self.a_deadline:
                    return "accumulation check not run (budget)"
                self.guarded_check(self.check_accumulate, impl, config)
        self.log(f"  {impl}: {done} equivalence checks, {failed} failed")
        return None

    def guarded_check(self, fn, impl: str, config: str, *rest) -> dict:
        """Run one check; an implementation that refuses a configuration (UserError) is recorded as
        unsupported there (not a failure); any other error is a failed check."""
        from tlstm_bench.errors import UserError

        check = "equivalence" if fn == self.check_one else "accumulate"
        depth, dtype = (rest + (3, "float64"))[:2] if rest else (3, "float64")
        base = dict(check=check, impl=impl, config=config, depth=depth, dtype=dtype, device=self.dev.type,
                    affects_timing=check == "equivalence", max_rel_error=None, worst=None, errors={},
                    tolerance=self.cfg.tolerance[dtype])
        try:
            return fn(impl, config, *rest)
        except Stop:
            raise
        except UserError as exc:
            self.log(f"  {impl} does not support {config} L={depth} {dtype}: {exc}")
            return self.emit("check", "a", **base, passed=None, unsupported=str(exc))
        except Exception as exc:  # noqa: BLE001 - an implementation that raises is wrong here
            self.log(f"  FAILED {impl} {config} L={depth} {dtype}: raised {type(exc).__name__}: {exc}")
            rec = self.emit("check", "a", **base, passed=False, error=f"{type(exc).__name__}: {exc}",
                            traceback=traceback.format_exc()[-3000:])
            if self.cuda_broken():
                raise
            return rec

    def _pair(self, impl: str, config: str, depth: int, dtype):
        """The oracle model and a copy with ``impl``: same (perturbed, non-trivial) parameters."""
        import copy

        torch = self.torch
        from tlstm_bench.models import build_model

        family = "slstm" if config == "slstm" else "tlstm"
        torch.manual_seed(1234 + depth)
        ref = build_model(config, depth, vocab=self.cfg.check_vocab, channels=self.cfg.check_channels,
                          implementation=ORACLE[family])
        with torch.no_grad():
            for p in ref.parameters():  # norm gains 1 / biases 0 would hide a swapped gain and bias
                p.add_(torch.randn_like(p) * 0.1)
        ref.to(device=self.dev, dtype=dtype)
        model = copy.deepcopy(ref)
        model.implementation = impl
        return ref, model

    def _inputs(self, model, seed: int, dtype):
        torch = self.torch
        gen = torch.Generator().manual_seed(seed)
        b, t, v = self.cfg.check_batch, self.cfg.check_seq_len, self.cfg.check_vocab
        x = torch.randint(0, v, (b, t), generator=gen).to(self.dev)
        target = torch.randint(0, v, (b, t), generator=gen).to(self.dev)
        zero = model.zero_state(b, torch.zeros(1, dtype=dtype, device=self.dev))
        state = [torch.randn(z.shape, generator=gen, dtype=torch.float64).to(self.dev, dtype) for z in zero]
        weights = [torch.randn(z.shape, generator=gen, dtype=torch.float64).to(self.dev, dtype) for z in zero]
        return x, target, state, weights

    def _forward_backward(self, model, x, target, state, weights, with_state: bool):
        """Loss over the outputs and the final state; backward. Returns every tensor to compare."""
        torch = self.torch
        from torch.nn import functional as F

        kind = type(model.zero_state(1, torch.zeros(1, device=self.dev)))
        leaves = [s.clone().requires_grad_(True) for s in state] if with_state else None
        y, final = model(x, kind(*leaves) if with_state else None)
        loss = F.cross_entropy(y.reshape(-1, y.shape[-1]), target.reshape(-1))
        loss = loss + sum((f * w).sum() for f, w in zip(final, weights))
        loss.backward()
        got = {"y": y.detach(), "h_T": final[0].detach(), "c_T": final[1].detach()}
        for name, p in model.named_parameters():
            got[f"grad {name}"] = None if p.grad is None else p.grad.detach().clone()
        if with_state:
            got["grad h0"], got["grad c0"] = (t.grad.detach().clone() if t.grad is not None else None for t in leaves)
        return got

    def check_one(self, impl: str, config: str, depth: int, dtype_name: str) -> dict:
        torch = self.torch
        dtype = getattr(torch, dtype_name)
        ref, model = self._pair(impl, config, depth, dtype)
        x, target, state, weights = self._inputs(ref, 7 + depth, dtype)
        x_warm, *_ = self._inputs(ref, 99, dtype)
        errors = {}
        for with_state in (True, False):
            # a first call on other data: a capturing implementation must be right on replay too
            for p in model.parameters():
                p.grad = None
            self._forward_backward(model, x_warm, target, state, weights, with_state)
            for m in (ref, model):
                for p in m.parameters():
                    p.grad = None
            want = self._forward_backward(ref, x, target, state, weights, with_state)
            got = self._forward_backward(model, x, target, state, weights, with_state)
            tag = "given state" if with_state else "zero state"
            errors.update({f"{name} ({tag})": e for name, e in rel_errors(got, want).items()})
        worst = max(errors, key=errors.get)
        tol = self.cfg.tolerance[dtype_name]
        passed = all(e <= tol for e in errors.values())
        rec = self.emit("check", "a", check="equivalence", impl=impl, reference=ref.implementation, config=config,
                        depth=depth, dtype=dtype_name, channels=self.cfg.check_channels, batch=self.cfg.check_batch,
                        seq_len=self.cfg.check_seq_len, device=self.dev.type, passed=passed, tolerance=tol,
                        max_rel_error=errors[worst], worst=worst, errors=errors, affects_timing=True)
        if not passed:
            self.log(f"  FAILED {impl} {config} L={depth} {dtype_name}: {worst} off by {errors[worst]:.3g}")
        return rec

    def check_accumulate(self, impl: str, config: str) -> dict:
        """Two backward passes on different data without zeroing: .grad must be g1 + g2 (pytorch#181723)."""
        torch = self.torch
        dtype = torch.float64
        ref, model = self._pair(impl, config, 3, dtype)
        x1, target, state, weights = self._inputs(ref, 21, dtype)
        x2, *_ = self._inputs(ref, 22, dtype)
        grads = {}
        for tag, m in (("ref", ref), ("impl", model)):
            leaves = [s.clone().requires_grad_(True) for s in state]
            kind = type(m.zero_state(1, torch.zeros(1, device=self.dev)))
            from torch.nn import functional as F

            for x in (x1, x2):
                y, final = m(x, kind(*leaves))
                loss = F.cross_entropy(y.reshape(-1, y.shape[-1]), target.reshape(-1))
                (loss + sum((f * w).sum() for f, w in zip(final, weights))).backward()
            grads[tag] = {f"grad {n}": p.grad.detach().clone() for n, p in m.named_parameters() if p.grad is not None}
            grads[tag].update({"grad h0": leaves[0].grad.detach().clone(), "grad c0": leaves[1].grad.detach().clone()})
        errors = rel_errors(grads["impl"], grads["ref"])
        worst = max(errors, key=errors.get)
        tol = self.cfg.tolerance["float64"]
        passed = all(e <= tol for e in errors.values())
        if not passed:
            self.log(f"  FAILED gradient accumulation {impl} {config}: {worst} off by {errors[worst]:.3g}")
        return self.emit("check", "a", check="accumulate", impl=impl, reference="eager", config=config, depth=3,
                         dtype="float64", device=self.dev.type, passed=passed, tolerance=tol,
                         max_rel_error=errors[worst], worst=worst, errors=errors, affects_timing=False,
                         note="two backward passes on different inputs without zeroing; timing zeroes the "
                              "gradients before every run, so a failure here does not touch the timings")

    def audit_estimate(self) -> float:
        return (1.5 if self.dev.type == "cuda" else 0.5) * len(self.cfg.audit_configs) * len(self.cfg.audit_depths) * 2

    def unit_audit(self) -> None:
        from tlstm_bench.audit import audit_one

        for config in self.cfg.audit_configs:
            for depth in self.cfg.audit_depths:
                for impl in ("eager", "fast"):
                    res = audit_one(config, depth, implementation=impl, device=str(self.dev))
                    self.emit("audit", "a", implementation=impl, device=self.dev.type, **res.as_dict())
                    self.log(f"  audit {config} L={depth} {impl}: {res.verdict}")

    # -- part b --------------------------------------------------------------------------
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

    # -- part c --------------------------------------------------------------------------
    def train_impl(self, spec: TrainSpec) -> str:
        """The fastest implementation that passed part a (by b1's time at the largest depth) and
        that train() can run (a model's sequence loop, not a graphed step); else the default."""
        from tlstm_bench.vocab import DEFAULT_IMPLEMENTATION, GRAPHED_IMPLEMENTATIONS

        family = "slstm" if spec.config == "slstm" else "tlstm"
        usable = [n for n in self.st.family_impls(family) if self.st.status(n) == "passed"
                  and n not in self.st.excluded() and n not in GRAPHED_IMPLEMENTATIONS and n not in (INJECTED, FAILING)]
        measured = self.st.best_ms("m100", spec.config, max(self.cfg.depths))
        timed = sorted((ms, n) for n, ms in measured.items() if n in usable)
        if timed:
            return timed[0][1]
        default = DEFAULT_IMPLEMENTATION[family]
        return default if default in usable else ORACLE[family]

    def _task(self, spec: TrainSpec):
        from tlstm_bench.tasks import make_task

        return make_task(spec.task, **spec.options)

    def train_step_s(self, spec: TrainSpec, impl: str) -> float:
        task = self._task(spec)
        steps_len = task.seq_len
        run = self.cost.run_s(impl, "m100", spec.config, spec.depth, spec.channels, steps_len, batch=spec.batch)
        return 1.5 * run + (0.004 if self.dev.type == "cuda" else 0.002)

    def train_first_estimate(self, spec: TrainSpec) -> float:
        impl = self.train_impl(spec)
        task = self._task(spec)
        eval_every = spec.eval_every or task.default_eval_every(spec.batch)
        setup = 2.0 if self.dev.type == "cuda" else 1.0
        return setup + self.train_step_s(spec, impl) * eval_every / spec.batch

    def unit_train(self, spec: TrainSpec) -> str | None:
        """Train through ``train()`` in chunks that each end on an evaluation, resuming from the
        checkpoint each time, until solved, the sample cap, the time cap or the budget."""
        import shutil

        from tlstm_bench.training import train
        from tlstm_bench.training.checkpoint import checkpoint_path, load_checkpoint

        impl = self.train_impl(spec)
        task = self._task(spec)
        eval_every = spec.eval_every or task.default_eval_every(spec.batch)
        cap_s = spec.time_share * self.args.budget_s
        t_unit = time.time()
        ckdir = Path(tempfile.mkdtemp(prefix=f"gpu-evidence-{spec.key}-"))
        base = dict(config=spec.config, key=spec.key, task=spec.task, task_options=spec.options, depth=spec.depth,
                    channels=spec.channels, batch_size=spec.batch, implementation=impl, time_cap_s=round(cap_s, 1),
                    sample_cap=spec.sample_cap, paper_samples=spec.paper_samples, eval_every=eval_every)
        self.log(f"  training {spec.key}: {spec.config} L={spec.depth} M={spec.channels} ({impl}), "
                 f"time cap {cap_s:.0f} s, eval every {eval_every} samples")
        seen, record, stop, chunks = 0, None, None, 0
        self.emit("training_progress", "c", **base, samples_seen=0, test_metric=None, wall_time_s=0.0)
        per_sample = self.train_step_s(spec, impl) / spec.batch
        overhead = 2.0 if self.dev.type == "cuda" else 0.5
        try:
            while True:
                left = min(cap_s - (time.time() - t_unit), self.budget.left() - self.reserve())
                affordable = int((left / SAFETY - overhead) / max(per_sample, 1e-9))
                chunk = min(affordable, spec.sample_cap - seen) // eval_every * eval_every
                if chunks == 0:
                    chunk = min(chunk, eval_every)  # a short first chunk measures the throughput
                if chunk < eval_every:
                    stop = "time cap" if cap_s - (time.time() - t_unit) < self.budget.left() - self.reserve() \
                        else "budget"
                    break
                t0 = time.time()
                record = train(spec.config, task=spec.task, depth=spec.depth, channels=spec.channels,
                               max_samples=seen + chunk, batch_size=spec.batch, eval_every=eval_every, seed=0,
                               device=str(self.dev), checkpoint_dir=ckdir, progress=False, implementation=impl,
                               threads=1 if self.dev.type == "cpu" else None, **spec.options)
                took = time.time() - t0
                chunks += 1
                new = record["samples_seen"] - seen
                seen = record["samples_seen"]
                per_sample = max(took - overhead, took / 2) / max(new, 1)
                self.log(f"  {spec.key}: {seen:,} samples, test accuracy {record['test_metric']}, "
                         f"{new / took:.0f} samples/s this chunk")
                if record["status"] != "ok":
                    stop = "failed"
                    break
                if record["solved"]:
                    stop = "solved"
                    break
                if seen >= spec.sample_cap:
                    stop = "sample cap"
                    break
                self.emit("training_progress", "c", **base, samples_seen=seen, test_metric=record["test_metric"],
                          wall_time_s=record["wall_time_s"])
        except BaseException as exc:  # Stop, or an error: keep what the last checkpoint holds
            saved = load_checkpoint(checkpoint_path(ckdir))
            if saved is not None:
                c = saved["counters"]
                how = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"error: {type(exc).__name__}: {exc}"
                self.emit("training", "c", **base, status=how.split(":")[0], final=False, samples_seen=c["samples"],
                          samples_to_solve=c["samples_to_solve"], solved=c["samples_to_solve"] is not None,
                          history=c["history"], wall_time_s=c["wall_time"], stop=how,
                          note="from the last checkpoint")
            raise
        finally:
            shutil.rmtree(ckdir, ignore_errors=True)
        if record is None:
            self.emit("training", "c", **base, status="not run", final=True, stop=stop, samples_seen=0,
                      solved=False, note="not even one evaluation interval fitted")
            return f"not run ({stop})"
        keep = {k: record.get(k) for k in ("status", "error", "test_metric", "sequence_accuracy", "test_loss",
                                           "samples_seen", "samples_to_solve", "solved", "steps", "wall_time_s",
                                           "history", "params", "tensor_size", "lr", "seed", "forget_bias",
                                           "flush_denormal", "task_info")}
        rate = record["samples_seen"] / record["wall_time_s"] if record["wall_time_s"] else None
        self.emit("training", "c", **base, **keep, final=True, stop=stop, chunks=chunks, samples_per_s=rate,
                  samples_per_s_note="all samples seen over the run's whole wall time (model builds, CUDA-graph "
                                     "captures, evaluations and checkpoints included)")
        self.log(f"  {spec.key}: {stop} after {record['samples_seen']:,} samples "
                 f"({record['wall_time_s']:.0f} s, {rate or 0:.0f} samples/s)")
        return f"stopped: {stop}" + (" (budget)" if stop == "budget" else "")

    # -- part d --------------------------------------------------------------------------
    def regress_estimate(self) -> float:
        return regress_estimate(self.cost, self.cfg.regress_settings)

    def unit_regress(self) -> str:
        info = write_regress_baseline(self.out, str(self.dev), self.cfg.regress_settings)
        self.emit("baseline", "d", **info)
        self.log(f"  regress baseline written: {info['file']} ({', '.join(info['modes'])}); "
                 f"commit it as {info['install_as']}")
        return info["file"]

    # -- part e --------------------------------------------------------------------------
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
        self.emit("time_check", "e", command=" ".join(cmd[1:]), returncode=proc.returncode,
                  stderr=proc.stderr[-2000:], rows=pairs, agree_within=TIME_CHECK["agree_within"],
                  agree=bool(pairs) and all(p["agrees"] for p in pairs))
        for p in pairs:
            self.log(f"  {p['config']} L={p['depth']} {p['implementation']}: script {_fmt_ms(p['script_ms'])} ms, "
                     f"time {_fmt_ms(p['time_ms'])} ms, ratio script/time {_num(p['ratio'], '.3f')}")
        return None


def check_cost(impl: str, device: str) -> float:
    """Seconds one equivalence check takes (6 forward + backward passes at T = 7; a capture or a
    compilation for implementations that have one): a prior, for the plan."""
    if device != "cuda":
        return 0.1
    return {"fast": 0.15, "fused": 0.15, "wavefront": 0.15, INJECTED: 0.15, "cuda-graph": 0.8}.get(impl, 2.0)


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
    on = {"slstm": [n for n in implementations_of("slstm") if n not in ORACLE_CHAIN],
          "tlstm": [n for n in implementations_of("tlstm") if n not in ORACLE_CHAIN
                    and (device == "cuda" or n not in ("cuda-graph", "triton"))]}
    rows = [("start", "python, torch import, CUDA context, provenance", 10.0 if device == "cuda" else 4.0)]
    configs = [c for c in PRIORITY_CONFIGS if c != "slstm"]
    n_checks = len(configs) * len(cfg.check_depths) * len(cfg.dtypes)
    a = sum(check_cost(i, device) * len(cfg.check_depths) * len(cfg.dtypes) for i in on["slstm"])
    a += sum(check_cost(i, device) * (n_checks + 2) for i in on["tlstm"])
    a_row = ("a", f"checks of {', '.join(on['slstm'] + on['tlstm'])} + audit (capped at {cfg.a_share * budget_s:.0f} s)",
             min(cfg.a_share * budget_s, a + 8 * (1.5 if device == "cuda" else 0.5)))
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
    """(name, "cuda" | "cpu", activity type or None) per event; the raw kineto list when this torch
    has it (fast), else the parsed events."""
    try:
        events = prof.profiler.kineto_results.events()
        rows = []
        for e in events:
            dev = "cuda" if str(e.device_type()).upper().endswith("CUDA") else "cpu"
            activity = e.activity_type() if hasattr(e, "activity_type") else None
            rows.append((e.name(), dev, activity))
        return rows
    except Exception:  # noqa: BLE001 - another torch: fall back to the public, slower list
        return [(e.name, "cuda" if str(e.device_type).upper().endswith("CUDA") else "cpu", None)
                for e in prof.events()]


def install_wrong_implementation() -> None:
    """Test hook: ``wrong-test`` = ``fast`` with its outputs scaled by 1.01 (a plausible, wrong path)."""
    from tlstm_bench.models import TLSTM_IMPLEMENTATIONS
    from tlstm_bench.models.fast_tlstm import run_fast

    def run_wrong(model, z, state):
        h_out, new_state = run_fast(model, z, state)
        return h_out * 1.01, new_state

    TLSTM_IMPLEMENTATIONS[INJECTED] = run_wrong


def install_failing_implementation(seq_len: int) -> None:
    """Test hook: ``failing-test`` = ``fast``, except that a timed run (batch 1, T = the timing
    T) kills its process, as a sticky CUDA error or a segfault would: it passes part a and
    must then fail alone in part b."""
    from tlstm_bench.models import TLSTM_IMPLEMENTATIONS
    from tlstm_bench.models.fast_tlstm import run_fast

    def run_failing(model, z, state):
        if z.shape[0] == 1 and z.shape[1] == seq_len:
            os.kill(os.getpid(), signal.SIGKILL)
        return run_fast(model, z, state)

    TLSTM_IMPLEMENTATIONS[FAILING] = run_failing


def prepare_process(wrong: bool = False, failing: bool = False, seq_len: int = 0) -> None:
    """First thing in every process that builds models (the worker, measure_cases' workers, the
    graph-step checks): the same registries and the same float32 everywhere."""
    import importlib

    import torch

    for name in EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the worker records it (import_notes)
    # Plain float32 (cuDNN's RNN would otherwise use TF32 while the tLSTM's matmuls do not):
    # the comparison is between algorithms, not precisions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if wrong:
        install_wrong_implementation()
    if failing:
        install_failing_implementation(seq_len)


def rel_errors(got: dict, ref: dict) -> dict:
    """Name -> norm of the difference / norm of the reference (inf where missing or misshapen)."""
    errors = {}
    for name, r in ref.items():
        g = got.get(name)
        if r is None and g is None:
            continue
        if r is None or g is None or g.shape != r.shape:
            errors[name] = math.inf
            continue
        diff = float((g.double() - r.double()).norm())
        scale = float(r.double().norm())
        err = diff / scale if scale > 0 else diff
        errors[name] = err if math.isfinite(err) else math.inf
    return errors


def step_loss(run):
    """The loss of a StepRun's last call. A graphed step keeps it in its static output buffer;
    StepRun has no public name for it (yet), so it is read where tests/test_equivalence.py
    reads it. Any other step is recomputed (the same input, the same parameters)."""
    import torch

    last = getattr(run, "last_loss", None)
    if last is not None:
        return last.detach()
    step = getattr(run, "_step", None)
    if run.graphed and step is not None:
        return step.loss.detach()
    with torch.no_grad():
        return run.loss().detach()


def compare_graph_step(name: str, config: str, depth: int, opts: dict) -> dict:
    """``name`` (a graphed step) against ``eager`` as StepRuns in float64, same parameters
    (perturbed alike), on replay: new data copied into ``x`` and ``target`` after the capture."""
    import torch

    from tlstm_bench.timing import Case, StepRun

    dev = torch.device(opts["device"])

    def build(impl):
        return StepRun(Case(config, depth, impl), channels=opts["channels"], budget=None, vocab=opts["vocab"],
                       input_size=None, output_size=None, seq_len=opts["seq_len"], device=dev,
                       dtype=torch.float64, seed=opts["seed"])

    graphed, eager = build(name), build("eager")
    gen = torch.Generator().manual_seed(opts["seed"])
    with torch.no_grad():  # norm gains 1 / biases 0 would hide a swapped gain and bias
        for pg, pe in zip(graphed.model.parameters(), eager.model.parameters()):
            delta = (torch.randn(pg.shape, generator=gen, dtype=torch.float64) * 0.1).to(dev)
            pg.add_(delta)
            pe.add_(delta)
    graphed()  # the capture
    errors = {}
    for data in (1, 2):
        x = torch.randint(0, opts["vocab"], tuple(graphed.x.shape), generator=gen).to(dev)
        target = torch.randint(0, graphed.model.output_size, tuple(graphed.target.shape), generator=gen).to(dev)
        for run in (graphed, eager):
            run.x.copy_(x)
            run.target.copy_(target)
            run()
        got = {"loss": step_loss(graphed), **{f"grad {n}": g for n, g in graphed.gradients().items()}}
        ref = {"loss": step_loss(eager), **{f"grad {n}": g for n, g in eager.gradients().items()}}
        errors.update({f"{k} (replay {data})": e for k, e in rel_errors(got, ref).items()})
    return {"config": config, "depth": depth, "errors": errors,
            "passed": all(e <= opts["tolerance"] for e in errors.values())}


def context_broken(device: str) -> bool:
    """Whether this process's CUDA context is unusable (a sticky error); never on a CPU."""
    import torch

    if not device.startswith("cuda"):
        return False
    try:
        torch.ones(4, device=device).add_(1).sum().item()
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return True


def graph_check_process(conn, name: str, items: list, opts: dict, prepare) -> None:
    """A spawned process: ``compare_graph_step`` for each (config, depth), each result sent as
    it is measured; it stops at a UserError (not available) or a broken CUDA context."""
    try:
        prepare()
        from tlstm_bench.errors import UserError

        for config, depth in items:
            conn.send(("start", (config, depth)))
            try:
                result = compare_graph_step(name, config, depth, opts)
            except UserError as exc:
                conn.send(("unavailable", str(exc)))
                return
            except Exception as exc:  # noqa: BLE001 - this case failed; the parent records it
                result = {"config": config, "depth": depth, "passed": False,
                          "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"}
            conn.send(("result", result))
            if result.get("error") and context_broken(opts["device"]):
                return  # the parent starts a fresh process for the cases left
        conn.send(("done", None))
    finally:
        conn.close()


def run_graph_checks(name: str, items: list, opts: dict, timeout: float, prepare, tries: int = 3):
    """(results, None) or ([], why not available): ``graph_check_process`` in spawned processes,
    a new one for the cases left whenever one breaks (``tries`` processes at most)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold a CUDA context
    deadline, results, left = time.time() + timeout, [], list(items)
    for _ in range(tries):
        if not left:
            break
        conn, child = ctx.Pipe()
        proc = ctx.Process(target=graph_check_process, args=(child, name, left, opts, prepare), daemon=True)
        proc.start()
        child.close()
        current, status = None, "died"
        try:
            while conn.poll(max(0.0, deadline - time.time())):
                kind, payload = conn.recv()
                if kind == "start":
                    current = payload
                elif kind == "result":
                    results.append(payload)
                    left.remove((payload["config"], payload["depth"]))
                    current = None
                elif kind == "unavailable":
                    return [], payload
                else:
                    status = "done"
                    break
            else:
                status = "timeout"
        except (EOFError, OSError):
            pass  # the process died: its case fails, the rest go to a new process
        proc.join(5 if status != "timeout" else 0)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        conn.close()
        if status == "timeout":
            break
        if current is not None:
            why = f"the process died (exit code {proc.exitcode}) while checking this case"
            results.append({"config": current[0], "depth": current[1], "passed": False, "error": why})
            left.remove(current)
    results += [{"config": c, "depth": d, "passed": False, "error": "not checked: the checking processes broke "
                 "or ran out of time"} for c, d in left]
    return results, None


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


def worker_main(args) -> int:
    signal.signal(signal.SIGTERM, _raise_stop)
    log = Log(Path(args.out) / LOG, "worker")
    from tlstm_bench.errors import UserError

    try:
        worker = Worker(args)
        return worker.run()
    except UserError as exc:
        log(f"error: {exc}")
        return 2
    except Stop as exc:
        log(f"stopped ({exc}); everything measured so far is in {RECORDS}")
        return EXIT_STOPPED_TERM
    except KeyboardInterrupt:
        log("interrupted; everything measured so far is in the records")
        return EXIT_STOPPED_INT
    except Exception as exc:  # noqa: BLE001 - logged for the supervisor, which decides
        log(f"worker error: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        return 1


# ---------------------------------------------------------------------------- summary (no torch)
def _num(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def _fmt_ms(ms) -> str:
    return "-" if ms is None else f"{ms:.4f}" if ms < 0.1 else f"{ms:.3f}"


def _latest(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["kind"] == kind]


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


def summary_markdown(records: list[dict], status: str) -> str:
    header = next((r for r in records if r["kind"] == "header"), None)
    prov = header["provenance"] if header else (records[-1]["provenance"] if records else {})
    settings = header["settings"] if header else {}
    tol = settings.get("fingerprint_tolerance", 5e-3)
    end = next((r for r in reversed(records) if r["kind"] == "end"), {})
    timings = _latest(records, "timing")
    invalid = final_invalidations(timings, tol)
    units = _latest(records, "unit")
    out = ["# GPU evidence run" + (" (CPU dry run)" if header and header.get("tiny") else ""), ""]
    stopped = {"complete": "complete: every unit ran",
               "budget": "STOPPED BY THE TIME BUDGET: the units listed under 'Not run' were cut",
               "interrupted": "INTERRUPTED (signal): partial results",
               "crashed": "a worker CRASHED and could not be restarted: partial results",
               "error": "ERROR before any measurement (see log.txt)"}.get(status, status)
    out += [f"- status: **{stopped}**; {end.get('elapsed_s', '?')} s of a {end.get('budget_s', '?')} s budget",
            f"- device: {prov.get('gpu_name') or prov.get('device_name')} ({prov.get('device')}), driver "
            f"{prov.get('driver_version')}, capability {prov.get('gpu_capability')}",
            f"- torch {prov.get('torch_version')}, CUDA {prov.get('cuda_version')}, cuDNN {prov.get('cudnn_version')}, "
            f"triton {prov.get('triton_version')}, TF32 matmul/cuDNN {prov.get('allow_tf32_matmul')}/"
            f"{prov.get('allow_tf32_cudnn')}",
            f"- commit {prov.get('git_commit')} ({prov.get('commit_source')}; dirty {prov.get('git_dirty')}), "
            f"code hash {prov.get('code_hash')}",
            f"- arguments: `{' '.join(prov.get('argv', []))}`", ""]

    # part a
    out += ["## a. Correctness on the device", ""]
    for r in _latest(records, "implementation"):
        state = {True: "available", False: "not available", "broken": "BROKEN"}.get(r["available"], r["available"])
        out.append(f"- `{r['impl']}` ({r['family']}): {state}" + (f" ({r['reason']})" if r.get("reason") else ""))
    checks = _latest(records, "check")
    if checks:
        out += ["", "| implementation | check | dtype | passed / run | worst relative error | tolerance |",
                "|---|---|---|---|---|---|"]
        groups: dict = {}
        for c in checks:
            groups.setdefault((c["impl"], c["check"], c["dtype"]), []).append(c)
        for (impl, check, dtype), cs in groups.items():
            ran = [c for c in cs if c["passed"] is not None]
            if not ran:
                out.append(f"| `{impl}` | {check} | {dtype} | unsupported | - | - |")
                continue
            worst = max(ran, key=lambda c: c["max_rel_error"] if c["max_rel_error"] is not None else math.inf)
            err = worst["max_rel_error"]
            out.append(f"| `{impl}` | {check} | {dtype} | {sum(c['passed'] is True for c in ran)} / {len(ran)} | "
                       f"{_num(err, '.2e', 'inf/NaN')} ({worst['config']} L={worst['depth']}: "
                       f"{worst['worst']}) | {worst['tolerance']:.0e} |")
        failed = [c for c in checks if c["passed"] is False]
        for c in failed[:12]:
            what = c.get("error") or f"{c['worst']} off by {_num(c['max_rel_error'], '.3g', 'inf/NaN')}"
            out.append(f"- FAILED: `{c['impl']}` {c['check']} {c['config']} L={c['depth']} {c['dtype']}: {what}"
                       + ("" if c.get("affects_timing") else " (does not affect the timings)"))
        if len(failed) > 12:
            out.append(f"- ... and {len(failed) - 12} more failed checks (records.jsonl, kind 'check')")
        for c in [c for c in checks if c["passed"] is None]:
            out.append(f"- unsupported: `{c['impl']}` {c['config']} L={c['depth']} {c['dtype']}: "
                       f"{c.get('unsupported')}")
    audits = _latest(records, "audit")
    if audits:
        out += ["", "Separability audit on the device: " + "; ".join(
            f"{a['config']} L={a['depth']} {a['implementation']}: {a['verdict']}" for a in audits)]
    out.append("")

    # part b
    for size, title in (("m100", "M = 100"), ("wiki", "the Wikipedia size (10M parameters, 205 symbols)")):
        lines, cells = timing_table(timings, size, invalid)
        if not lines:
            continue
        first = next(r for r in timings if r["size"] == size)
        out += [f"## b. Runtime at {title}", "",
                f"ms per timestep, forward + loss + backward, batch 1, T = {first['seq_len']}, {first['dtype']}, "
                f"median of interleaved repeats ({first['clock']}); in brackets: "
                f"{first.get('launch_unit') or 'launches per timestep'}. INVALID: the implementation failed a "
                "check (see part a and the records' invalid_reason).", ""] + lines + [""]
    out += targets_section(timings, invalid, records)
    # part c
    trains = [r for r in records if r["kind"] == "training"]
    if trains:
        out += ["## c. Training", "", "| run | config | L | M | implementation | solved | samples to solve | paper | "
                "samples seen | test accuracy | samples/s | wall s | stop |", "|" + "---|" * 13]
        for r in trains:
            paper = f"{r['paper_samples']:,}" if r.get("paper_samples") else "-"
            solve = f"{r['samples_to_solve']:,}" if r.get("samples_to_solve") else "-"
            acc = r.get("test_metric")
            out.append(f"| {r['key']} | `{r['config']}` | {r['depth']} | {r['channels']} | {r['implementation']} | "
                       f"{'yes' if r.get('solved') else 'no'} | {solve} | {paper} | {r.get('samples_seen') or 0:,} | "
                       f"{_num(acc, '.3f')} | {_num(r.get('samples_per_s'), '.0f')} | "
                       f"{_num(r.get('wall_time_s'), '.0f')} | {r.get('stop')} |")
        out.append("")
    # part d
    for b in _latest(records, "baseline"):
        out += ["## d. Regress baseline", "",
                f"`{b['file']}` ({b['device_kind']}; modes {', '.join(b['modes'])}): copy it to "
                f"`{b['install_as']}` to gate `tlstm-bench regress --device "
                f"{'cpu' if b['device_kind'] == 'cpu' else 'cuda'}`.", ""]
    out += time_check_section(records)
    failed = _latest(records, "timing_error")
    if failed:
        out += ["## Timing failures (each contained to its implementation)", ""] + [
            f"- {r['size']} `{r['config']}` L={r['depth']} {r['implementation']}: {r['error']}" for r in failed[:20]]
        out += ([f"- ... and {len(failed) - 20} more (records.jsonl, kind 'timing_error')"] if len(failed) > 20
                else []) + [""]
    if invalid:
        out += ["## Invalidated at the end of the run", ""] + [
            f"- {k[0]} `{k[1]}` L={k[2]} {k[3]}: {v}" for k, v in invalid.items()] + [""]
    cut = [u for u in units if u["status"] != "done"]
    if cut:
        out += ["## Not run, cut short, or failed", ""] + [
            f"- {u['unit']}: {u['status']}" + (f" ({u.get('note') or u.get('error')})" if (u.get('note') or
                                                                                           u.get('error')) else "")
            for u in cut] + [""]
    partial = [u for u in units if u["status"] == "done" and u.get("note") and "budget" in str(u["note"])]
    if partial:
        out += ["Units cut short by the budget: " + "; ".join(f"{u['unit']} ({u['note']})" for u in partial), ""]
    return "\n".join(out)


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
    """Issue 8's targets, each met / NOT met / not measured, with the numbers behind it."""
    out = ["## Targets (issue 8)", ""]

    def ok(r):
        return r.get("valid") and (r["size"], r["config"], r["depth"], r["implementation"]) not in invalid

    m100 = [r for r in timings if r["size"] == "m100" and ok(r)]
    depths = sorted({r["depth"] for r in m100})
    checks = [c for c in records if c["kind"] == "check" and c["impl"] == "cuda-graph" and c["dtype"] == "float64"
              and c["check"] == "equivalence"]
    if checks:
        configs = sorted({c["config"] for c in checks})
        worst = max((c["max_rel_error"] if c["max_rel_error"] is not None else math.inf) for c in checks)
        verdict = "met" if all(c["passed"] is True for c in checks) and len(configs) == 6 else "NOT met"
        out.append(f"- `cuda-graph` agrees with `eager` on the device, float64, every configuration: {verdict} "
                   f"({len(configs)} configurations checked, worst relative error {worst:.1e})")
    else:
        out.append("- `cuda-graph` agrees with `eager` (float64): not measured")
    if len(depths) >= 2:
        lo, hi = depths[0], depths[-1]
        for config in PRIORITY_CONFIGS:
            if config == "slstm":
                continue
            best = _best_curve(m100, config, lo, hi)
            if best is None:
                out.append(f"- `{config}` t(L={hi})/t(L={lo}) <= 1.25 with the best implementation: not measured")
                continue
            impl, r_lo, r_hi = best
            ratio = r_hi["ms_per_step"] / r_lo["ms_per_step"]
            out.append(f"- `{config}` t(L={hi})/t(L={lo}) <= 1.25 ({impl}): {'met' if ratio <= 1.25 else 'NOT met'} "
                       f"({ratio:.2f}; {_why(r_lo)} at L={lo}, {_why(r_hi)} at L={hi})")
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
            out.append(f"- 2D tLSTM at M={b['channels']}, L={hi} <= 50 us per timestep ({b['implementation']}): "
                       f"{'met' if us <= 50 else 'NOT met'} ({us:.1f} us; {_why(b)})")
    by = {(r["size"], r["config"], r["depth"], r["implementation"]): r for r in timings}
    hidden = [k for k, r in by.items() if k[3] == "cuda-graph" and r.get("kernels_per_step") is not None
              and (k[:3] + ("fast",)) in by and by[k[:3] + ("fast",)].get("kernels_per_step")
              and r["kernels_per_step"] < 0.5 * by[k[:3] + ("fast",)]["kernels_per_step"]]
    if hidden:
        out.append(f"- note: for {len(hidden)} case(s) the profiler counted far fewer kernels for `cuda-graph` than "
                   "for `fast` (the same kernels): it may not see kernels launched inside a CUDA graph, so "
                   "cuda-graph's kernel counts are a lower bound")
    for key, paper in PAPER_SAMPLES.items():
        runs = [r for r in records if r["kind"] == "training" and r["key"] == f"{key}-3d-cn"]
        if not runs:
            out.append(f"- {key}: 3d-cn solved within {TARGET_FACTOR}x the paper's {paper:,} samples: not measured")
            continue
        r = runs[-1]
        if r.get("paper_samples") is None:
            out.append(f"- {key}: dry-run sizes, no paper comparison")
            continue
        if r.get("solved"):
            s = r["samples_to_solve"]
            out.append(f"- {key}: 3d-cn solved after {s:,} samples vs the paper's {paper:,} ({s / paper:.2f}x): "
                       f"{'met' if s <= TARGET_FACTOR * paper else 'NOT met'}")
        else:
            out.append(f"- {key}: 3d-cn NOT solved within its cap ({r.get('samples_seen') or 0:,} samples, test "
                       f"accuracy {r.get('test_metric')}, stop: {r.get('stop')}); the paper needed {paper:,}")
    out.append("")
    return out


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


def draw_figures(out: Path, records: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    header = next((r for r in records if r["kind"] == "header"), None)
    tol = (header or {}).get("settings", {}).get("fingerprint_tolerance", 5e-3)
    timings = [r for r in records if r["kind"] == "timing"]
    invalid = final_invalidations(timings, tol)
    device = (header or {}).get("provenance", {}).get("gpu_name") or (header or {}).get("provenance", {}).get(
        "device_name", "?")
    for size, title in (("m100", "M = 100"), ("wiki", "10M parameters")):
        rows = [r for r in timings if r["size"] == size]
        if not rows:
            continue
        configs = [c for c in PRIORITY_CONFIGS if any(r["config"] == c for r in rows)]
        fig, axes = plt.subplots(2, 4, figsize=(16, 7.5), sharex=True)
        axes = axes.ravel()
        best_ax = axes[0]
        for ax, config in zip(axes[1:], configs):
            for impl in sorted({r["implementation"] for r in rows if r["config"] == config}):
                rs = sorted((r for r in rows if r["config"] == config and r["implementation"] == impl),
                            key=lambda r: r["depth"])
                good = all(r.get("valid") and (size, config, r["depth"], impl) not in invalid for r in rs)
                ax.plot([r["depth"] for r in rs], [r["ms_per_step"] for r in rs], marker="o",
                        linestyle="-" if good else ":", color=None if good else "grey",
                        label=impl + ("" if good else " (INVALID)"))
            ax.set_title(config)
            ax.set_yscale("log")
            ax.legend(fontsize=7)
        for config in configs:
            rs = [r for r in rows if r["config"] == config and r.get("valid")
                  and (size, config, r["depth"], r["implementation"]) not in invalid]
            impls = {r["implementation"] for r in rs}
            for impl in (impls if config == "slstm" else
                         [min(impls, key=lambda i: sum(r["ms_per_step"] for r in rs if r["implementation"] == i))]
                         if impls else []):
                curve = sorted((r for r in rs if r["implementation"] == impl), key=lambda r: r["depth"])
                best_ax.plot([r["depth"] for r in curve], [r["ms_per_step"] for r in curve], marker="o",
                             label=f"{config} ({impl})")
        best_ax.set_title("fastest valid implementation")
        best_ax.set_yscale("log")
        best_ax.legend(fontsize=7)
        depths = sorted({r["depth"] for r in rows})
        for ax in axes:
            ax.set_xlabel("depth L")
            ax.set_xticks(depths)
        for ax in (axes[0], axes[4]):
            ax.set_ylabel("ms per timestep (fwd+bwd, batch 1)")
        for ax in axes[len(configs) + 1:]:
            ax.axis("off")
        fig.suptitle(f"runtime vs depth at {title}, {device}")
        fig.tight_layout()
        fig.savefig(out / FIGURES[size], dpi=110)
        plt.close(fig)
    trains = [r for r in records if r["kind"] == "training" and r.get("history")]
    if trains:
        fig, ax = plt.subplots(figsize=(8, 5))
        for r in trains:
            hist = r["history"]
            ax.plot([h["samples"] for h in hist], [h["metric"] for h in hist], marker=".",
                    label=f"{r['key']} L={r['depth']} ({r['implementation']})")
        for key, paper in PAPER_SAMPLES.items():
            if any(r["task"] == key and r.get("paper_samples") for r in trains):
                ax.axvline(paper, linestyle=":", color="grey")
                ax.text(paper, 0.02, f" paper {key}", rotation=90, fontsize=7, color="grey")
        ax.set_xlabel("training samples")
        ax.set_ylabel("test symbol accuracy")
        ax.set_title(f"training on {device}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / FIGURES["training"], dpi=110)
        plt.close(fig)


# ---------------------------------------------------------------------------- command line
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", help="folder for the (at most 8) output files; must be empty or new")
    ap.add_argument("--budget-s", type=float, default=420.0, help="wall-clock budget of the whole run, seconds")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--tiny", action="store_true", help="CPU dry-run sizes (well under a minute)")
    ap.add_argument("--commit", default=os.environ.get("TLSTM_BENCH_COMMIT"),
                    help="the commit to record where git is absent (the device copy has no .git)")
    ap.add_argument("--print-code-hash", action="store_true", help="print the code hash recorded in runs and exit")
    ap.add_argument("--plan", action="store_true", help="print the plan with its prior time estimates and exit")
    ap.add_argument("--skip", default="", help="comma-separated steps to leave out (a second run after a cut "
                    "one): b1, b1x, b2, b2x, b3, b4, b5, c:<run>, d, e; part a cannot be skipped: a run's timings "
                    "are valid only with its own correctness checks")
    ap.add_argument("--test-inject-wrong", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--test-inject-failing", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--test-crash-unit", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--test-stop-after-units", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--state-file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.budget_s <= 0:
        ap.error("--budget-s must be > 0")
    if not (args.out or args.plan or args.print_code_hash):
        ap.error("--out is required")
    steps = make_settings(args.tiny).order
    args.skip = [s.strip() for s in args.skip.split(",") if s.strip()]
    unknown = [s for s in args.skip if s not in steps or s == "a"]
    if unknown:
        ap.error(f"--skip: cannot skip {', '.join(unknown)}; steps are {', '.join(s for s in steps if s != 'a')}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.print_code_hash:
        print(code_hash())
        return 0
    if args.plan:
        print_plan(args.device, args.tiny, args.budget_s, args.skip)
        return 0
    if args.worker:
        if args.deadline is None:
            args.deadline = START_WALL + args.budget_s
        RUN_START[0] = args.deadline - args.budget_s
        return worker_main(args)
    return supervise(args)


if __name__ == "__main__":
    sys.exit(main())
