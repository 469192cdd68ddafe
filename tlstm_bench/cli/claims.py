"""``tlstm-bench claims``: the paper's headline claims beside the best this tool has measured."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.cells import cell_len
from rich.text import Text

from ..results.table import TableView
from .app import app, console, handles_user_errors
from .screen import say
from .tables import broken, draw_table

_STYLE = {"reproduced": "green", "not reproduced": "red", "not run here": "yellow"}


@app.command()
@handles_user_errors
def claims(
    results_dir: Annotated[Optional[Path], typer.Option(
        help="A results folder, or a folder of them (every store/ under it is read). Default: "
             "./results/evidence (the checkout's committed evidence) if it is there, else the results folder.")] = None,
) -> None:
    """The paper's headline claims, each with the paper's number, the best this tool has measured,
    the record it comes from and whether it is reproduced (the rule: docs/fidelity.md)."""
    from ..plotting.claims import EVIDENCE, claim_rows, field_value, read_records, schedule_text
    from ..results.view import NOT_CAUSAL
    from ..results.store import workspace

    if results_dir is not None:
        folder = results_dir
    else:  # a checkout's committed evidence when run from its top folder; an installed copy has none
        folder = EVIDENCE if EVIDENCE.is_dir() else workspace().root
    rows = claim_rows(read_records(folder))
    draw_table(console, claims_table(rows, folder))
    sources = _sources(rows)
    numbers = _numbers(sources)
    asides = [row for row in rows if row.aside is not None]
    if asides:
        say(console, "Not counted, at a learning rate, warm-up or gradient clip the paper does not state (the rest of its "
                     "settings the same), and better than the row's:")
        for row in asides:
            record = row.aside.record
            say(console, Text(f"  {row.claim.name}: {row.aside.best}, {schedule_text(record)} "
                              f"[{numbers[_key(record)]}]"), hanging=4)
    for number, record in enumerate(sources, start=1):
        mark = NOT_CAUSAL if field_value(record, "causal") is False else ""
        config = _config(record, console.width - 4)
        parts = [f"{config}{mark} L={int(record['depth'])}",
                 str(field_value(record, "device_name") or field_value(record, "device") or "device unknown"),
                 f"commit {str(field_value(record, 'git_commit') or '-')[:7]}",
                 str(field_value(record, "date") or "")[:10]]
        head, rest = f"[{number}] {record['source']}:", ", ".join(p for p in parts if p)
        if "\n" in config:  # broken onto lines of its own, under the path, each as indented as the next
            say(console, Text(head), hanging=4)
            say(console, Text("\n".join(f"    {line}" for line in rest.split("\n"))))
        else:
            say(console, Text(f"{head} {rest}"), hanging=4)
    if any(field_value(record, "causal") is False for record in sources):
        say(console, f"{NOT_CAUSAL} not causal at this depth (the separability audit): its time counts, as the "
                     "paper's claim names every tLSTM, its 3D tLSTM+LN too; docs/fidelity.md says what the rows "
                     "read without it.")
    say(console, "The numeric claims are the 3D tLSTM+CN's, at the paper's settings, with any initialisation. "
                  "reproduced: within 1.5x of the paper's samples (runtime: of L = 1's), or its accuracy reached; "
                  "not reproduced: run to at least the paper's samples and short of it; not run here: otherwise "
                  "(how far it got). docs/fidelity.md, \"The claims table\".")


def _sources(rows) -> list[dict]:
    """The records the rows come from, each once, in the order the table numbers them, then
    those of the rows' asides (records at another learning rate or warm-up)."""
    records = [row.record for row in rows] + [row.aside.record for row in rows if row.aside is not None]
    return list({_key(record): record for record in records if record is not None}.values())


def _numbers(sources: list[dict]) -> dict:
    """Each source record's number in the list under the table ([n]), by :func:`_key`."""
    return {_key(record): n for n, record in enumerate(sources, start=1)}


def _key(record: dict):
    """One record, read once per claim: its file (two rows from one file share a number)."""
    return record.get("source") or id(record)


def _config(record: dict, width: int) -> str:
    """The configuration, with an input init recorded before it was a knob of the configuration;
    one longer than ``width`` broken after its commas into lines (it has no spaces to wrap at),
    as a table breaks it."""
    legacy = record.get("input_init")
    config = str(record["config"])
    if isinstance(legacy, str) and "input_init" not in config:
        return f"{config} (input_init={legacy})"
    if cell_len(config) <= width:
        return config
    return broken(Text(config), ",", width).plain


def claims_table(rows, folder: Path) -> TableView:
    """One row per claim: the claim, the paper's number, ours, the record ([n]: listed under the
    table with its file, device and commit) and the status. The prose columns wrap between words."""
    from ..plotting.claims import record_label

    table = TableView(title=f"The paper's claims, from the records under {folder}")
    table.add_column("claim", wrap=True)
    table.add_column("paper", wrap=True)
    table.add_column("best here", wrap=True)
    table.add_column("record", wrap=True)
    table.add_column("status")
    numbers = _numbers(_sources(rows))
    for row in rows:
        ref = "-" if row.record is None else f"[{numbers[_key(row.record)]}] {record_label(row.record)}"
        table.add_row(row.claim.name, row.claim.paper_text, row.best, ref,
                      Text(row.status, style=_STYLE[row.status]))
    return table
