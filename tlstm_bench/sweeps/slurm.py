"""The SLURM executor: every cell one job of a job array (submitit), each job running
:func:`.runner.run_cell` on its node.

A job claims its cell, runs it in a subprocess and writes its record into the same store, so
resuming and concurrent sweeps behave as with the local executor; the store must be on a
filesystem the nodes share. The sweep waits for the jobs and notices, from ``squeue``, a job
that ended without a result (time limit, out of memory, node failure, ``scancel``).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..events import Reporter, note
from ..results import store
from . import lock as locks
from .cell import DEFAULT_CELL_FN, make_record, one_line
from .grid import Cell
from .runner import Outcome, harvest, outcome_note, record_path, recorded_outcome, run_cell, store_record


@dataclass
class SlurmOptions:
    partition: str | None = None
    gpus_per_job: int = 0
    time_limit_min: int = 60
    array_parallelism: int = 32
    cpus_per_job: int | None = None
    cluster: str = "slurm"        # "slurm", or "local" (submitit's LocalExecutor: real subprocesses)


# squeue states of a job SLURM no longer runs (a job squeue has forgotten has ended too).
_ENDED = ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
          "TIMEOUT")
# A job that ended without leaving submitit its result file is dead only after this long: a
# shared filesystem may show the file late (submitit itself waits 15 s for it).
DEAD_JOB_GRACE_S = 15.0
SQUEUE_EVERY_S = 10.0
POLL_S = 2.0  # between looks at the submitted jobs' results
SLURM_TOOLS = ("sbatch", "srun")  # submitit's SlurmExecutor refuses to start without srun


def slurm_states(job_name: str) -> dict[str, str] | None:
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
    """The job died before its cell finished: record the cell as failed, unless the job wrote a
    record or its cell left a result (then that is stored: SLURM says the job is gone)."""
    try:
        record = store.read_record(record_path(root, cell), missing_ok=True)
    except UserError as exc:
        return Outcome(cell, "corrupt", str(exc))
    if record is not None:  # it died after writing the cell's record
        ok = record.get("status") == "ok"
        return Outcome(cell, "ok" if ok else "failed", None if ok else record.get("error", error), record=record)
    collected = harvest(root, cell)
    if collected is not None:
        return collected
    record = make_record(cell, error=error)
    record["slurm_job_id"] = job_id
    return store_record(cell, root, record, 0.0)


def _split(cells: list[Cell], root: Path, retry_failed: bool) -> tuple[list[Cell], list[Outcome]]:
    """(cells to submit, outcomes of those that need no job: recorded, or run by an earlier job)."""
    todo, outcomes = [], []
    for cell in cells:
        recorded = recorded_outcome(root, cell, retry_failed)
        if recorded is not None:
            outcomes.append(recorded)
        elif locks.holder(root, cell.sweep, cell.id):  # a job of an earlier submission still runs it
            outcomes.append(Outcome(cell, "taken"))
        else:
            todo.append(cell)
    return todo, outcomes


def _executor(options: SlurmOptions, folder: Path, job_name: str, timeout_min: int):
    """submitit's executor for these options (the local one runs the jobs as subprocesses here)."""
    import submitit

    if options.cluster == "local":
        executor = submitit.LocalExecutor(folder=folder)
        executor.update_parameters(timeout_min=timeout_min, gpus_per_node=options.gpus_per_job)
        return executor
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
    return executor


