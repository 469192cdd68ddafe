"""The core of ``tlstm-bench sweep``: plan a spec's cells (which are done), then run them.

:func:`plan_sweep` reads the spec, expands its cells and looks up each cell's state in the
store; :func:`plan_rows` and :func:`summary_rows` describe a plan and a finished sweep as rows
of text for the CLI to draw; :func:`run_sweep` plans and runs. :func:`run_cells` runs cells
with an executor (:mod:`.runner` here, :mod:`.slurm` as SLURM jobs) and waits for those other
processes hold; it lives here, above both executors, because slurm.py builds on runner.py.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import checks
from ..errors import UserError, term_interrupts
from ..events import Progress, note, reporter
from ..results import store
from ..results.provenance import code_version
from ..vocab import DEFAULT_DTYPE, parse_device
from .cell import DEFAULT_CELL_FN
from .grid import Cell, expand, left_out, parse_filters, select
from .runner import DONE, FAILED, Outcome, Summary, cell_state, run_local, wait_elsewhere
from .slurm import SlurmOptions, run_slurm
from .spec import SweepSpec, check_device_here, load_spec

EXECUTORS = ("local", "slurm")


@dataclass
class Plan:
    spec: SweepSpec
    cells: list[Cell]
    states: dict[str, str]   # cell id -> done | failed | cut | running | todo
    code_version: str
    left_out: dict[str, int] = field(default_factory=dict)  # implementation -> cells that need CUDA

    def count(self, state: str) -> int:
        return sum(s == state for s in self.states.values())

    def to_run(self, retry_failed: bool) -> list[Cell]:
        wanted = {"todo", "cut", "failed"} if retry_failed else {"todo", "cut"}
        return [c for c in self.cells if self.states[c.id] in wanted]


def cluster_machine(executor: str, slurm: "SlurmOptions | None") -> dict | None:
    """The machine key of runtime cells run as SLURM jobs: the nodes are not known when the
    sweep is planned, so the partition stands for them (each record names the node's
    device). None (this machine) for the local executor."""
    if executor not in EXECUTORS:
        raise UserError(f"unknown --executor {executor!r}; use local or slurm")
    if executor == "slurm" and (slurm is None or slurm.cluster == "slurm"):
        return {"slurm_partition": slurm.partition if slurm else None}
    return None


def plan_sweep(spec: "str | Path | SweepSpec", *, root: "str | Path", only=(), device: str | None = None,
               code: str | None = None, machine: dict | None = None) -> Plan:
    """The cells of a spec (selected by ``only``) and the state of each in the store ``root``.

    ``machine``: the machine key of runtime cells (default: this machine; see
    :func:`cluster_machine`).
    """
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    try:  # the name is the sweep's folder in the store
        store.check_name("sweep name", spec.name)
    except UserError as exc:
        raise UserError(f"{exc}; it comes from the spec file's name {spec.path.name!r}: rename the file") from None
    if device is not None:
        parse_device(device)
    code = code if code is not None else code_version()
    filters = parse_filters(only)
    # what the plan leaves out of the cells --only selects, not of the whole grid
    skipped = left_out(spec, device, filters, code=code, machine=machine)
    cells = select(expand(spec, code=code, device=device, machine=machine), filters)
    if not cells and skipped:
        raise UserError(f"no cell of sweep {spec.name!r} can run on {device or spec.device}: "
                        f"{left_out_text(skipped)}; run it with --device cuda on a GPU machine")
    if not cells:
        raise UserError(f"--only matches no cell of sweep {spec.name!r}; run with --dry-run and no --only "
                        f"to see the cells")
    states = {c.id: cell_state(Path(root), c) for c in cells}
    return Plan(spec, cells, states, code, skipped)


def left_out_text(skipped: dict[str, int]) -> str:
    """``12 cells of triton, cuda-graph left out: they need a CUDA GPU``."""
    count = sum(skipped.values())
    return (f"{count} cell{'s' if count != 1 else ''} of {', '.join(skipped)} left out: "
            f"{'they need' if len(skipped) > 1 or count != 1 else 'it needs'} a CUDA GPU")


PLAN_COLUMNS = ("id", "kind", "config", "L", "seed", "size", "settings", "state")


def plan_title(plan: Plan, *, retry_failed: bool = False) -> str:
    """What every cell shares (the task, the device) and the counts of each state."""
    devices = sorted({c.spec["device"] for c in plan.cells})
    title = (f"sweep {plan.spec.name} ({plan.spec.path}), task {plan.spec.task} on {', '.join(devices)}: "
             f"{len(plan.cells)} cell{'s' if len(plan.cells) != 1 else ''}, {plan.count('done')} done, {plan.count('failed')} failed, "
             f"{plan.count('running')} running elsewhere, {len(plan.to_run(retry_failed))} to run"
             + (f" ({_cut_text(plan.count('cut'))})" if plan.count("cut") else ""))
    return title + (f"; {left_out_text(plan.left_out)}" if plan.left_out else "")


def _cut_text(n: int) -> str:
    return f"{n} cut by a deadline: on from {'its checkpoint' if n == 1 else 'their checkpoints'}"


def plan_rows(plan: Plan, *, retry_failed: bool = False) -> list[dict]:
    """One row per cell, keyed by :data:`PLAN_COLUMNS`; ``state`` is done | failed | cut | running |
    todo and ``shown`` what to show for it."""
    sizes = cell_sizes(plan)
    rows = []
    for cell in plan.cells:
        s = cell.spec
        state = plan.states[cell.id]
        rows.append({"id": cell.id[:8], "kind": cell.kind, "config": s["config"], "L": str(s["depth"]),
                     "seed": str(s["seed"]), "size": sizes[cell.id], "settings": _settings_text(s).strip(),
                     "state": state, "shown": "failed (rerun)" if state == "failed" and retry_failed else state})
    return rows


def _settings_text(s: dict) -> str:
    """A cell's settings in a few words: T and repeats of a runtime cell, how long a training cell trains."""
    if s["kind"] == "runtime":
        text = f"T={s['seq_len']} x{s['repeats']}"
        return text + "".join(f" {v}" for v, usual in ((s["implementation"], "default"), (s["dtype"], DEFAULT_DTYPE))
                              if v != usual)
    given = {**_preset_length(s), **s}  # how long it trains, from the preset if not given
    parts = [given.get("preset"), given.get("max_samples") and f"{given['max_samples']:,} samples",
             given.get("epochs") and f"{given['epochs']} epochs",
             given.get("batch_size") and f"batch {given['batch_size']}",
             given.get("early_stopping") is not None and f"early_stopping={given['early_stopping']}",
             given.get("lr") is not None and f"lr={given['lr']:g}",
             given.get("lr_warmup") is not None and f"warm-up {given['lr_warmup']}",
             given.get("clip_grad_norm") is not None and f"clip {given['clip_grad_norm']:g}"]
    return ", ".join([p for p in parts if p] + [f"{k}={v}" for k, v in s.get("options", {}).items()])


