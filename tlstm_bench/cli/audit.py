"""``tlstm-bench audit``: measure separability of configurations at several depths."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.text import Text

from ..results.table import TableView
from .app import app, console, handles_user_errors, parse_int_list
from .tables import draw_table


@app.command()
@handles_user_errors
def audit(
    configs: Annotated[Optional[list[str]], typer.Argument(help="Configurations to check (default: all seven).")] = None,
    depths: Annotated[str, typer.Option(help="Comma-separated depths L.")] = "1,2,3,4",
    channels: Annotated[int, typer.Option(help="Channel size M of the random model.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the random model and input.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of results.")] = False,
) -> None:
    """Check by float64 gradients that y_t depends on x_t and on no later input.

    Exits 1 if any configuration checked is not separable.
    """
    from .. import checks
    from ..audit import audit_one, check_auditable, explain
    from ..models import CONFIG_NAMES, parse_config

    names = configs or list(CONFIG_NAMES)
    archs = [parse_config(name) for name in names]  # fail fast on a bad name
    levels = parse_int_list(depths, "--depths")
    checks.seed(seed)
    for arch in archs:  # every size before the first audit, not after minutes of them
        for depth in levels:
            check_auditable(arch, depth, channels=channels)
    results = {(a.label, d): audit_one(a, d, channels=channels, seed=seed)
               for a in archs for d in levels}
    if as_json:
        print(json.dumps([r.as_dict() for r in results.values()]))
    else:
        table = TableView(title="Separability: does y_t depend on x_t and on no later input?")
        table.add_column("config", style="bold", breaks=",")
        for d in levels:
            table.add_column(f"L={d}", justify="center")
        table.add_column("max leak", justify="right")
        for a in archs:
            row = [results[a.label, d] for d in levels]
            table.add_row(a.label, *(_cell(r) for r in row), f"{max(r.max_leak for r in row):.1e}")
        draw_table(console, table)
        console.print("ok: y_t depends on x_t and on no later input; leak: the largest "
                      "|dy_t/dx_t'| over t' > t (exactly 0 when separable); blind: y_t does not see x_t.")
        for a in archs:
            if not all(results[a.label, d].separable for d in levels):
                reason = explain(a)
                console.print(f"[red]{a.label} is not separable[/]" + (f": {reason}." if reason else "."))
    if not all(r.separable for r in results.values()):
        raise typer.Exit(1)


def _cell(result) -> Text:
    if result.separable:
        return Text("ok", style="green")
    if result.verdict == "leaks future input":
        return Text(f"leak {result.max_leak:.1e}", style="red")
    return Text("blind", style="red")
