"""``tlstm-bench visualize``: the paper's figure 6 for one model and one example."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import ResultsDir, app, console, err_console, handles_user_errors


@app.command()
@handles_user_errors
def visualize(
    source: Annotated[Optional[str], typer.Argument(
        metavar="CHECKPOINT_OR_CONFIG",
        help="A training checkpoint (checkpoint.pt or its folder) or a tLSTM configuration (2d, 3d-cn, tlstm:...).")] = None,
    best: Annotated[Optional[str], typer.Option(
        help="Instead of CHECKPOINT_OR_CONFIG: the best trained tLSTM of this sweep (its cell checkpoint).")] = None,
    results_dir: ResultsDir = None,
    task: Annotated[Optional[str], typer.Option(help="Task of the example (a configuration's default: memorization).")] = None,
    task_option: Annotated[Optional[list[str]], typer.Option(
        "--task-option", help="A task option KEY=VALUE, repeatable (symbols=5, digits=3, source=digits).")] = None,
    depth: Annotated[Optional[int], typer.Option("--depth", "-L", help="Depth L of a configuration (default 4).")] = None,
    channels: Annotated[Optional[int], typer.Option(help="Channel size M of a configuration (default 32).")] = None,
    budget: Annotated[Optional[str], typer.Option(help="Parameter budget instead of --channels (10M, slstm:100).")] = None,
    state_dict: Annotated[Optional[Path], typer.Option(help="Weights for a configuration (a state_dict file).")] = None,
    example: Annotated[int, typer.Option(help="Which example: the n-th test sample (algorithmic tasks) or a seed.")] = 0,
    out: Annotated[Optional[Path], typer.Option(help="Output path without suffix; .png and .pdf are written "
                                                     "(default figures/fig6-<task>-<config>-L<depth> in the "
                                                     "results folder).")] = None,
) -> None:
    """Draw the channel mean of the memory cell along the tensor diagonal over time (paper figure 6).

    Without a checkpoint or --state-dict the model is untrained, and the figure and this command say so.
    """
    from .. import checks
    from ..analysis.visualize import best_checkpoint, parse_task_options
    from ..analysis.visualize import visualize as draw_visualization
    from ..errors import UserError
    from ..results.store import workspace
    from ..results.view import metric_text

    folder = workspace(results_dir)
    if (source is None) == (best is None):
        raise UserError("give a checkpoint or configuration, or --best SWEEP (one of them)")
    checks.seed(example, "--example")
    if out is None:  # where the figure goes, checked before the model runs
        checks.output_dir(folder.figures, "the figures folder")
    else:
        if out.is_dir():
            raise UserError(f"--out {out} is a folder; give a path without suffix, like {out / 'fig6'}")
        stem = out.with_suffix("") if out.suffix in (".png", ".pdf") else out
        for suffix in (".png", ".pdf"):
            checks.output_file(stem.with_suffix(suffix), "--out")
    if best is not None:
        path, record = best_checkpoint(best, task=task, root=folder.store)
        console.print(f"best tLSTM in sweep {best}: {record['config']} L={int(record['depth'])} on {record['task']}, "
                      f"test {record['metric']} {metric_text(record['metric'], record['test_metric'])}",
                      highlight=False)
        source, task = str(path), None
    result = draw_visualization(source, out=out, figures=folder.figures, example=example, task=task,
                                task_options=parse_task_options(task_option), depth=depth, channels=channels,
                                budget=budget, state_dict=state_dict)
    for note in result.notes:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False)
    console.print(f"{result.origin}", highlight=False)
    console.print("wrote " + ", ".join(str(p) for p in result.paths), highlight=False)