def _preset_length(spec: dict) -> dict:
    """``max_samples``/``epochs`` of a training cell's preset when the spec gives neither."""
    from ..training import PRESETS

    preset = PRESETS.get(spec.get("preset") or "")
    if preset is None or spec.get("max_samples") is not None or spec.get("epochs") is not None:
        return {}
    return {"max_samples": preset.max_samples, "epochs": preset.epochs}


def cell_sizes(plan: Plan) -> dict[str, str]:
    """What ``--dry-run`` shows as each cell's model size: ``M=400``, or a budget with the M it
    gives that configuration at that depth (``slstm:400 -> M=187``), so the literal and the
    budget-matched readings of the paper (SPEC section 7) are told apart before anything runs."""
    from ..training import PRESETS
    from .grid import runtime_io

    train_io: dict | None = None  # the task's sizes, built (at most once) only if a training cell needs them
    sizes = {}
    for cell in plan.cells:
        s = cell.spec
        channels, budget, note = s.get("channels"), s.get("budget"), ""
        if channels is None and budget is None and s.get("preset") in PRESETS:
            preset = PRESETS[s["preset"]]
            channels, budget, note = preset.channels, preset.budget, " (preset)"
        if channels is not None:
            sizes[cell.id] = f"M={channels}{note}"
        elif budget is None:
            sizes[cell.id] = "(preset)"
        else:
            if cell.kind == "runtime":  # expand() put the sizes into the cell
                io = {k: s.get(k) for k in ("vocab", "input_size", "output_size")}
            else:
                if train_io is None:
                    train_io = runtime_io(plan.spec, next(x for x in plan.spec.sections if x.kind == "train"))
                io = train_io
            sizes[cell.id] = _budget_size(s, budget, io) + note
    return sizes


def _budget_size(s: dict, budget, io: dict) -> str:
    """``slstm:400 -> M=187``: the M a budget gives this cell's configuration at its depth."""
    from ..models import parse_budget, solve_channels
    from ..models.build import resolve_io

    try:
        r, out, _ = resolve_io(io.get("vocab"), io.get("input_size"), io.get("output_size"))
        m = solve_channels(s["config"], s["depth"], parse_budget(budget, input_size=r, output_size=out), r, out)
        return f"{budget} -> M={m}"
    except UserError:
        return f"{budget} (too small)"


