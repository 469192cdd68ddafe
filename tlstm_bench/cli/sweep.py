"""``tlstm-bench sweep``: run a sweep spec's cells, each isolated, resumably."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UserError
from ..checks import output_dir
from ..results.store import workspace
from ..sweeps.cell import DEFAULT_CELL_FN
from ..sweeps.run import cluster_machine, make_plan, plan_table, run_sweep, summary_line, summary_table
from ..sweeps.runner import SlurmOptions
from .app import ResultsDir, app, console, handles_user_errors


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
        help="Run only cells matching KEY=V1,V2 (keys: kind, config, depth, seed, task, implementation, id, ...); "
             "repeat for more keys (all must match; values of one key are alternatives).")] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Rerun cells whose record says failed.")] = False,
    results_dir: ResultsDir = None,
    device: Annotated[Optional[str], typer.Option(help="Override the spec's device (cpu, cuda, cuda:N).")] = None,
    data_dir: Annotated[Optional[Path], typer.Option(help="Data files of enwik8 and MNIST (sets "
                                                          "$TLSTM_BENCH_DATA for the cells).")] = None,
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
    folder = workspace(results_dir)
    root = folder.store
    if not dry_run:  # before any work: a store that cannot be written would lose every result
        output_dir(folder.root, "--results-dir" if results_dir is not None else "the results folder")
    if data_dir is not None:
        if not data_dir.is_dir():
            raise UserError(f"--data-dir {data_dir} is not a folder; give the folder that holds the data files")
        os.environ["TLSTM_BENCH_DATA"] = str(data_dir.resolve())  # inherited by every cell process and job
    if executor not in ("local", "slurm"):
        raise UserError(f"unknown --executor {executor!r}; use local or slurm")
    slurm = SlurmOptions(partition=partition, gpus_per_job=gpus_per_job, time_limit_min=time_limit,
                         array_parallelism=array_parallelism, cpus_per_job=cpus_per_job, cluster=submitit_cluster)
    if dry_run:
        plan = make_plan(spec, root=root, only=only or (), device=device, machine=cluster_machine(executor, slurm))
        console.print(plan_table(plan, retry_failed=retry_failed))
        return
    summary = run_sweep(spec, root=root, jobs=jobs, executor=executor, only=only or (), retry_failed=retry_failed,
                        device=device, slurm=slurm, cell_fn=cell_fn, console=console)
    table = summary_table(summary)
    if table is not None:
        console.print(table)
    console.print(summary_line(summary), highlight=False)
    console.print(f"records in {Path(root) / summary.sweep}", highlight=False)
    if summary.exit_code:
        raise typer.Exit(summary.exit_code)
