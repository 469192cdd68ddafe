"""Run a sweep's cells: skip what is done, claim each cell, run it in its own process.

Rules (docs/sweeps.md, "Resuming and running twice", says the same):

* A cell is **done** when its record exists (the record in its file, with its id: one found
  there under another id, copied by hand, is not, and is moved into quarantine when the cell
  runs; :func:`~tlstm_bench.results.store.quarantine`): ``ok`` records are never rerun; ``failed``
  records are not rerun either (a deterministic failure would fail again) unless
  ``retry_failed``, and they still count as failures in the summary and the exit code.
* Before running a cell the runner **claims** it with a lock file (:mod:`.lock`). After
  claiming, the runner looks for the record again, so a cell finished by another sweep
  between planning and claiming is not run twice.
* A cell claimed by a **live** process elsewhere (another sweep, a SLURM job) is waited for,
  and counts when its record appears; if its owner dies first, the claim is stale and this
  sweep takes the cell over. A sweep never exits 0 while a cell of its plan has no record.
* Each cell runs in a **subprocess** with a timeout (``python -m tlstm_bench.sweeps.cell``), in
  its own process group and bound to die with the sweep (:func:`.cell.die_with_parent`): a
  crash, a NaN or a hang fails that cell only, and a killed sweep leaves no cell running.
  Interrupting the sweep kills the running cells and leaves them undone (no record), so the
  next run does them again.
* A cell process writes its result to a file before the runner turns it into the record. A
  result whose record was never written (the sweep was killed in between, or the write
  failed) is **collected** by the next run that claims the cell (:func:`harvest`), not rerun.
* An ``ok`` record is never replaced by a worse one (:func:`~tlstm_bench.results.store.put_record`),
  and a process deletes only what it created or what a dead owner left (a stale claim, a dead
  runner's result file), even when two processes run one cell (a claim deleted by hand).
* A write the store's disk refuses (full, read-only) stops the sweep: no further cell starts,
  a cell that finished without storing its result is left undone (never stored as failed), and
  the summary says what happened; the rerun does the rest.

Executors: :func:`run_local` (subprocesses here, ``jobs`` at once) and
:func:`.slurm.run_slurm` (one SLURM job per cell, built on this module's :func:`run_cell`);
:func:`.plan.run_cells` runs either and waits (:func:`wait_elsewhere`) for the cells other
processes hold. Progress goes to a reporter (:mod:`tlstm_bench.events`).
"""

from __future__ import annotations

import contextlib
import errno
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

from .. import checks
from ..atomic import disk_problem, fresh_file, pid_alive, read_regular_text
from ..errors import UserError, term_interrupts
from ..events import Event, Reporter, note, silent
from ..results import store
from . import lock as locks
from .cell import DEFAULT_CELL_FN, UNSTORED, cell_checkpoint_dir, cell_to_json, make_record
from .grid import Cell

LOG_TAIL = 400
WAIT_POLL_S = 0.5
# Exit codes of a cell process that was interrupted (Ctrl-C, SIGTERM, scancel), not failed: the
# cell is left undone, without a record, and the next run does it again.
INTERRUPTED = (130, 143, -signal.SIGINT, -signal.SIGTERM)
# Outcome states of a cell that has its record (done) or a failed one.
DONE = ("ok", "skipped-done", "elsewhere-ok")
FAILED = ("failed", "skipped-failed", "elsewhere-failed")


def record_path(root: Path, cell: Cell) -> Path:
    return store.record_path(root, cell.sweep, cell.id)


def cell_record(root: Path, cell: Cell) -> tuple[dict | None, bool]:
    """(the cell's record or None, whether its file holds another cell's record instead); a
    one-line error when the file is corrupt or not a regular file."""
    record = store.read_record(record_path(root, cell), missing_ok=True)
    if record is None:
        return None, False
    ours = record.get("id") == cell.id if "id" in record else record.get("key") == cell.key
    return (record, False) if ours else (None, True)


def is_cut(record: dict) -> bool:
    """An ``ok`` record that a deadline stopped (``$TLSTM_BENCH_DEADLINE``, ``sweep --stop-after``):
    kept, and its cell runs again to go on from its checkpoint, replacing it."""
    return record.get("status") == "ok" and record.get("stop_reason") == "deadline"