SUMMARY_COLUMNS = ("id", "cell", "error")
_OUTCOME_NOTES = {"skipped-failed": " (earlier run; --retry-failed reruns it)", "elsewhere-failed": " (another run)",
                  "taken": "still running elsewhere", "interrupted": "interrupted"}


def summary_rows(summary: Summary) -> tuple[str, list[dict]] | None:
    """(title, rows keyed by :data:`SUMMARY_COLUMNS`) of the cells that failed or have no record,
    and why; None if there are none."""
    outcomes = summary.failures + [o for o in summary.outcomes if o.state not in (*DONE, *FAILED)]
    if not outcomes:
        return None
    failed, missing = len(summary.failures), len(outcomes) - len(summary.failures)
    title = ", ".join(part for part in (failed and f"{failed} failed cell{'s' * (failed > 1)}",
                                        missing and f"{missing} cell{'s' * (missing > 1)} without a record") if part)
    rows = [{"id": o.cell.id[:10], "cell": o.cell.label(),
             "error": f"{o.error or ''}{_OUTCOME_NOTES.get(o.state, '')}".strip() or "failed"} for o in outcomes]
    return title, rows


def summary_line(summary: Summary) -> str:
    """What the sweep did, in one sentence; counts that are zero (other than ran, ok and failed)
    are left out, so that it fits an 80-column line when nothing unusual happened."""
    ran = summary.count("ok", "failed")
    parts = [f"ran {ran} ({summary.count('ok')} ok, {summary.count('failed')} failed)"]
    for label, n in (("already done", summary.count("skipped-done")),
                     ("failed earlier", summary.count("skipped-failed")),
                     ("done by another run", summary.count("elsewhere-ok", "elsewhere-failed"))):
        if n:
            parts.append(f"{label} {n}")
    minutes, seconds = divmod(round(summary.wall_time_s), 60)
    wall = f"{summary.wall_time_s:.1f} s" if minutes == 0 else f"{minutes} min {seconds} s"
    cells = f"{summary.planned} cell{'' if summary.planned == 1 else 's'}"
    line = f"sweep {summary.sweep}: {cells}; {', '.join(parts)}; wall time {wall}"
    if summary.missing:
        line += f"; {summary.missing} cell{' has' if summary.missing == 1 else 's have'} no record"
    refused = next((o.refused for o in summary.outcomes if o.refused), None)
    if refused:
        line += (f"; stopped early, the store refused a write ({refused}): free space or make it writable, "
                 "then rerun the same command; it keeps every record stored and runs the rest")
    elif summary.interrupted:
        line += "; interrupted (rerun the same command to resume)"
    elif summary.missing:
        line += " (see the table above)"
    return line


def data_dir_env(data_dir: "str | Path | None") -> dict:
    """The environment the cells get for ``--data-dir``: ``TLSTM_BENCH_DATA`` set to it (cell
    processes and SLURM jobs read their data files from there)."""
    if data_dir is None:
        return {}
    path = checks.path_length(data_dir, "--data-dir")
    if not path.is_dir():
        raise UserError(f"--data-dir {data_dir} is not a folder; give the folder that holds the data files")
    return {"TLSTM_BENCH_DATA": str(path.resolve())}


def deadline_env(stop_after_s: float | None) -> dict:
    """The environment the cells get for a deadline ``stop_after_s`` seconds from now:
    ``TLSTM_BENCH_DEADLINE``, unless this process's own is sooner (a malformed one is a one-line
    error here, before any cell runs)."""
    given = checks.deadline()
    if stop_after_s is None:
        return {}
    ours = time.time() + stop_after_s
    return {checks.ENV_DEADLINE: f"{min(ours, given) if given is not None else ours:.0f}"}


def check_data_here(plan: Plan, data_dir: "str | Path | None", *, retry_failed: bool = False) -> None:
    """A one-line error, before any cell runs (and in ``--dry-run``), when enwik8 training cells
    are to run and this machine's data folder (``data_dir``, else ``$TLSTM_BENCH_DATA``) holds no
    enwik8: else each would start, fail and be stored FAILED. For cells run here only: a SLURM
    node may see another folder. (MNIST is not checked: its specs also run offline, and a dry
    run of them needs no data.)"""
    if any(c.kind == "train" and c.spec["task"] == "enwik8" for c in plan.to_run(retry_failed)):
        from ..tasks.enwik8 import find_enwik8

        try:
            find_enwik8(None, data_dir)
        except UserError as exc:
            raise UserError(f"sweep {plan.spec.name}: its enwik8 cells cannot run here: {exc}") from None


