"""``tlstm-bench time``: ms per timestep of forward + loss + backward (SPEC section 8)."""

from __future__ import annotations

import csv
import io
import json
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..errors import UserError
from ..vocab import (DEFAULT_DTYPE, DEFAULT_PRECISION, DEVICES, DTYPES, PRECISIONS, TIMING_REPEATS, TIMING_SEQ_LEN,
                     TIMING_VOCAB, TIMING_WARMUP)
from .app import ResultsDir, app, console, err_console, handles_user_errors, parse_int_list
from .render import Renderer

CSV_FIELDS = ["config", "implementation", "depth", "channels", "tensor_size", "params", "seq_len", "device",
              "device_name", "threads", "dtype", "precision", "repeats", "ms_per_step", "ms_q25", "ms_q75", "ms_iqr"]


@app.command(name="time")
@handles_user_errors
def time_(
    configs: Annotated[list[str], typer.Argument(help="Configurations: slstm, 2d, ..., or knob strings.")],
    depths: Annotated[str, typer.Option(help="Comma-separated depths L.")] = "1,4,7,10",
    budget: Annotated[Optional[str], typer.Option(help="Parameter budget: 10M, 2500000, or slstm:400.")] = None,
    channels: Annotated[Optional[int], typer.Option(help="Channel size M (instead of --budget).")] = None,
    seq_len: Annotated[int, typer.Option(help="Sequence length T.")] = TIMING_SEQ_LEN,
    device: Annotated[str, typer.Option(help=f"{DEVICES}.")] = "cpu",
    implementation: Annotated[Optional[str], typer.Option(
        help="An implementation name, or 'all'. Default: every sLSTM implementation and the tLSTM's 'fast'.")] = None,
    repeats: Annotated[int, typer.Option(help="Timed runs per case (interleaved across cases).")] = TIMING_REPEATS,
    warmup: Annotated[int, typer.Option(help="Untimed runs per case first.")] = TIMING_WARMUP,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: torch's current count).")] = None,
    dtype: Annotated[str, typer.Option(help=" or ".join(DTYPES) + ".")] = DEFAULT_DTYPE,
    precision: Annotated[str, typer.Option(help=", ".join(PRECISIONS) + " (not ieee: triton's tensor "
                                                                      "cores).")] = DEFAULT_PRECISION,
    vocab: Annotated[int, typer.Option(help="Token input and output size (default: enwik8's).")] = TIMING_VOCAB,
    seed: Annotated[int, typer.Option(help="Seed of the model and the input.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of the records.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the records as CSV.")] = False,
    no_store: Annotated[bool, typer.Option("--no-store", help="Do not write the records to the results store "
                                                             "(by default each goes to collection 'timing').")] = False,
    results_dir: ResultsDir = None,
) -> None:
    """Time forward + loss + backward per timestep, batch 1, warm-up excluded, median and IQR."""
    from ..results import workspace  # the core is imported here: a torch-free CLI start-up
    from ..timing import measure_cases, plan_cases
    from .save import save_records

    store = not no_store
    folder = workspace(results_dir)
    if store:  # checked before timing, not after
        folder.check_writable("timing")

    if as_json and as_csv:
        raise UserError("give at most one of --json and --csv")
    levels = parse_int_list(depths, "--depths")
    cases = plan_cases(configs, levels, implementation, device)
    quiet = as_json or as_csv
    failed: dict = {}
    with Renderer(err_console) as report:
        records = measure_cases(cases, channels=channels, budget=budget, vocab=vocab, seq_len=seq_len,
                                device=device, repeats=repeats, warmup=warmup, threads=threads, dtype=dtype,
                                seed=seed, on_failure=failed.__setitem__, progress=None if quiet else report,
                                precision=precision)
    paths = save_records(records, "timing", folder.store) if store else []
    if as_json:
        print(json.dumps(records))
    elif as_csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
        print(buf.getvalue(), end="")
    elif records:
        _print_table(records, levels, paths, f"T={seq_len}, batch 1, {repeats} repeats after {warmup} warm-up")
    for case, why in failed.items():  # one implementation's failure never costs another's records
        err_console.print(f"error: {case.config} L={case.depth} {case.implementation or 'default'} failed "
                          f"(the other cases were timed): {why.splitlines()[0]}", markup=False, highlight=False,
                          soft_wrap=True)
    if failed:
        raise typer.Exit(1)


def _print_table(records: list[dict], levels: list[int], paths: list, settings: str) -> None:
    from ..results.view import WITHIN_SPREAD, WITHIN_SPREAD_NOTE

    table = runtime_table(records, levels)
    console.print(table)
    first = records[0]
    threads = f"{first['threads']} thread{'' if first['threads'] == 1 else 's'}"
    precision = "" if first.get("precision", DEFAULT_PRECISION) == DEFAULT_PRECISION else f" ({first['precision']})"
    console.print(f"{first['device_name']} ({first['device']}), {threads}, {first['dtype']}{precision}, "
                  f"flush denormals: {first['flush_denormal']}; {settings}, interleaved. "
                  "ms per timestep: median (IQR).", highlight=False)
    if any(WITHIN_SPREAD in cell for column in table.columns for cell in column.cells):
        console.print(WITHIN_SPREAD_NOTE, highlight=False)
    if paths:
        console.print(f"{len(paths)} records written under {paths[0].parent}")


def runtime_table(records: list[dict], depths: list[int]) -> Table:
    """One row per configuration and implementation: the median and (under it) the IQR at each
    depth, and the ratio of the last depth to the first. ``≈`` marks a value whose interquartile
    range overlaps an adjacent depth's (a ratio: the first and last depth's), where the
    difference is within the measured spread. 80 columns wide for up to four depths."""
    from ..results.view import WITHIN_SPREAD, quartiles, spread_overlaps

    table = Table(title="ms per timestep (forward + loss + backward)", title_justify="left")
    table.add_column("config", style="bold", overflow="fold")
    table.add_column("impl", no_wrap=True)
    table.add_column("M", justify="right", no_wrap=True)
    for d in depths:
        table.add_column(f"L={d}", justify="right", no_wrap=True)
    table.add_column(f"L{depths[-1]}/L{depths[0]}", justify="right", no_wrap=True)
    rows: dict[tuple, dict[int, dict]] = {}
    for r in records:
        rows.setdefault((r["config"], r["implementation"]), {})[r["depth"]] = r
    for (config, impl), by_depth in rows.items():
        intervals = {d: quartiles(r) for d, r in by_depth.items()}
        close = {d for pair in spread_overlaps(intervals) for d in pair}
        cells = [f"{WITHIN_SPREAD if d in close else ''}{by_depth[d]['ms_per_step']:.3f}\n({by_depth[d]['ms_iqr']:.3f})"
                 if d in by_depth else "-" for d in depths]
        first, last = by_depth.get(depths[0]), by_depth.get(depths[-1])
        ratio = "-"
        if first and last and first is not last:
            ends = spread_overlaps({0: intervals[depths[0]], 1: intervals[depths[-1]]})
            ratio = f"{WITHIN_SPREAD if ends else ''}{last['ms_per_step'] / first['ms_per_step']:.2f}"
        channels = ",".join(sorted({str(r["channels"]) for r in by_depth.values()}))
        table.add_row(config, impl, channels, *cells, ratio)
    return table
