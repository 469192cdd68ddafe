"""``tlstm-bench results``: the results store as a table, CSV, Markdown or Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..errors import UserError
from ..results import default_root
from ..sweeps.export import FORMATS, export, results_frame, shown_columns
from .app import app, console, handles_user_errors


def _text(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@app.command()
@handles_user_errors
def results(
    sweep: Annotated[Optional[str], typer.Argument(help="A sweep (collection) name; all of them if left out.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, csv, markdown or parquet.")] = "table",
    out: Annotated[Optional[Path], typer.Option(help="Write to this file instead of the screen.")] = None,
    results_dir: Annotated[Optional[Path], typer.Option(help="Results store root (default $TLSTM_BENCH_RESULTS "
                                                              "or results/store).")] = None,
    all_versions: Annotated[bool, typer.Option("--all-versions", help="Keep every code version's record of a "
                                                                       "cell, not only the newest.")] = False,
    all_columns: Annotated[bool, typer.Option("--all-columns", help="Show every column in table and "
                                                                     "markdown (csv and parquet always do).")] = False,
) -> None:
    """Load every record of the store into one DataFrame and show or export it."""
    if fmt not in FORMATS:
        raise UserError(f"unknown --format {fmt!r}; use one of {', '.join(FORMATS)}")
    frame = results_frame(sweep, root=results_dir if results_dir is not None else default_root(),
                          all_versions=all_versions)
    if fmt == "table" and out is None:
        columns = list(frame.columns) if all_columns else shown_columns(frame)
        table = Table(title=f"{len(frame)} records" + (f" of {sweep}" if sweep else ""), title_justify="left")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in frame[columns].itertuples(index=False):
            table.add_row(*(_text(v) for v in row))
        console.print(table)
        return
    if fmt == "table":
        raise UserError("--format table is for the screen; use --format csv, markdown or parquet with --out")
    text = export(frame, fmt, out, all_columns=all_columns)
    if text is not None:
        typer.echo(text, nl=False)
    else:
        console.print(f"wrote {len(frame)} records to {out}", highlight=False)
