"""The core of ``tlstm-bench sweep``: load a spec, plan its cells, show or run them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from .. import checks
from ..errors import UserError
from .cell import DEFAULT_CELL_FN
from ..results import store
from ..results.provenance import code_version
from .grid import Cell, expand, parse_filters, select
from .runner import DONE, FAILED, SlurmOptions, Summary, cell_state, run_cells
from .spec import SweepSpec, check_device_here, load_spec


@dataclass
class Plan:
    spec: SweepSpec
    cells: list[Cell]
    states: dict[str, str]   # cell id -> done | failed | running | todo
    code_version: str

    def count(self, state: str) -> int:
        return sum(s == state for s in self.states.values())

    def to_run(self, retry_failed: bool) -> list[Cell]:
        wanted = {"todo", "failed"} if retry_failed else {"todo"}
        return [c for c in self.cells if self.states[c.id] in wanted]


def cluster_machine(executor: str, slurm: "SlurmOptions | None") -> dict | None:
    """The machine key of runtime cells run as SLURM jobs: the nodes are not known when the
    sweep is planned, so the partition stands for them (each record names the node's
    device). None (this machine) for the local executor."""
    if executor == "slurm" and (slurm is None or slurm.cluster == "slurm"):
        return {"slurm_partition": slurm.partition if slurm else None}
    return None


def make_plan(spec: "str | Path | SweepSpec", *, root: "str | Path", only=(), device: str | None = None,
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
    if device is not None and not (device in ("cpu", "cuda") or (device.startswith("cuda:") and device[5:].isdigit())):
        raise UserError(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    code = code if code is not None else code_version()
    cells = select(expand(spec, code=code, device=device, machine=machine), parse_filters(only))
    if not cells:
        raise UserError(f"--only matches no cell of sweep {spec.name!r}; run with --dry-run and no --only "
                        f"to see the cells")
    states = {c.id: cell_state(Path(root), c) for c in cells}
    return Plan(spec, cells, states, code)


_STATE_STYLE = {"done": "green", "failed": "red", "running": "yellow", "todo": "white"}


def plan_table(plan: Plan, *, retry_failed: bool = False) -> Table:
    """One row per cell: id, kind, config, depth, seed, size, settings, state (80 columns wide).

    What every cell shares (the task, the device) is in the title, not in each row.
    """
    devices = sorted({c.spec["device"] for c in plan.cells})
    title = (f"sweep {plan.spec.name} ({plan.spec.path}), task {plan.spec.task} on {', '.join(devices)}: "
             f"{len(plan.cells)} cells, {plan.count('done')} done, {plan.count('failed')} failed, "
             f"{plan.count('running')} running elsewhere, {len(plan.to_run(retry_failed))} to run")
    table = Table(title=title, title_justify="left")
    for name in ("id", "kind", "config", "L", "seed", "size", "settings", "state"):
        table.add_column(name, justify="right" if name in ("L", "seed") else "left",
                         overflow="fold" if name in ("config", "size", "settings") else "ellipsis")
    sizes = cell_sizes(plan)
    for cell in plan.cells:
        s = cell.spec
        size = sizes[cell.id]
        if cell.kind == "runtime":
            settings = f"T={s['seq_len']} x{s['repeats']}"
            settings += "".join(f" {v}" for v, usual in ((s["implementation"], "default"), (s["dtype"], "float32"))
                                if v != usual)
        else:
            given = {**_preset_length(s), **s}  # how long it trains, from the preset if not given
            parts = [given.get("preset"), given.get("max_samples") and f"{given['max_samples']:,} samples",
                     given.get("epochs") and f"{given['epochs']} epochs",
                     given.get("batch_size") and f"batch {given['batch_size']}",
                     given.get("early_stopping") is not None and f"early_stopping={given['early_stopping']}"]
            settings = ", ".join([p for p in parts if p] + [f"{k}={v}" for k, v in s.get("options", {}).items()])
        state = plan.states[cell.id]
        shown = "failed (rerun)" if state == "failed" and retry_failed else state
        table.add_row(cell.id[:8], cell.kind, s["config"], str(s["depth"]), str(s["seed"]), size,
                      settings.strip(), f"[{_STATE_STYLE[state]}]{shown}[/]")
    table.caption = f"code version {plan.code_version}"
    return table


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
    from ..models import parse_budget, solve_channels
    from ..models.build import resolve_io
    from ..training import PRESETS
    from .grid import runtime_io

    io_of = {section.kind: runtime_io(plan.spec, section) for section in plan.spec.sections}
    sizes = {}
    for cell in plan.cells:
        s = cell.spec
        channels, budget, note = s.get("channels"), s.get("budget"), ""
        if channels is None and budget is None and s.get("preset") in PRESETS:
            preset = PRESETS[s["preset"]]
            channels, budget, note = preset.channels, preset.budget, " (preset)"
        if channels is not None:
            sizes[cell.id] = f"M={channels}{note}"
            continue
        if budget is None:
            sizes[cell.id] = "(preset)"
            continue
        io = io_of[cell.kind]
        try:
            r, out, _ = resolve_io(io.get("vocab"), io.get("input_size"), io.get("output_size"))
            m = solve_channels(s["config"], s["depth"], parse_budget(budget, input_size=r, output_size=out), r, out)
            sizes[cell.id] = f"{budget} -> M={m}{note}"
        except UserError:
            sizes[cell.id] = f"{budget} (too small){note}"
    return sizes


def summary_table(summary: Summary) -> Table | None:
    """The cells that failed or have no record, and why; None if there are none."""
    rows = summary.failures + [o for o in summary.outcomes if o.state not in (*DONE, *FAILED)]
    if not rows:
        return None
    failed, missing = len(summary.failures), len(rows) - len(summary.failures)
    title = ", ".join(part for part in (failed and f"{failed} failed cells",
                                        missing and f"{missing} cells without a record") if part)
    table = Table(title=title, title_justify="left")
    for name in ("id", "cell", "error"):
        table.add_column(name)
    for outcome in rows:
        note = {"skipped-failed": " (earlier run; --retry-failed reruns it)", "elsewhere-failed": " (another run)",
                "taken": "still running elsewhere", "interrupted": "interrupted"}.get(outcome.state, "")
        table.add_row(outcome.cell.id[:10], outcome.cell.label(), f"{outcome.error or ''}{note}".strip() or "failed")
    return table


def summary_line(summary: Summary) -> str:
    ran = summary.count("ok", "failed")
    line = (f"sweep {summary.sweep}: {summary.planned} cells; ran {ran} ({summary.count('ok')} ok, "
            f"{summary.count('failed')} failed), already done {summary.count('skipped-done')}, "
            f"failed earlier {summary.count('skipped-failed')}, "
            f"done by another run {summary.count('elsewhere-ok', 'elsewhere-failed')}; "
            f"wall time {summary.wall_time_s:.1f} s")
    if summary.missing:
        line += f"; {summary.missing} cell{' has' if summary.missing == 1 else 's have'} no record"
    if summary.interrupted:
        line += "; interrupted (rerun the same command to resume)"
    elif summary.missing:
        line += " (see the table above)"
    return line


def run_sweep(spec: "str | Path | SweepSpec", *, root: "str | Path", jobs: int = 1, executor: str = "local",
              only=(), retry_failed: bool = False, device: str | None = None, slurm: SlurmOptions | None = None,
              cell_fn: str = DEFAULT_CELL_FN, console=None, code: str | None = None) -> Summary:
    """Plan and run a sweep; returns the summary (``summary.exit_code`` is what the CLI exits with)."""
    if jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {jobs}")
    plan = make_plan(spec, root=root, only=only, device=device, code=code, machine=cluster_machine(executor, slurm))
    checks.output_dir(Path(root) / plan.spec.name, "the results store")  # before any cell runs
    if executor == "local":
        check_device_here(device or plan.spec.device)
    return run_cells(plan.cells, root, jobs=jobs, executor=executor, cell_fn=cell_fn, retry_failed=retry_failed,
                     slurm=slurm, console=console)