def run_slurm(cells: list[Cell], root: Path, options: SlurmOptions, *, cell_fn: str = DEFAULT_CELL_FN,
              retry_failed: bool = False, report: Reporter, extra_env: dict | None = None,
              ) -> tuple[list[Outcome], bool]:
    """Submit every cell that needs a run as one job of a SLURM array and wait for them;
    returns (outcomes, interrupted)."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise UserError("the slurm executor needs submitit: pip install 'tlstm-bench[cluster]'") from None
    missing = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None] if options.cluster == "slurm" else []
    if missing:  # submitit needs srun as well as sbatch, and says so in a traceback
        raise UserError(f"--executor slurm needs a SLURM cluster (no {' or '.join(missing)} on PATH); "
                        "run on a login node, or use --executor local")
    todo, outcomes = _split(cells, root, retry_failed)
    if not todo:
        return outcomes, False
    folder = Path(root) / cells[0].sweep / ".submitit"
    job_name = f"tlstm-{cells[0].sweep}"
    timeout_min = max(options.time_limit_min, int(max(c.timeout_s for c in todo) / 60) + 2)
    executor = _executor(options, folder, job_name, timeout_min)
    root_abs = Path(root).resolve()
    jobs = _submit(executor, todo, options, root_abs, cell_fn=cell_fn, retry_failed=retry_failed,
                   extra_env=extra_env)
    note(report, f"submitted {len(jobs)} jobs ({options.cluster}); job ids {jobs[0].job_id} ... {jobs[-1].job_id}; "
         f"logs in {folder}")
    try:
        _wait_for_jobs(list(zip(todo, jobs)), outcomes, root, options, folder, job_name, report)
    except KeyboardInterrupt:
        note(report, "interrupted: the submitted jobs keep running and write their records; "
             "rerun the same command later to collect them (or scancel them)", "warning")
        return outcomes, True
    return outcomes, False


def _submit(executor, todo: list[Cell], options: SlurmOptions, root: Path, **kwargs) -> list:
    """Submit the cells as one job array (one sbatch call); a one-line UserError when sbatch
    refuses it (a bad partition or GPU request, no controller), saying what sbatch said.

    Nothing is claimed before the jobs run (each job claims its cell), so a refused array leaves
    the store as it was: running the same command again, fixed, submits every cell; what
    submitit wrote for the array (a pickle per job, the submission script) is removed. submitit
    prints sbatch's whole stderr when it fails; that is kept here and said in the error's one line.
    """
    from submitit.core.utils import FailedJobError

    folder = Path(executor.folder)
    before = set(folder.iterdir()) if folder.is_dir() else set()
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), executor.batch():
            jobs = [executor.submit(run_cell, cell, root, **kwargs) for cell in todo]
    except (FailedJobError, subprocess.CalledProcessError, FileNotFoundError) as exc:
        if isinstance(exc, FileNotFoundError) and exc.filename != "sbatch":
            raise  # not sbatch missing: a file of the store's, which the CLI reports as a disk problem
        _remove_new(folder, before)
        raise UserError(_refused_text(exc, said.getvalue(), options, len(todo))) from None
    if said.getvalue():  # not ours to swallow when the submission went through
        sys.stderr.write(said.getvalue())
    return jobs


def _remove_new(folder: Path, before: set[Path]) -> None:
    """Remove what was written into ``folder`` since ``before`` (its entries then)."""
    for path in (set(folder.iterdir()) - before) if folder.is_dir() else ():
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _refused_text(exc: Exception, printed: str, options: SlurmOptions, n: int) -> str:
    """The one line of a refused submission: what sbatch said, and what to check."""
    if isinstance(exc, FileNotFoundError):
        return ("--executor slurm needs a SLURM cluster (sbatch is gone from PATH); run on a login node, "
                "or use --executor local")
    asked = ([f"--partition {options.partition}"] if options.partition else []) + \
        ([f"--gpus-per-job {options.gpus_per_job}"] if options.gpus_per_job else [])
    check = (f"check {' and '.join(asked)} against what sinfo lists (partitions, GPUs as gres) and that the "
             "SLURM controller answers" if asked else
             "check that the SLURM controller answers (sinfo) and that the default partition takes jobs")
    jobs = f"{n} job{'s' if n != 1 else ''}"
    return f"sbatch refused the {jobs}, nothing was submitted: {_sbatch_said(exc, printed)}; {check}, " \
           "then run the same command again"


def _sbatch_said(exc: Exception, printed: str = "") -> str:
    """sbatch's first line that says an error (else its first line) from a failed submission:
    submitit's FailedJobError (its message is sbatch's stderr) or a CalledProcessError."""
    texts = [printed, str(exc) if not isinstance(exc, subprocess.CalledProcessError) else ""]
    cause = exc if isinstance(exc, subprocess.CalledProcessError) else exc.__cause__
    if isinstance(cause, subprocess.CalledProcessError):
        for out in (cause.stderr, cause.output):
            texts.append(out.decode(errors="replace") if isinstance(out, bytes) else out or "")
    lines = [" ".join(line.split()) for text in texts for line in text.splitlines() if line.strip()]
    line = next((line for line in lines if "error" in line.lower()), lines[0] if lines else None)
    if line is None:
        code = getattr(cause, "returncode", None)
        return f"it exited with code {code} and said nothing" if code is not None else "it said nothing"
    for prefix in ("sbatch: error: ", "sbatch: ", "Batch job submission failed: "):
        line = line[len(prefix):] if line.startswith(prefix) else line
    return line if len(line) <= 300 else line[:297] + "..."


def _wait_for_jobs(remaining: list, outcomes: list[Outcome], root: Path, options: SlurmOptions, folder: Path,
                   job_name: str, report: Reporter) -> None:
    """Poll the (cell, job) pairs until each has an outcome (its result, or how it died),
    appended to ``outcomes`` as it comes."""
    ended: dict[str, tuple[float, str]] = {}   # job id -> when squeue first said it ended (no result yet), how
    states, last_squeue = None, float("-inf")
    while remaining:
        if options.cluster == "slurm" and time.monotonic() - last_squeue >= SQUEUE_EVERY_S:
            states, last_squeue = slurm_states(job_name), time.monotonic()
        for cell, job in list(remaining):
            outcome = _job_outcome(cell, job, root, options, folder, states, ended)
            if outcome is None:
                continue
            remaining.remove((cell, job))
            outcomes.append(outcome)
            _report_job(report, outcome, job)
        if remaining:
            time.sleep(POLL_S)


def _job_outcome(cell: Cell, job, root: Path, options: SlurmOptions, folder: Path, states: dict | None,
                 ended: dict) -> Outcome | None:
    """The outcome of ``job``'s cell, or None while the job may still run."""
    slurm_id = job.job_id if options.cluster == "slurm" else None
    if job.done():
        try:
            return job.result()
        except Exception as exc:  # noqa: BLE001 - the job died: the cell fails, the sweep goes on
            return _job_failed(cell, root, slurm_id, f"job {job.job_id} failed: {one_line(exc)}")
    state = None if states is None else states.get(job.job_id, "forgotten by squeue")
    if state is None or not (state in _ENDED or state.startswith("forgotten")):
        return None
    since, state = ended.setdefault(job.job_id, (time.monotonic(), state))
    if time.monotonic() - since < DEAD_JOB_GRACE_S:
        return None
    if state in ("CANCELLED", "PREEMPTED"):  # as when a running cell is interrupted: left undone
        return Outcome(cell, "interrupted", f"job {job.job_id} was {state.lower()}")
    log = folder / f"{job.job_id}_0_log.err"
    return _job_failed(cell, root, slurm_id, f"job {job.job_id} ended ({state}) before its cell finished: "
                       f"time limit, memory or node failure? see {log}")


def _report_job(report: Reporter, outcome: Outcome, job) -> None:
    line = outcome_note(outcome)
    if line is not None:
        report(line)
    elif outcome.state == "interrupted":
        note(report, f"INTERRUPTED {outcome.cell.label()}: job {job.job_id} stopped before the cell finished "
             "(scancel?); the cell has no record: rerun the same command to submit it again", "warning")
