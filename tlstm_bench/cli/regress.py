"""``tlstm-bench regress``: the CI gate on runtime vs depth (see tlstm_bench.timing.regress)."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer
from rich.table import Table

from .app import app, console, handles_user_errors


@app.command()
@handles_user_errors
def regress(
    quick: Annotated[bool, typer.Option("--quick", help="The small fixed set CI runs (seconds, not minutes).")] = False,
    update: Annotated[bool, typer.Option("--update", help="Measure and rewrite the baseline instead of checking.")] = False,
    baseline: Annotated[Optional[str], typer.Option(help="Baseline JSON (default: the shipped <device kind>.json; "
                                                          "--update writes <results dir>/baselines/).")] = None,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
) -> None:
    """Compare runtime-vs-depth ratios with the committed baseline.

    Exits 0 with no regression, 1 on a regression (which quantity, by how much), 2 when
    it could not measure (no or unreadable baseline, bad input).
    """
    from ..timing.regress import DELAY_ENV, THRESHOLD, parse_delay, regress as run_regress

    result = run_regress(quick=quick, update=update, baseline=baseline, device=device,
                         delay=parse_delay(os.environ.get(DELAY_ENV)))
    table = Table(title=f"runtime vs depth ({result.mode}) against {result.baseline_path}", title_justify="left")
    for name, justify in [("quantity", "left"), ("baseline", "right"), ("measured", "right"),
                          ("change", "right"), ("verdict", "left")]:
        table.add_column(name, justify=justify)
    style = {"ok": "green", "regression": "bold red", "faster": "cyan", "new": "yellow"}
    for row in result.rows:
        table.add_row(row.quantity, "-" if row.baseline is None else f"{row.baseline:.3f}", f"{row.measured:.3f}",
                      "-" if row.change is None else f"{row.change:.2f}x",
                      f"[{style[row.verdict]}]{row.verdict}[/]")
    console.print(table)
    if result.updated:
        console.print(f"baseline written: {result.baseline_path}")
        return
    for row in result.regressions:
        console.print(f"[bold red]regression:[/] {row.quantity} is {row.change:.2f}x its baseline "
                      f"({row.measured:.3f} vs {row.baseline:.3f}; threshold {THRESHOLD}x, confirmed by a second run)")
    if result.status:
        raise typer.Exit(1)
    console.print("no regression")
