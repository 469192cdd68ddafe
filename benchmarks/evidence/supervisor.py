"""The supervisor: never imports torch; starts the worker, restarts it when it dies, and
writes the summary and figures from the records whatever happened."""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .common import EXIT_CRASHED, EXIT_CUDA_BROKEN, EXIT_STOPPED_INT, EXIT_STOPPED_TERM, LOG, MAX_FILES, RECORDS, \
    ROOT, SCRIPT, START_WALL, SUMMARY, Log, Records, read_records
from .figures import draw_figures
from .provenance import code_provenance, script_args, supervisor_argv
from .summary import summary_markdown


def supervise(args) -> int:
    """Run workers until the plan is done, the budget is spent or a signal came; then finalize."""
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"error: --out {out} is not empty; give an empty or new folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / LOG, "supervisor")
    deadline = START_WALL[0] + args.budget_s
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
    env, cmd = _worker_command(args, deadline, state_file)
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
        stopped_at = _watch(child, holder, deadline + grace, log)
        status, crashes = _outcome(out, args, child.returncode, Path(state_file).read_text().strip(), holder,
                                   stopped_at, crashes, deadline, log)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Path(state_file).unlink(missing_ok=True)
    finalize(out, args, status, crashes, log)
    if status == "interrupted":
        return EXIT_STOPPED_INT if holder["signal"] == signal.SIGINT else EXIT_STOPPED_TERM
    if status == "error":
        return 2
    return EXIT_CRASHED if crashes else 0


def _worker_command(args, deadline: float, state_file: str) -> tuple[dict, list[str]]:
    """The worker's environment and command line: this script with --worker."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if args.device == "cpu" and args.tiny and importlib.util.find_spec("triton") is not None:
        # The CPU dry run exercises the triton implementation too (issue 9), through Triton's
        # interpreter: it must be switched on before the worker defines the kernels.
        env["TRITON_INTERPRET"] = "1"
    cmd = [sys.executable, str(SCRIPT), *sys.argv[1:], "--worker", "--deadline", repr(deadline),
           "--state-file", state_file]
    return env, cmd


def _watch(child, holder: dict, hard_stop: float, log) -> float | None:
    """Wait for the worker; SIGTERM it at the hard stop, SIGKILL it 15 s after any SIGTERM.
    Returns when the hard stop made it stop (None if it did not)."""
    stopped_at = None
    while child.poll() is None:
        try:
            child.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        if stopped_at is None and now > hard_stop:
            log("the hard stop passed with the worker still running: stopping it")
            child.send_signal(signal.SIGTERM)
            stopped_at = now
        asked = min(t for t in (stopped_at, holder["signal_at"], math.inf) if t is not None)
        if now > asked + 15 and child.poll() is None:
            child.kill()  # it did not stop within 15 s of SIGTERM (stuck in a device call)
    return stopped_at


def _outcome(out: Path, args, rc: int, unit: str, holder: dict, stopped_at, crashes: int, deadline: float,
             log) -> tuple[str | None, int]:
    """(status, crashes) after a worker ended; status None: start a new worker."""
    late = deadline - time.time() < (10 if args.tiny else 30)
    if holder["signal"] is not None:
        return "interrupted", crashes
    if rc == 2:
        return "error", crashes  # bad input the worker reported (e.g. --device cuda without CUDA): no restart
    if rc == 0:
        ends = [r for r in read_records(out / RECORDS) if r["kind"] == "worker_end"]
        return (ends[-1]["status"] if ends else "complete"), crashes
    if stopped_at is not None:
        return "budget", crashes
    crashes += 1
    if rc == EXIT_CUDA_BROKEN:  # the worker recorded the unit that broke the context; a fresh one goes on
        log("the worker's CUDA context broke; starting a new worker, which skips every finished unit")
        return ("crashed" if crashes > 3 or late else None), crashes
    unit = unit or "(before the first unit)"
    how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
    Records(out / RECORDS, _provenance_from(out, args)).write("unit", unit[0] if unit[0] in "abcde" else "-",
                                                              unit=unit, status="crashed", note=f"worker died: {how}")
    log(f"the worker died ({how}) in unit {unit}")
    if crashes > 3 or unit.startswith("(") or late:
        return "crashed", crashes  # died before any unit (would die again), too often, or too late
    log("starting a new worker; it skips every finished unit")
    return None, crashes


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
                                       elapsed_s=round(time.time() - START_WALL[0], 1), budget_s=args.budget_s,
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