def run_sweep(spec: "str | Path | SweepSpec", *, root: "str | Path", jobs: int = 1, executor: str = "local",
              only=(), retry_failed: bool = False, device: str | None = None, slurm: SlurmOptions | None = None,
              cell_fn: str = DEFAULT_CELL_FN, progress: Progress = None, code: str | None = None,
              data_dir: "str | Path | None" = None, stop_after_s: float | None = None) -> Summary:
    """Plan and run a sweep; returns the summary (``summary.exit_code`` is what the CLI exits with).

    ``data_dir``: where the cells find enwik8 and MNIST (``TLSTM_BENCH_DATA`` in each cell's
    environment). ``stop_after_s``: a deadline this many seconds from now (or
    ``$TLSTM_BENCH_DEADLINE``, whichever is sooner): training cells stop there with their
    records, and no cell starts after it. ``progress``: a reporter of :mod:`tlstm_bench.events`;
    silent by default.
    """
    env = {**data_dir_env(data_dir), **deadline_env(stop_after_s)}
    machine = cluster_machine(executor, slurm)
    if jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {jobs}")
    # Planning reads every cell's record (and lock) before any cell runs: a corrupt record stops
    # the sweep with one line naming it, instead of surfacing midway as one cell's outcome.
    plan = plan_sweep(spec, root=root, only=only, device=device, code=code, machine=machine)
    checks.output_dir(Path(root) / plan.spec.name, "the results store")  # before any cell runs
    if executor == "local":
        check_device_here(device or plan.spec.device)
        check_data_here(plan, data_dir, retry_failed=retry_failed)
    if plan.left_out:
        note(reporter(progress), left_out_text(plan.left_out), "warning")
    deadline = checks.deadline({**os.environ, **env})
    if deadline is not None:
        note(reporter(progress), f"deadline {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(deadline))}: "
                                 "training cells stop there with their records, and no cell starts after it")
    return run_cells(plan.cells, root, jobs=jobs, executor=executor, cell_fn=cell_fn, retry_failed=retry_failed,
                     slurm=slurm, progress=progress, extra_env=env)


def run_cells(cells: list[Cell], root: "str | Path", *, jobs: int = 1, executor: str = "local",
              cell_fn: str = DEFAULT_CELL_FN, retry_failed: bool = False, slurm=None, progress: Progress = None,
              extra_env: dict | None = None) -> Summary:
    """Run the cells (already selected), wait for those that others run, and summarise.

    ``slurm``: the :class:`~.slurm.SlurmOptions` of the slurm executor. ``progress``: a
    reporter of :mod:`tlstm_bench.events` (silent by default). ``extra_env``: variables set
    for every cell process (``TLSTM_BENCH_DATA``).
    """
    root = Path(root)
    start = time.monotonic()
    report = reporter(progress)
    execute = _executor(executor, root, jobs=jobs, cell_fn=cell_fn, retry_failed=retry_failed, slurm=slurm,
                        report=report, extra_env=extra_env)
    with term_interrupts():
        outcomes, interrupted = execute(cells)
        while not interrupted and any(o.state == "taken" for o in outcomes):
            taken = [o.cell for o in outcomes if o.state == "taken"]
            outcomes = [o for o in outcomes if o.state != "taken"]
            try:
                finished, free, held = wait_elsewhere(taken, root, report=report)
            except KeyboardInterrupt:
                outcomes += [Outcome(c, "taken") for c in taken]
                interrupted = True
                break
            outcomes += finished + [Outcome(c, "taken") for c in held]
            if free:  # their owners died without a record: take them over
                more, interrupted = execute(free)
                outcomes += more
    # A cell interrupted from outside (its process or job killed) has no record: the sweep is not done.
    interrupted = interrupted or any(o.state == "interrupted" for o in outcomes)
    return Summary(cells[0].sweep if cells else "", len(cells), outcomes, time.monotonic() - start, interrupted)


def _executor(executor: str, root: Path, *, jobs, cell_fn, retry_failed, slurm, report, extra_env):
    """A function running a list of cells with ``executor``: (outcomes, interrupted)."""
    if executor == "local":
        return functools.partial(run_local, root=root, jobs=jobs, cell_fn=cell_fn, retry_failed=retry_failed,
                                 report=report, extra_env=extra_env)
    if executor == "slurm":
        return functools.partial(run_slurm, root=root, options=slurm or SlurmOptions(), cell_fn=cell_fn,
                                 retry_failed=retry_failed, report=report, extra_env=extra_env)
    raise UserError(f"unknown executor {executor!r}; use local or slurm")
