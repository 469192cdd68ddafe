"""``tlstm-bench gradients``: how much of the loss's gradient reaches the symbol each
memorization answer recalls, per configuration and depth, untrained or trained."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from ..results.table import TableView
from .app import app, console, err_console, handles_user_errors, parse_int_list
from .render import Renderer
from .screen import say
from .tables import draw_table


@app.command()
@handles_user_errors
def gradients(
    sources: Annotated[list[str], typer.Argument(
        metavar="CONFIG_OR_CHECKPOINT",
        help="Configurations (3d-cn, slstm, 3d-cn:input_init=normal), measured untrained at "
             "every --depths, or memorization training checkpoints (checkpoint.pt or its folder).")],
    depths: Annotated[str, typer.Option(help="Comma-separated depths L of the configurations.")] = "1,4,10",
    channels: Annotated[Optional[int], typer.Option(help="Channel size M (default 32).")] = None,
    budget: Annotated[Optional[str], typer.Option(help="Parameter budget instead of --channels (slstm:100).")] = None,
    symbols: Annotated[int, typer.Option(help="Symbols to memorize (the paper: 20).")] = 20,
    alphabet: Annotated[int, typer.Option(help="Symbols drawn from (the paper: 64).")] = 64,
    seed: Annotated[int, typer.Option(help="Seed of the untrained models: each starts as `train --seed` "
                                           "starts it.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list instead of the table.")] = False,
) -> None:
    """How much gradient reaches the symbol each memorization answer recalls, per depth.

    For answer k: the norm of d NLL(answer k) / d z, at the input step of the symbol it
    repeats (z: the projected input), over one batch of 15, float64. A value that falls with L
    means less of the loss reaches the symbol at depth (docs/fidelity.md, "Memorization: where
    learning stops").
    """
    from .. import checks
    from ..analysis.gradients import measure

    if channels is None and budget is None:
        channels = 32
    checks.seed(seed)
    levels = parse_int_list(depths, "--depths")
    with Renderer(err_console) as report:
        signals = measure(sources, levels, channels=channels, budget=budget, symbols=symbols, alphabet=alphabet,
                          seed=seed, progress=report)
    if as_json:
        print(json.dumps([s.as_dict() for s in signals]))
        return
    _render(signals, symbols=symbols, alphabet=alphabet, seed=seed)


def _render(signals, *, symbols: int, alphabet: int, seed: int) -> None:
    """The table of the recall signals, first / median / last answer, and what it shows."""
    untrained = [s for s in signals if not s.trained]
    size = f"{symbols} of {alphabet} symbols, " if untrained else ""
    table = TableView(title=f"Gradient reaching the recalled symbol (memorization, {size}batch 15, float64)")
    table.add_column("model", style="bold", breaks=",")
    for header in ("L", "M"):
        table.add_column(header, justify="right")
    with_samples = any(s.samples is not None for s in signals)
    if with_samples:
        table.add_column("samples", justify="right")
    for header in ("first answer", "median", "last answer"):
        table.add_column(header, justify="right")
    previous = None
    for signal in signals:
        if previous is not None and signal.label != previous:
            table.add_section()
        previous = signal.label
        samples = [] if not with_samples else ["" if signal.samples is None else f"{signal.samples:,}"]
        table.add_row(signal.label, str(signal.depth), str(signal.channels), *samples,
                      *(f"{v:.1e}" for v in (signal.first, signal.median, signal.last)))
    draw_table(console, table)
    notes = ["|d NLL(answer k) / d z| at the step that read the symbol answer k repeats, over the batch and "
             "the channels; the median is over the answers."]
    if untrained:
        notes.append(f"A configuration is untrained (seed {seed}, as `train --seed {seed}` starts it); "
                     "a checkpoint (FOLDER: config) has its trained weights.")
    if with_samples:
        notes.append("samples: what the checkpoint had trained on.")
    say(console, " ".join(notes))