def read_status(root: Path, cell: Cell) -> str | None:
    """``"ok"``, ``"failed"``, ``"cut"`` (:func:`is_cut`) or None (no record of this cell); a
    one-line error when the record is corrupt."""
    record, _ = cell_record(root, cell)
    if record is None:
        return None
    return "cut" if is_cut(record) else record.get("status", "failed")


def cell_state(root: Path, cell: Cell) -> str:
    """done | failed | cut | running | todo."""
    status = read_status(root, cell)
    if status in ("ok", "failed"):
        return "done" if status == "ok" else "failed"
    held = locks.holder(root, cell.sweep, cell.id)
    return "running" if held else status or "todo"


@dataclass
class Outcome:
    cell: Cell
    # ok | failed (ran here) | skipped-done | skipped-failed (recorded before) | elsewhere-ok |
    # elsewhere-failed (another process ran it while this sweep waited) | taken (still held elsewhere) |
    # interrupted | unsaved (its record could not be written) | corrupt (its record file is) |
    # not-run (the store refused a write before it ran, or its result) | stopped (not started after that)
    state: str
    error: str | None = None
    wall_time_s: float = 0.0
    record: dict | None = None
    note: str | None = None
    refused: str | None = None  # the store's disk refused a write (full, read-only): the sweep stops


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
        return [o for o in self.outcomes if o.state in FAILED]

    @property
    def missing(self) -> int:
        """Cells of the plan without a record when the sweep ended (none was written, or it is corrupt)."""
        return self.planned - self.count(*DONE, *FAILED)

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.failures or self.missing else 0


def _log_path(root: Path, cell: Cell) -> Path:
    return Path(root) / cell.sweep / ".logs" / f"{cell.id}.log"


def _results_left(root: Path, cell: Cell) -> list[Path]:
    """Result files of the cell's processes (``<id>.<runner pid>.result.json``), oldest first."""
    def mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(_log_path(root, cell).parent.glob(f"{cell.id}.*.result.json"), key=mtime)


def _runner_alive(result: Path) -> bool:
    """Whether the runner that named ``result`` (``<id>.<runner pid>.result.json``) is another live process."""
    try:
        pid = int(result.name.split(".")[-3])
    except (IndexError, ValueError):
        return False
    return pid != os.getpid() and pid_alive(pid)


def _refusal(folder: Path) -> str:
    """Why ``folder`` refuses writes, as the filesystem says (for a cell whose log was refused too)."""
    try:
        state = os.statvfs(folder)
    except (OSError, AttributeError):
        return "its result was refused"
    if state.f_flag & getattr(os, "ST_RDONLY", 1):
        return os.strerror(errno.EROFS)
    return os.strerror(errno.ENOSPC) if state.f_bavail == 0 else "its result was refused"


def _tail(path: Path) -> str:
    try:
        text = read_regular_text(path, errors="replace").strip()
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][-LOG_TAIL:] if lines else ""


