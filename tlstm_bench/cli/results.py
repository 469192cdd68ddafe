"""``tlstm-bench results``: the results store as tables for a reader, or CSV, JSON, Markdown, Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UserError
from .app import ResultsDir, app, console, err_console, handles_user_errors
from .tables import draw_table


@app.command()
@handles_user_errors
def results(
    sweep: Annotated[Optional[str], typer.Argument(help="A collection: a sweep's name, training or timing "
                                                        "(default: all).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, csv, json, markdown or parquet.")] = "table",
    out: Annotated[Optional[Path], typer.Option(help="Write to this file instead of the screen.")] = None,
    columns: Annotated[Optional[str], typer.Option(help="Comma-separated columns to show or export "
                                                        "(any record field, e.g. config,depth,ms_per_step).")] = None,
    wide: Annotated[bool, typer.Option("--wide", help="Every column that has a value (tables and markdown; csv, "
                                                      "json and parquet always have every column).")] = False,
    all_versions: Annotated[bool, typer.Option("--all-versions", help="Keep every record of a cell, not only "
                                                                       "the newest.")] = False,
    by_depth: Annotated[bool, typer.Option("--by-depth", help="A column per depth (table or markdown): runtime "
                                                              "records a row per configuration, implementation "
                                                              "and size; training records a row per "
                                                              "configuration, the mean test metric over seeds "
                                                              "and the samples to solve.")] = False,
    fastest: Annotated[bool, typer.Option("--fastest", help="With --by-depth: each configuration's fastest "
                                                            "implementation per size only (the figure's lines).")] = False,
    results_dir: ResultsDir = None,
) -> None:
    """Show the records: one table per collection and kind, the columns that matter for it.

    A configuration measured not causal at that depth is marked † (its numbers are not
    comparable); one whose record predates the measurement, ?.
    """
    from ..results.export import FORMATS, export
    from ..results.frame import read_frame
    from ..checks import output_file
    from ..results.store import workspace
    from ..results.view import build_view

    if fmt not in FORMATS:
        raise UserError(f"unknown --format {fmt!r}; use one of {', '.join(FORMATS)}")
    if out is not None and fmt != "table":
        output_file(out, "--out")  # before reading: a path that cannot be written is a one-line error
    chosen = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    frame = read_frame(sweep, root=workspace(results_dir).store, all_versions=all_versions)
    if fastest and not by_depth:
        raise UserError("--fastest goes with --by-depth")
    if by_depth:
        _by_depth(frame, fmt, out, fastest)
        return
    if fmt == "table":
        if out is not None:
            raise UserError("--format table is for the screen; use --format csv, json, markdown or parquet with --out")
        view = build_view(frame, columns=chosen, wide=wide)
        for table in view.tables:  # --wide: as wide as the table needs; the terminal may fold the lines
            draw_table(console, table, wide=wide)
        for note in [*view.notes, *frame.attrs.get("notes", [])]:
            console.print(note, highlight=False)
        return
    for note in frame.attrs.get("notes", []):  # on stderr: the export itself may be on stdout
        err_console.print(f"note: {note}", highlight=False)
    text = export(frame, fmt, out, columns=chosen, wide=wide)
    if text is not None:
        typer.echo(text, nl=False)
    else:
        console.print(f"wrote {len(frame)} records to {out}", highlight=False)


def _by_depth(frame, fmt: str, out: Optional[Path], fastest: bool) -> None:
    """``--by-depth``: the records a row per line of the figures, a column per depth (results/by_depth.py)."""
    from ..atomic import atomic_write
    from ..results.by_depth import by_depth, markdown

    if fmt not in ("table", "markdown"):
        raise UserError(f"--by-depth writes a table or markdown, not {fmt}")
    tables, notes = by_depth(frame, only_fastest=fastest)
    if fmt == "markdown":
        for note in frame.attrs.get("notes", []):  # the store's, on stderr: the markdown may be on stdout
            err_console.print(f"note: {note}", highlight=False)
        text = markdown(tables, notes)
        if out is None:
            typer.echo(text, nl=False)
            return
        try:
            atomic_write(out, lambda fh: fh.write(text))
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
        console.print(f"wrote {len(tables)} table(s) to {out}", highlight=False)
        return
    if out is not None:
        raise UserError("--format table is for the screen; use --format markdown with --out")
    for table in tables:
        draw_table(console, table)
    for note in [*notes, *frame.attrs.get("notes", [])]:
        console.print(note, highlight=False)

