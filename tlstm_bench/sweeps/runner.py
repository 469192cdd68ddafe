"""Plan and run a sweep: skip what is done, claim each cell, run it in its own process.

Rules (docs/sweeps.md, "Resuming and running twice", says the same):

* A cell is **done** when its record exists: ``ok`` records are never rerun; ``failed``
  records are not rerun either (a deterministic failure would fail again) unless
  ``retry_failed``, and they still count as failures in the summary and the exit code.
* Before running a cell the runner **claims** it with a lock file (:mod:`.lock`); a cell
  claimed by a live process elsewhere (another sweep, a SLURM job) is left to it.
  After claiming, the runner looks for the record again, so a cell finished by another
  sweep between planning and claiming is not run twice.
* Each cell runs in a **subprocess** with a timeout (``python -m tlstm_bench.sweeps.cell``):
  a crash, a NaN or a hang fails that cell only. Interrupting the sweep kills the running
  cells and leaves them undone (no record), so the next run does them again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import UserError
from . import lock as locks
from .cell import DEFAULT_CELL_FN, cell_to_json, make_record
from .grid import Cell

LOG_TAIL = 400
# Exit codes of a cell process that was interrupted (Ctrl-C, SIGTERM, scancel), not failed: the
# cell is left undone, without a record, and the next run does it again.
INTERRUPTED = (130, 143, -signal.SIGINT, -signal.SIGTERM)


def record_path(root: Path, cell: Cell) -> Path:
    return Path(root) / cell.sweep / f"{cell.id}.json"


def read_status(root: Path, cell: Cell) -> str | None:
    """``"ok"``, ``"failed"`` or None (no record)."""
    path = record_path(root, cell)
    try:
        return json.loads(path.read_text()).get("status", "failed")
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "failed"


def cell_state(root: Path, cell: Cell) -> str:
    """done | failed | running | todo."""
    status = read_status(root, cell)
    if status == "ok":
        return "done"
    if status is not None:
        return "failed"
    return "running" if locks.holder(root, cell.sweep, cell.id) else "todo"


@dataclass
class Outcome:
    cell: Cell
    state: str  # "ok" | "failed" | "skipped-done" | "skipped-failed" | "taken" (elsewhere) | "interrupted"
    error: str | None = None
    wall_time_s: float = 0.0
    record: dict | None = None


@dataclass
class Summary:
    sweep: str
    planned: int
    outcomes: list[Outcome] = field(default_factory=list)
    wall_time_s: float = 0.0
    interrupted: bool = False

    def count(self, *states: str) -> int:
        return sum(o.state in states for o in self.outcomes)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.state in ("failed", "skipped-failed")]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.failures else 0


def _log_path(root: Path, cell: Cell) -> Path:
    return Path(root) / cell.sweep / ".logs" / f"{cell.id}.log"


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][-LOG_TAIL:] if lines else ""


class _Stop:
    """Set when the sweep is interrupted: running cells are killed and left undone."""

    def __init__(self):
        self.event = threading.Event()
        self.procs: set[subprocess.Popen] = set()
        self.lock = threading.Lock()

    def kill_all(self):
        self.event.set()
        with self.lock:
            for proc in list(self.procs):
                try:
                    proc.kill()
                except OSError:
                    pass


def run_one(cell: Cell, root: "str | Path", *, cell_fn: str = DEFAULT_CELL_FN, retry_failed: bool = False,
            stop: _Stop | None = None, env: dict | None = None) -> Outcome:
    """Claim one cell, run it in a subprocess with its timeout, make sure it leaves a record.

    The same function runs inside a SLURM job (submitit pickles it), so the resume and
    no-duplicate rules hold for cluster jobs too.
    """
    root = Path(root)
    status = read_status(root, cell)
    if status == "ok" or (status is not None and not retry_failed):
        return Outcome(cell, "skipped-done" if status == "ok" else "skipped-failed")
    claim = locks.claim(root, cell.sweep, cell.id, timeout_s=cell.timeout_s)
    if claim is None:
        return Outcome(cell, "taken")
    try:
        status = read_status(root, cell)  # finished elsewhere while we planned?
        if status == "ok" or (status is not None and not retry_failed):
            return Outcome(cell, "skipped-done" if status == "ok" else "skipped-failed")
        if stop is not None and stop.event.is_set():
            return Outcome(cell, "interrupted")
        log = _log_path(root, cell)
        log.parent.mkdir(parents=True, exist_ok=True)
        result_path = log.with_suffix(f".{os.getpid()}.result.json")
        result_path.unlink(missing_ok=True)
        start = time.monotonic()
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "tlstm_bench.sweeps.cell", "--root", str(root),
                                     "--out", str(result_path), "--fn", cell_fn], stdin=subprocess.PIPE,
                                    stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
            claim.add_child(proc.pid)
            if stop is not None:
                with stop.lock:
                    stop.procs.add(proc)
                if stop.event.is_set():
                    proc.kill()
            error = None
            try:
                proc.communicate(cell_to_json(cell), timeout=cell.timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                error = f"timed out after {cell.timeout_s:g} s (the spec's timeout_s)"
            finally:
                if stop is not None:
                    with stop.lock:
                        stop.procs.discard(proc)
        wall = time.monotonic() - start
        if proc.returncode in INTERRUPTED or (stop is not None and stop.event.is_set() and proc.returncode != 0):
            return Outcome(cell, "interrupted", wall_time_s=wall)  # no record: the next run does it again
        result = None
        if error is None and proc.returncode == 0:
            try:
                outcome = json.loads(result_path.read_text())
                result, error = outcome.get("result"), outcome.get("error")
            except (OSError, ValueError) as exc:
                error = f"the cell process left no readable result ({exc})"
        elif error is None:
            code = proc.returncode
            how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            tail = _tail(log)
            error = f"cell process {how}" + (f": {tail}" if tail else "")
        result_path.unlink(missing_ok=True)
        if log.stat().st_size == 0:
            log.unlink()
        from ..results import write_record

        record = make_record(cell, result, error=error, wall_time_s=wall)
        write_record(record, cell.sweep, root=root, record_id=cell.id)
        if record["status"] == "ok":  # a finished cell needs no checkpoint to resume from
            shutil.rmtree(Path(root) / cell.sweep / ".checkpoints" / cell.id, ignore_errors=True)
        return Outcome(cell, record["status"], record.get("error"), wall, record)
    finally:
        claim.release()


def _describe(outcome: Outcome) -> str:
    rec = outcome.record or {}
    if outcome.state != "ok":
        return outcome.error or outcome.state
    if outcome.cell.kind == "runtime" and rec.get("ms_per_step") is not None:
        return f"{rec['ms_per_step']:.3f} ms/step, M={rec.get('channels')}"
    if rec.get("test_metric") is not None:
        solved = rec.get("samples_to_solve")
        extra = f", solved after {solved:,} samples" if solved else ""
        return f"test {rec.get('metric')} {rec['test_metric']:.4g}, M={rec.get('channels')}{extra}"
    return "ok"


def run_local(cells: list[Cell], root: Path, *, jobs: int = 1, cell_fn: str = DEFAULT_CELL_FN,
              retry_failed: bool = False, console=None, env: dict | None = None,
              on_outcome: Callable[[Outcome], None] | None = None) -> tuple[list[Outcome], bool]:
    """Run cells with ``jobs`` at once on this machine; returns (outcomes, interrupted)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    stop = _Stop()
    outcomes: list[Outcome] = []
    counts: Counter = Counter()
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), TextColumn("ETA"),
                        TimeRemainingColumn(), console=console, transient=False)
    task = progress.add_task("cells", total=len(cells), status="")
    running = [0]

    def status_text() -> str:
        return (f"[green]done {counts['ok'] + counts['skipped-done']}[/] · [yellow]running {running[0]}[/] · "
                f"[red]failed {counts['failed'] + counts['skipped-failed']}[/]")

    def work(cell: Cell) -> Outcome:
        running[0] += 1
        progress.update(task, status=status_text())
        try:
            return run_one(cell, root, cell_fn=cell_fn, retry_failed=retry_failed, stop=stop, env=env)
        finally:
            running[0] -= 1

    old_term = None
    if threading.current_thread() is threading.main_thread():
        def on_term(signum, frame):
            raise KeyboardInterrupt
        old_term = signal.signal(signal.SIGTERM, on_term)
    interrupted = False
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        with progress:
            pending = {pool.submit(work, cell) for cell in cells}
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    outcome = future.result()
                    outcomes.append(outcome)
                    counts[outcome.state] += 1
                    progress.advance(task)
                    if outcome.state in ("ok", "failed"):
                        mark = "[green]ok[/]" if outcome.state == "ok" else "[red]FAILED[/]"
                        progress.console.print(f"{mark} {outcome.cell.label()} ({outcome.wall_time_s:.1f} s): "
                                               f"{_describe(outcome)}", highlight=False)
                    if on_outcome:
                        on_outcome(outcome)
                progress.update(task, status=status_text())
    except KeyboardInterrupt:
        interrupted = True
        stop.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
    finally:
        pool.shutdown(wait=True)
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    return outcomes, interrupted


