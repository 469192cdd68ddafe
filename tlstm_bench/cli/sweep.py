"""``tlstm-bench sweep``: run a sweep spec's cells, each isolated, resumably."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from ..results.store import workspace
from ..results.table import TableView
from ..sweeps.cell import DEFAULT_CELL_FN
from ..errors import UserError
from ..vocab import DEVICES
from .app import ResultsDir, app, console, handles_user_errors
from .render import Renderer
from .screen import say
from .tables import draw_table

_STATE_STYLE = {"done": "green", "failed": "red", "cut": "yellow", "running": "yellow", "todo": "white"}


@app.command()
@handles_user_errors
def sweep(
    spec: Annotated[str, typer.Argument(help="A shipped spec (quick, runtime, wiki, addition, memorization, "
                                             "mnist, pmnist: the last four at the paper's M, NAME-budget "
                                             "budget-matched) or a path to your own .toml file.")] = "quick",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and which cells are done; run nothing.")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Cells to run at once (local executor).")] = 1,
    executor: Annotated[str, typer.Option(help="local (subprocesses here) or slurm (submitit jobs).")] = "local",
    only: Annotated[Optional[list[str]], typer.Option(
        metavar="KEY=V1,V2", help="Run only cells matching KEY=V1,V2 (keys: kind, config, depth, seed, task, implementation, id, ...); "
             "repeat for more keys (all must match; values of one key are alternatives).")] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Rerun cells whose record says failed.")] = False,
    results_dir: ResultsDir = None,
    device: Annotated[Optional[str], typer.Option(help=f"Override the spec's device ({DEVICES}).")] = None,
    data_dir: Annotated[Optional[Path], typer.Option(help="Data files of enwik8 and MNIST (sets "
                                                          "$TLSTM_BENCH_DATA for the cells).")] = None,
    stop_after: Annotated[Optional[str], typer.Option(metavar="TIME", help="End by this long from now (90s, 45m, 2h): "
        "training cells stop there and keep their records, no cell starts after it (sets $TLSTM_BENCH_DEADLINE).")] = None,
    partition: Annotated[Optional[str], typer.Option(help="SLURM partition.", rich_help_panel="SLURM")] = None,
    gpus_per_job: Annotated[int, typer.Option(help="GPUs per SLURM job.", rich_help_panel="SLURM")] = 0,
    cpus_per_job: Annotated[Optional[int], typer.Option(help="CPUs per SLURM job.", rich_help_panel="SLURM")] = None,
    time_limit: Annotated[int, typer.Option(help="SLURM time limit per job, minutes (raised to the spec's "
                                                 "timeout if lower).", rich_help_panel="SLURM")] = 60,
    array_parallelism: Annotated[int, typer.Option(help="Most SLURM array jobs running at once.",
                                                   rich_help_panel="SLURM")] = 32,
    submitit_cluster: Annotated[str, typer.Option(hidden=True, help="slurm or local (submitit's local executor).")] = "slurm",
    cell_fn: Annotated[str, typer.Option(hidden=True, help="Cell function module:name (tests).")] = DEFAULT_CELL_FN,
) -> None:
    """Run a sweep: every cell (config x depth x seed x ...) once, skipping cells already in the store.

    Each cell runs in its own process with the spec's timeout; a failed cell fails alone. Cells
    another live sweep runs are waited for. The exit code is 0 only when every cell has a
    record: 1 if any cell failed or has none, 2 for bad input, 130 if interrupted.
    """
    from ..checks import duration
    from ..sweeps.plan import run_sweep, summary_line
    from ..sweeps.slurm import SlurmOptions

    stop_after_s = duration(stop_after, "--stop-after") if stop_after is not None else None
    folder = workspace(results_dir)
    root = folder.store
    if not dry_run:  # before any work: a store that cannot be written would lose every result
        folder.check_writable()
    slurm = SlurmOptions(partition=partition, gpus_per_job=gpus_per_job, time_limit_min=time_limit,
                         array_parallelism=array_parallelism, cpus_per_job=cpus_per_job, cluster=submitit_cluster)
    if dry_run:
        print_plan(spec, root, only=only or (), device=device, executor=executor, slurm=slurm, data_dir=data_dir,
                   retry_failed=retry_failed)
        return
    with Renderer(console) as report:
        summary = run_sweep(spec, root=root, jobs=jobs, executor=executor, only=only or (),
                            retry_failed=retry_failed, device=device, slurm=slurm, cell_fn=cell_fn, progress=report,
                            data_dir=data_dir, stop_after_s=stop_after_s)
    table = summary_table(summary)
    if table is not None:
        draw_table(console, table)
    console.print(summary_line(summary), highlight=False)
    console.print(f"records in {Path(root) / summary.sweep}", highlight=False)
    if summary.exit_code:
        raise typer.Exit(summary.exit_code)


def print_plan(spec, root: Path, *, only, device, executor: str, slurm, data_dir, retry_failed: bool) -> None:
    """``--dry-run``: the plan's table, after the checks a run would make first (the data folder,
    the data the cells need here)."""
    from ..sweeps.plan import check_data_here, cluster_machine, data_dir_env, plan_sweep

    data_dir_env(data_dir)  # checked, though no cell runs
    plan = plan_sweep(spec, root=root, only=only, device=device, machine=cluster_machine(executor, slurm))
    if executor == "local":  # the cells would find no data here: say so now, not as FAILED records
        check_data_here(plan, data_dir, retry_failed=retry_failed)
    draw_table(console, plan_table(plan, retry_failed=retry_failed))
    if executor == "local":  # a plan still prints on a laptop; say that running it here would be refused
        from ..sweeps.spec import check_device_here

        try:
            check_device_here(device or plan.spec.device)
        except UserError as refused:
            say(console, Text(f"note: running it here would be refused: {refused}", style="yellow"), hanging=2)


def plan_table(plan, *, retry_failed: bool = False) -> TableView:
    """One row per cell: id, kind, config, depth, seed, size, settings, state, one line each at
    80 columns.

    What every cell shares (the task, the device) is in the title, not in each row; so are the
    settings every cell of a kind shares (a train cell's preset and length) and the seed when
    there is one, and a column left with nothing to say is dropped. The spec's path is never
    broken: where it does not fit, it runs long on a line of its own, whole, to copy.
    """
    from ..sweeps.plan import PLAN_COLUMNS, plan_rows, plan_title

    rows = plan_rows(plan, retry_failed=retry_failed)
    title = [plan_title(plan, retry_failed=retry_failed)]
    for kind in dict.fromkeys(row["kind"] for row in rows):
        settings = {row["settings"] for row in rows if row["kind"] == kind}
        if len(settings) == 1 and len(rows) > 1:
            title.append(f"{kind} cells: {settings.pop()}")
            for row in rows:
                if row["kind"] == kind:
                    row["settings"] = ""
    seeds = {row["seed"] for row in rows}
    if len(seeds) == 1 and len(rows) > 1:
        title.append(f"seed {seeds.pop()}")
        for row in rows:
            row["seed"] = ""
    columns = [name for name in PLAN_COLUMNS[:-1] if any(row[name] for row in rows)]
    table = TableView(title="\n".join(title), caption=[f"code version {plan.code_version}"])
    for name in columns:
        table.add_column(name, justify="right" if name in ("L", "seed") else "left", wrap=name in ("size", "settings"),
                         breaks="," if name == "config" else "")
    table.add_column(PLAN_COLUMNS[-1])
    for row in rows:
        table.add_row(*(row[name] for name in columns), Text(row["shown"], style=_STATE_STYLE[row["state"]]))
    return table


def summary_table(summary) -> TableView | None:
    """The cells that failed or have no record, and why; None if there are none."""
    from ..sweeps.plan import SUMMARY_COLUMNS, summary_rows

    described = summary_rows(summary)
    if described is None:
        return None
    title, rows = described
    table = TableView(title=title)
    for name in SUMMARY_COLUMNS:
        table.add_column(name, wrap=name == "error", breaks="," if name == "config" else "")
    for row in rows:
        table.add_row(*(row[name] for name in SUMMARY_COLUMNS))
    return table