def _kill(proc: subprocess.Popen) -> None:
    """Kill a cell process and its process group (its own children)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass


class _Stop:
    """Set when the sweep is interrupted: running cells are killed and left undone."""

    def __init__(self):
        self.event = threading.Event()
        self.procs: set[subprocess.Popen] = set()
        self.lock = threading.Lock()
        # Set when the store's disk refused a write: no further cell starts (each would fail
        # the same way); running ones finish and keep what they can.
        self.refused: str | None = None

    def kill_all(self):
        self.event.set()
        with self.lock:
            for proc in list(self.procs):
                _kill(proc)


def recorded_outcome(root: Path, cell: Cell, retry_failed: bool) -> Outcome | None:
    """The outcome of a cell that needs no run (its record exists), else None."""
    status = read_status(root, cell)
    if status == "ok" or (status == "failed" and not retry_failed):
        return Outcome(cell, "skipped-done" if status == "ok" else "skipped-failed")
    return None  # none yet, or cut by a deadline: it runs (on from its checkpoint)


def run_cell(cell: Cell, root: "str | Path", *, cell_fn: str = DEFAULT_CELL_FN, retry_failed: bool = False,
             stop: _Stop | None = None, extra_env: dict | None = None) -> Outcome:
    """Claim one cell, run it in a subprocess with its timeout, make sure it leaves a record.

    The same function runs inside a SLURM job (submitit pickles it), so the resume and
    no-duplicate rules hold for cluster jobs too. ``extra_env``: variables set for the cell
    process on top of this process's environment.
    """
    root = Path(root)
    try:
        done = recorded_outcome(root, cell, retry_failed)
        if done is not None:
            locks.clear_stale(root, cell.sweep, cell.id)  # a claim its killed owner left after the record
            return done
        if stop is not None and stop.refused is not None:
            return Outcome(cell, "stopped", f"not started: {stop.refused}")
        if (deadline := checks.deadline({**os.environ, **(extra_env or {})})) is not None and time.time() >= deadline:
            return Outcome(cell, "stopped", f"not started: the deadline (${checks.ENV_DEADLINE}) has passed; "
                                            "the same command without it runs the cell")
        claim = locks.claim(root, cell.sweep, cell.id, timeout_s=cell.timeout_s)
        if claim is None:
            return Outcome(cell, "taken")
        try:
            done = recorded_outcome(root, cell, retry_failed)  # finished elsewhere while we planned?
            if done is not None:
                return done
            moved = _evict_stranger(root, cell)
            collected = harvest(root, cell, claim) if read_status(root, cell) in (None, "cut") else None
            if collected is not None:
                return _noted(collected, moved)
            if stop is not None and stop.event.is_set():
                return Outcome(cell, "interrupted")
            if stop is not None and stop.refused is not None:  # the disk filled while this one was claimed
                return Outcome(cell, "stopped", f"not started: {stop.refused}")
            env = {**os.environ, **extra_env} if extra_env else None
            outcome = _run_claimed(cell, root, claim, cell_fn=cell_fn, stop=stop, env=env)
            return _noted(outcome, claim.broke_corrupt and f"broke a corrupt lock file {claim.path.name}", moved)
        finally:
            claim.release()
    except locks.FolderInTheWay as exc:  # not the tool's to delete: this cell waits for its owner
        return Outcome(cell, "not-run", str(exc))
    except UserError as exc:  # its record file was found corrupt while the sweep ran
        return Outcome(cell, "corrupt", str(exc))
    except OSError as exc:  # the store refused a write (a lock, the log): the disk is full or read-only
        problem = disk_problem(exc)
        if problem is None:
            raise
        return Outcome(cell, "not-run", f"{problem}; this cell was not run, a rerun does it", refused=problem)


def _noted(outcome: Outcome, *said) -> Outcome:
    """``outcome`` with what else happened to its cell (the texts of ``said`` that are not empty) in its note."""
    outcome.note = "; ".join(part for part in (outcome.note, *said) if part) or None
    return outcome


def _evict_stranger(root: Path, cell: Cell) -> str | None:
    """Move another cell's record found in this cell's file into quarantine (with the cell
    claimed); what was done, for the cell's line, or None."""
    path = record_path(root, cell)
    if not cell_record(root, cell)[1]:
        return None
    other = (store.read_record(path, missing_ok=True) or {}).get("id")
    moved = store.quarantine(path, cell.id)
    return moved and f"its file held another cell's record ({other}): moved to {moved.relative_to(root)}"