@dataclass
class SlurmOptions:
    partition: str | None = None
    gpus_per_job: int = 0
    time_limit_min: int = 60
    array_parallelism: int = 32
    cpus_per_job: int | None = None
    cluster: str = "slurm"        # "slurm", or "local" (submitit's LocalExecutor: real subprocesses)
    folder: Path | None = None


# squeue states of a job SLURM no longer runs (a job squeue has forgotten has ended too).
_ENDED = ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
          "TIMEOUT")
# A job that ended without leaving submitit its result file is dead only after this long: a
# shared filesystem may show the file late (submitit itself waits 15 s for it).
DEAD_JOB_GRACE_S = 15.0
SQUEUE_EVERY_S = 10.0


def _slurm_states(job_name: str) -> dict[str, str] | None:
    """Job id (``123_4``) -> squeue state of the jobs named ``job_name``; None if squeue does not answer.

    submitit learns that a job ended without a result (killed by its time limit, the OOM
    killer, a node failure, scancel) only from ``sacct``, which needs an accounting database
    that small clusters and CI lack: without this check the sweep would wait forever."""
    try:
        out = subprocess.run(["squeue", "--noheader", "--array", "--states=all", f"--name={job_name}",
                              "--format=%i %T"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return {words[0]: words[1] for words in map(str.split, out.stdout.splitlines()) if len(words) >= 2}


def _job_failed(cell: Cell, root: Path, job_id: str | None, error: str) -> Outcome:
    """The job died before its cell finished: record the cell as failed, unless the job wrote a record."""
    from ..results import write_record

    if read_status(root, cell) is not None:  # it died after writing the cell's record
        try:
            record = json.loads(record_path(root, cell).read_text())
        except (OSError, ValueError):
            record = {}
        ok = record.get("status") == "ok"
        return Outcome(cell, "ok" if ok else "failed", None if ok else record.get("error", error), record=record)
    record = make_record(cell, error=error)
    record["slurm_job_id"] = job_id
    write_record(record, cell.sweep, root=root, record_id=cell.id)
    return Outcome(cell, "failed", error, record=record)


def run_submitit(cells: list[Cell], root: Path, options: SlurmOptions, *, cell_fn: str = DEFAULT_CELL_FN,
                 retry_failed: bool = False, console=None, poll_s: float = 2.0) -> tuple[list[Outcome], bool]:
    """Submit every cell as one job of a SLURM array (submitit) and wait for them.

    Each job runs :func:`run_one` on its node: it claims the cell, runs it in a subprocess
    and writes its record into the same store, so resuming and concurrent sweeps behave as
    with the local executor. The store must be on a filesystem the nodes share.
    """

    try:
        import submitit
    except ImportError:
        raise UserError("the slurm executor needs submitit: pip install 'tlstm-bench[cluster]'") from None
    if options.cluster == "slurm" and shutil.which("sbatch") is None:
        raise UserError("--executor slurm needs a SLURM cluster (no sbatch on PATH); "
                        "run on a login node, or use --executor local")
    todo, outcomes = [], []
    for cell in cells:
        status = read_status(root, cell)
        if status == "ok" or (status is not None and not retry_failed):
            outcomes.append(Outcome(cell, "skipped-done" if status == "ok" else "skipped-failed"))
        elif locks.holder(root, cell.sweep, cell.id):  # a job of an earlier submission still runs it
            outcomes.append(Outcome(cell, "taken"))
        else:
            todo.append(cell)
    if not todo:
        return outcomes, False
    folder = options.folder or Path(root) / cells[0].sweep / ".submitit"
    job_name = f"tlstm-{cells[0].sweep}"
    timeout_min = max(options.time_limit_min, int(max(c.timeout_s for c in todo) / 60) + 2)
    if options.cluster == "local":
        executor = submitit.LocalExecutor(folder=folder)
        executor.update_parameters(timeout_min=timeout_min, gpus_per_node=options.gpus_per_job)
    else:
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
        params = {"timeout_min": timeout_min, "nodes": 1, "tasks_per_node": 1,
                  "slurm_array_parallelism": options.array_parallelism, "name": job_name}
        if options.gpus_per_job:  # no --gpus-per-node at all on clusters without GPUs
            params["gpus_per_node"] = options.gpus_per_job
        if options.partition:
            params["slurm_partition"] = options.partition
        if options.cpus_per_job:
            params["cpus_per_task"] = options.cpus_per_job
        executor.update_parameters(**params)
    root_abs = Path(root).resolve()
    with executor.batch():
        jobs = [executor.submit(run_one, cell, root_abs, cell_fn=cell_fn, retry_failed=retry_failed)
                for cell in todo]
    out = console.print if console is not None else print
    out(f"submitted {len(jobs)} jobs ({options.cluster}); job ids {jobs[0].job_id} ... {jobs[-1].job_id}; "
        f"logs in {folder}")
    slurm_id = (lambda job: job.job_id) if options.cluster == "slurm" else (lambda job: None)
    interrupted = False
    ended: dict[str, tuple[float, str]] = {}   # job id -> when squeue first said it ended (no result yet), how
    states, last_squeue = None, float("-inf")
    try:
        remaining = list(zip(todo, jobs))
        while remaining:
            if options.cluster == "slurm" and time.monotonic() - last_squeue >= SQUEUE_EVERY_S:
                states, last_squeue = _slurm_states(job_name), time.monotonic()
            for cell, job in list(remaining):
                if job.done():
                    try:
                        outcome = job.result()
                    except Exception as exc:  # noqa: BLE001 - the job died: the cell fails, the sweep goes on
                        from .cell import one_line

                        outcome = _job_failed(cell, root, slurm_id(job), f"job {job.job_id} failed: {one_line(exc)}")
                else:
                    state = None if states is None else states.get(job.job_id, "forgotten by squeue")
                    if state is None or not (state in _ENDED or state.startswith("forgotten")):
                        continue
                    since, state = ended.setdefault(job.job_id, (time.monotonic(), state))
                    if time.monotonic() - since < DEAD_JOB_GRACE_S:
                        continue
                    log = folder / f"{job.job_id}_0_log.err"
                    if state in ("CANCELLED", "PREEMPTED"):  # as when a running cell is interrupted: left undone
                        outcome = Outcome(cell, "interrupted", f"job {job.job_id} was {state.lower()}")
                    else:
                        outcome = _job_failed(cell, root, slurm_id(job), f"job {job.job_id} ended ({state}) before "
                                              f"its cell finished: time limit, memory or node failure? see {log}")
                remaining.remove((cell, job))
                outcomes.append(outcome)
                if outcome.state in ("ok", "failed"):
                    out(f"{'ok' if outcome.state == 'ok' else 'FAILED'} {cell.label()}: {_describe(outcome)}")
                elif outcome.state == "interrupted":
                    out(f"INTERRUPTED {cell.label()}: job {job.job_id} stopped before the cell finished (scancel?); "
                        f"the cell has no record: rerun the same command to submit it again")
            if remaining:
                time.sleep(poll_s)
    except KeyboardInterrupt:
        interrupted = True
        out("interrupted: the submitted jobs keep running and write their records; "
            "rerun the same command later to collect them (or scancel them)")
    return outcomes, interrupted


def run_cells(cells: list[Cell], root: "str | Path", *, jobs: int = 1, executor: str = "local",
              cell_fn: str = DEFAULT_CELL_FN, retry_failed: bool = False, slurm: SlurmOptions | None = None,
              console=None, env: dict | None = None) -> Summary:
    """Run the cells (already selected) and summarise."""
    root = Path(root)
    start = time.monotonic()
    sweep = cells[0].sweep if cells else ""
    if executor == "local":
        outcomes, interrupted = run_local(cells, root, jobs=jobs, cell_fn=cell_fn, retry_failed=retry_failed,
                                          console=console, env=env)
    elif executor == "slurm":
        outcomes, interrupted = run_submitit(cells, root, slurm or SlurmOptions(), cell_fn=cell_fn,
                                             retry_failed=retry_failed, console=console)
    else:
        raise UserError(f"unknown executor {executor!r}; use local or slurm")
    # A cell interrupted from outside (its process or job killed) has no record: the sweep is not done.
    interrupted = interrupted or any(o.state == "interrupted" for o in outcomes)
    return Summary(sweep, len(cells), outcomes, time.monotonic() - start, interrupted)