def _run_process(cell: Cell, root: Path, log: Path, result_path: Path, claim: locks.CellLock, *, cell_fn: str,
                 stop: _Stop | None, env: dict | None) -> tuple[int, str | None]:
    """Run the cell's process to its end or its timeout: (exit code, timeout error or None).

    It gets its own process group (so a kill takes its children along, and a Ctrl-C at the
    terminal reaches only the sweep, which then kills it) and dies with this process.
    """
    with fresh_file(log) as out:  # `--x=value`: a value starting with '-' is never read as an option
        proc = subprocess.Popen([sys.executable, "-m", "tlstm_bench.sweeps.cell", f"--root={root}",
                                 f"--out={result_path}", f"--fn={cell_fn}", f"--parent-pid={os.getpid()}"],
                                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, text=True, env=env,
                                start_new_session=True)
        try:
            claim.add_child(proc.pid)
        except OSError:  # the disk refused the claim's update: the cell must not run on unclaimed
            _kill(proc)
            proc.wait()
            raise
        if stop is not None:
            with stop.lock:
                stop.procs.add(proc)
            if stop.event.is_set():
                _kill(proc)
        error = None
        try:
            proc.communicate(cell_to_json(cell), timeout=cell.timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.wait()
            error = f"timed out after {cell.timeout_s:g} s (the spec's timeout_s)"
        finally:
            if stop is not None:
                with stop.lock:
                    stop.procs.discard(proc)
    return proc.returncode, error


def _run_claimed(cell: Cell, root: Path, claim: locks.CellLock, *, cell_fn: str, stop: _Stop | None,
                 env: dict | None) -> Outcome:
    log = _log_path(root, cell)
    log.parent.mkdir(parents=True, exist_ok=True)
    result_path = log.with_suffix(f".{os.getpid()}.result.json")
    result_path.unlink(missing_ok=True)  # ours: a file of this pid is a leftover of this process
    start = time.monotonic()
    code, error = _run_process(cell, root, log, result_path, claim, cell_fn=cell_fn, stop=stop, env=env)
    wall = time.monotonic() - start
    if code in INTERRUPTED or (stop is not None and stop.event.is_set() and code != 0):
        return Outcome(cell, "interrupted", wall_time_s=wall)  # no record: the next run does it again
    if code == UNSTORED and error is None:  # it finished but the disk refused its result: no record either
        why = _tail(log) or f"cannot write in {result_path.parent} ({_refusal(result_path.parent)})"
        return Outcome(cell, "not-run", f"{why}; its result is lost, a rerun runs it again", wall, refused=why)
    result = None
    if error is None and code == 0:
        try:
            outcome = json.loads(read_regular_text(result_path))
            result, error = outcome.get("result"), outcome.get("error")
        except (OSError, ValueError) as exc:
            error = f"the cell process left no readable result ({exc})"
    elif error is None:
        how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
        tail = _tail(log)
        error = f"cell process {how}" + (f": {tail}" if tail else "")
    with contextlib.suppress(OSError):
        if log.stat().st_size == 0:
            log.unlink()
    return store_record(cell, root, make_record(cell, result, error=error, wall_time_s=wall), wall, claim,
                        result_path)


def store_record(cell: Cell, root: Path, record: dict, wall: float, claim: locks.CellLock | None = None,
                 result: Path | None = None, note: str | None = None) -> Outcome:
    """Write the cell's record, then delete ``result`` (the result file it was made from: this
    process's, or the one it collected); if the write fails, keep it (the next run collects it)
    and say where it is.

    The one rule for deleting: a process deletes only what it created or collected under its
    claim, never another process's result, and an ``ok`` record already stored (by a process
    that ran the cell too, its claim broken meanwhile) is kept over a worse one.
    """
    try:
        stored = store.put_record(record, cell.sweep, root=root, record_id=cell.id)
    except OSError as exc:
        where = (f"its result is kept in {result} and the next run of this sweep stores it"
                 if result is not None and result.exists() else "the next run of this sweep runs it again")
        problem = disk_problem(exc)
        why = problem or f"cannot write its record {record_path(root, cell)} ({exc.strerror or exc})"
        return Outcome(cell, "unsaved", f"{why}; {where}", wall, record, refused=problem)
    if result is not None:
        result.unlink(missing_ok=True)
    if stored["status"] != record["status"]:  # another process stored it ok: that record stands
        return Outcome(cell, "elsewhere-ok", record=stored, note=f"this run's {record['status']} result not stored")
    if record["status"] == "ok" and not is_cut(record) and (claim is None or claim.held()):  # finished: no resume
        shutil.rmtree(cell_checkpoint_dir(root, cell.sweep, cell.id), ignore_errors=True)
    return Outcome(cell, record["status"], record.get("error"), wall, record, note)


def harvest(root: Path, cell: Cell, claim: locks.CellLock | None = None) -> Outcome | None:
    """Store the result a cell process left without a record, and return its outcome; None if
    it left none (then the cell has to run).

    That happens when a sweep is killed after its cell finished but before the record was
    written, or when writing the record failed. Call it only with the cell claimed (``claim``)
    or its job gone (SLURM says so; ``claim`` None) and no record stored. With a claim, a result
    whose runner (the pid in its name) is alive on this host is that runner's to store, not
    this one's: its claim was broken or deleted by hand while it ran, and it is left alone.
    """
    for path in reversed(_results_left(root, cell)):  # the newest first
        if claim is not None and _runner_alive(path):
            continue
        try:
            outcome = json.loads(read_regular_text(path))
            result, error, wall = outcome.get("result"), outcome.get("error"), outcome.get("wall_time_s")
            record = make_record(cell, result, error=error, wall_time_s=wall)
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # not a result this code wrote: run the cell instead
        return store_record(cell, root, record, wall or 0.0, claim, path,
                            note=f"collected from {path.name}: the cell had finished, its record was not stored")
    return None


def _describe(outcome: Outcome) -> str:
    rec = outcome.record or {}
    if outcome.state not in DONE:
        return outcome.error or outcome.state
    # the M a budget or preset gave; a cell that names its M has it in its label already
    m = "" if outcome.cell.spec.get("channels") is not None else f", M={rec.get('channels')}"
    if outcome.cell.kind == "runtime" and rec.get("ms_per_step") is not None:
        return f"{rec['ms_per_step']:.3f} ms/step{m}"
    if rec.get("test_metric") is not None:
        solved = rec.get("samples_to_solve")
        extra = f", solved after {solved:,} samples" if solved else ""
        if rec.get("stop_reason") == "deadline":
            extra += f", stopped at the deadline after {rec.get('samples_seen', 0):,} samples"
        from ..results.view import metric_text  # pandas: imported only once a cell has a result

        return f"test {rec.get('metric')} {metric_text(rec.get('metric'), rec['test_metric'])}{m}{extra}"
    return "ok"


# The first word of a cell's line, and its tone.
_MARKS = {"ok": ("ok", "ok"), "elsewhere-ok": ("ok", "ok"), "failed": ("FAILED", "error"),
          "elsewhere-failed": ("FAILED", "error"), "unsaved": ("NOT STORED", "error"),
          "corrupt": ("CORRUPT", "error"), "not-run": ("NOT RUN", "error")}


def outcome_note(outcome: Outcome) -> Event | None:
    """The log line of a cell that ran (here or elsewhere) or could not be stored; None for the rest."""
    if outcome.state not in _MARKS:
        return None
    mark, level = _MARKS[outcome.state]
    where = " (by another run)" if outcome.state.startswith("elsewhere") else f" ({outcome.wall_time_s:.1f} s)"
    extra = f" [{outcome.note}]" if outcome.note else ""
    return Event("note", f"{mark} {outcome.cell.label()}{where}: {_describe(outcome)}{extra}", level=level)


def cell_size(spec: dict) -> str:
    """A cell's model size as the estimate compares it: its budget, else its M, else its preset."""
    return str(spec.get("budget") or spec.get("channels") or spec.get("preset") or "")


def time_left(cells_left: list[tuple[str, int, str, float]], took: dict[str, list[tuple[int, str, float]]],
              jobs: int) -> tuple[float, bool]:
    """A sweep's seconds left: each unfinished cell, given as (its kind, its depth, its size
    (:func:`cell_size`), how long it has run so far: 0 if it has not started), at the mean wall
    time of the cells of its kind and size that ran here to the end, given as (depth, size,
    seconds), else of its kind, less what it has run; the sum spread over ``jobs`` at once. And
    whether that is only a floor (at least that long): a kind with cells left has no finished
    cell yet; a cell left is of a size none of them had, or deeper than every one of its size
    (a larger or deeper model takes longer, so the mean of the others undercounts it); or a
    running cell has run longer than that mean already. The quick sweep's runtime cells take a
    second, its training cells half a minute, so the average over cells would say 1 minute where
    6 are left."""
    def summary(runs: list) -> tuple[float, int]:  # (mean wall time, deepest)
        return sum(s for _, _, s in runs) / len(runs), max(d for d, _, _ in runs)

    by_kind = {kind: summary(runs) for kind, runs in took.items() if runs}
    by_size = {}
    for kind, runs in took.items():
        for size in {z for _, z, _ in runs}:
            by_size[kind, size] = summary([r for r in runs if r[1] == size])
    total, floor = 0.0, False
    for kind, depth, size, running_s in cells_left:
        if kind not in by_kind:
            floor = True
            continue
        mean, deepest = by_size.get((kind, size), (by_kind[kind][0], -1))  # an unseen size: a floor
        total += max(0.0, mean - running_s)
        floor = floor or depth > deepest or running_s > mean
    return total / max(1, min(jobs, len(cells_left))), floor


def run_local(cells: list[Cell], root: Path, *, jobs: int = 1, cell_fn: str = DEFAULT_CELL_FN,
              retry_failed: bool = False, report: Reporter = silent,
              extra_env: dict | None = None) -> tuple[list[Outcome], bool]:
    """Run cells with ``jobs`` at once on this machine; returns (outcomes, interrupted)."""
    stop = _Stop()
    outcomes: list[Outcome] = []
    counts: Counter = Counter()
    running = [0]
    started: dict[str, float] = {}  # cell id -> when it started here
    took: dict[str, list[tuple[int, str, float]]] = {}  # kind -> (depth, size, wall time) of its cells run here

    def work(cell: Cell) -> Outcome:
        running[0] += 1
        started[cell.id] = time.monotonic()
        try:
            outcome = run_cell(cell, root, cell_fn=cell_fn, retry_failed=retry_failed, stop=stop, extra_env=extra_env)
        finally:
            running[0] -= 1
        if outcome.refused is not None and stop.refused is None:  # at once: the next cell may start now
            stop.refused = outcome.refused
        return outcome

    def advance() -> None:
        status = (f"done {counts['ok'] + counts['skipped-done']} · running {running[0]} · "
                  f"failed {counts['failed'] + counts['skipped-failed']}"
                  + (f" · elsewhere {counts['taken']}" if counts["taken"] else ""))
        finished, now = {o.cell.id for o in outcomes}, time.monotonic()
        left_s, floor = time_left([(c.kind, c.spec["depth"], cell_size(c.spec), now - started.get(c.id, now))
                                   for c in cells if c.id not in finished], took, jobs)
        report(Event("advance", status, done=len(outcomes), total=len(cells), left_s=left_s, left_floor=floor))

    sweeps = sorted({cell.sweep for cell in cells})
    report(Event("start", f"{sweeps[0]}: cells" if len(sweeps) == 1 else "cells", done=0, total=len(cells)))
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        with term_interrupts():
            pending = {pool.submit(work, cell) for cell in cells}
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    outcome = future.result()
                    outcomes.append(outcome)
                    counts[outcome.state] += 1
                    if outcome.state in ("ok", "failed"):  # ran here, to its end
                        took.setdefault(outcome.cell.kind, []).append(
                            (outcome.cell.spec["depth"], cell_size(outcome.cell.spec), outcome.wall_time_s))
                    line = outcome_note(outcome)
                    if line is not None:
                        report(line)
                advance()
    except KeyboardInterrupt:
        stop.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        return outcomes, True
    finally:
        pool.shutdown(wait=True)
        report(Event("end"))
    return outcomes, False


def wait_elsewhere(cells: list[Cell], root: Path, *, report: Reporter = silent,
                   ) -> tuple[list[Outcome], list[Cell], list[Cell]]:
    """Wait while live processes elsewhere (another sweep, a SLURM job) hold ``cells``.

    Returns as soon as one of them is free to take (its owner died without a record) or all
    have records: (outcomes of the cells finished elsewhere, cells now free, cells still held).
    """
    finished: list[Outcome] = []
    waiting, told = list(cells), False
    while True:
        free, held = [], []
        for cell in waiting:
            outcome = _finished_elsewhere(root, cell)
            if outcome is not None:
                finished.append(outcome)
                if outcome.state != "corrupt":
                    report(outcome_note(outcome))
            elif locks.holder(root, cell.sweep, cell.id) is None:
                free.append(cell)
            else:
                held.append(cell)
        if free or not held:
            return finished, free, held
        text = f"waiting for {_holders(root, held)} (Ctrl-C stops this sweep, not that one)"
        if not told:  # once in the log too, not only on the status line
            note(report, text)
            told = True
        report(Event("status", text))
        waiting = held
        time.sleep(WAIT_POLL_S)


def _finished_elsewhere(root: Path, cell: Cell) -> Outcome | None:
    """The outcome of a waited-for cell whose record has appeared (or is corrupt); None if it has none."""
    try:
        record, _ = cell_record(root, cell)
    except UserError as exc:
        return Outcome(cell, "corrupt", str(exc))
    if record is None or is_cut(record):  # a cut record: its owner may be going on from it
        return None
    ok = record.get("status") == "ok"
    return Outcome(cell, "elsewhere-ok" if ok else "elsewhere-failed", record.get("error"), record=record)


def _holders(root: Path, cells: list[Cell]) -> str:
    """``2 cells held by pid 123 on host-a`` (what the claims say)."""
    owners = Counter()
    for cell in cells:
        info = locks.holder(root, cell.sweep, cell.id) or {}
        owners[f"pid {info.get('pid')} on {info.get('host')}"] += 1
    plural = "s" if len(cells) > 1 else ""
    return f"{len(cells)} cell{plural} that another run is running ({', '.join(owners)})"
