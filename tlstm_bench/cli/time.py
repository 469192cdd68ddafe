"""``tlstm-bench time``: ms per timestep of forward + loss + backward (SPEC section 8)."""

from __future__ import annotations

import csv
import io
import json
import statistics
from typing import Annotated, Optional

import typer

from ..errors import UserError
from ..results.table import TableView
from ..vocab import (CPU_MIN_SAMPLE_S, CPU_THREADS, DEFAULT_DTYPE, DEFAULT_PRECISION, DEVICES, DTYPES, PRECISIONS,
                     TIMED_PASS, TIMING_REPEATS, TIMING_SEQ_LEN, TIMING_VOCAB, TIMING_WARMUP)
from .app import ResultsDir, app, console, err_console, handles_user_errors, parse_int_list
from .render import Renderer
from .tables import draw_table

CSV_FIELDS = ["config", "implementation", "depth", "channels", "tensor_size", "params", "seq_len", "device",
              "device_name", "threads", "dtype", "precision", "repeats", "ms_per_step", "ms_q25", "ms_q75", "ms_iqr",
              "cpu_share"]


@app.command(name="time")
@handles_user_errors
def time_(
    configs: Annotated[list[str], typer.Argument(help="Configurations: slstm, 2d, ..., or knob strings "
                                                      "(3d-cn:kernel=5, 3d-cn:cell_kernel=shift).")],
    depths: Annotated[str, typer.Option(help="Comma-separated depths L.")] = "1,4,7,10",
    budget: Annotated[Optional[str], typer.Option(help="Parameter budget: 10M, 2500000, or slstm:400.")] = None,
    channels: Annotated[Optional[int], typer.Option(help="Channel size M (instead of --budget).")] = None,
    seq_len: Annotated[int, typer.Option(help="Sequence length T.")] = TIMING_SEQ_LEN,
    device: Annotated[str, typer.Option(help=f"{DEVICES}.")] = "cpu",
    implementation: Annotated[Optional[str], typer.Option(
        help="An implementation name, or 'all'. cuda-graph and triton-graph (CUDA only) replay fast's and "
             "triton's whole step as one CUDA graph. Default: every sLSTM implementation and the tLSTM's "
             "'fast'.")] = None,
    repeats: Annotated[int, typer.Option(help="Timed runs per case (interleaved across cases).")] = TIMING_REPEATS,
    warmup: Annotated[int, typer.Option(help="Untimed runs per case first.")] = TIMING_WARMUP,
    threads: Annotated[int, typer.Option(help="CPU threads (more threads on a shared machine wait for "
                                              "each other).")] = CPU_THREADS,
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
    failed: dict = {}
    # progress goes to stderr, also with --json / --csv (stdout stays the data)
    with Renderer(err_console) as report:
        records = measure_cases(cases, channels=channels, budget=budget, vocab=vocab, seq_len=seq_len,
                                device=device, repeats=repeats, warmup=warmup, threads=threads, dtype=dtype,
                                seed=seed, min_sample_s=CPU_MIN_SAMPLE_S if device == "cpu" else 0.0,
                                on_failure=failed.__setitem__, progress=report, precision=precision)
    paths = save_records(records, "timing", folder.store) if store else []
    if as_json or as_csv:
        _print_data(records, as_json)
    elif records:
        _print_table(records, levels, paths, f"T={seq_len}, batch 1, {repeats} repeats after {warmup} warm-up"
                     + (f", samples of >= {CPU_MIN_SAMPLE_S * 1000:.0f} ms" if device == "cpu" else ""))
    for case, why in failed.items():  # one implementation's failure never costs another's records
        err_console.print(f"error: {case.config} L={case.depth} {case.implementation or 'default'} failed "
                          f"(the other cases were timed): {why.splitlines()[0]}", markup=False, highlight=False,
                          soft_wrap=True)
    if failed:
        raise typer.Exit(1)


def _print_data(records: list[dict], as_json: bool) -> None:
    """The records on stdout: a JSON list, or CSV."""
    if as_json:
        print(json.dumps(records))
        return
    buf = io.StringIO()
    writer = csv.DictWriter(buf, CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(records)
    print(buf.getvalue(), end="")


def _print_table(records: list[dict], levels: list[int], paths: list, settings: str) -> None:
    from ..results.view import FALLS, FALLS_NOTE, WITHIN_SPREAD, WITHIN_SPREAD_NOTE

    table = runtime_table(records, levels)
    draw_table(console, table)
    first = records[0]
    threads = f"{first['threads']} thread{'' if first['threads'] == 1 else 's'}"
    shares = [r["cpu_share"] for r in records if r.get("cpu_share") is not None]
    busy = f"; the process had {statistics.median(shares):.0%} of its time on the CPU" if shares else ""
    precision = "" if first.get("precision", DEFAULT_PRECISION) == DEFAULT_PRECISION else f" ({first['precision']})"
    console.print(f"{first['device_name']} ({first['device']}), {threads}, {first['dtype']}{precision}, "
                  f"flush denormals: {first['flush_denormal']}; {settings}, interleaved{busy}. "
                  "ms per timestep: median (IQR); last depth over first: median of the rounds' ratios.",
                  highlight=False)
    for mark, note in ((WITHIN_SPREAD, WITHIN_SPREAD_NOTE), (FALLS, FALLS_NOTE)):
        if any(mark in cell for row in table.rows for cell in row):
            console.print(note, highlight=False)
    if paths:
        console.print(f"{len(paths)} records written under {paths[0].parent}")
        for note in _rerun_notes(paths):
            console.print(note, highlight=False)


def _rerun_notes(paths: list) -> list[str]:
    """The store's note on the cases just timed (their records at ``paths``) whose runs (same
    code, settings and machine) differ by the rerun spread or more (``results.frame.rerun_notes``)."""
    from ..results.frame import read_frame, rerun_notes

    frame = read_frame("timing", root=paths[0].parent.parent, all_versions=True)
    written = frame["id"].isin({path.stem for path in paths})
    return rerun_notes(frame, keys=set(frame.loc[written, "key"]))


def runtime_table(records: list[dict], depths: list[int]) -> TableView:
    """One row per configuration and implementation: the median and (under it) the IQR at each
    depth, and the ratio of the last depth to the first (the median of the rounds' ratios).
    ``≈`` marks a value the data cannot order against an adjacent depth (a ratio: its first and
    last depth), ``↓`` one they order the wrong way, the deeper faster at the same M:
    ``results.view.depth_marks``, the rule ``results`` and the figures use too.
    80 columns wide for up to four depths; narrower,
    one block per row (:mod:`.tables`)."""
    from ..results.view import depth_marks, depth_ratio, ratio_mark

    table = TableView(title=f"ms per timestep ({TIMED_PASS})")
    table.add_column("config", style="bold", breaks=",")
    table.add_column("impl")
    table.add_column("M", justify="right")
    for d in depths:
        table.add_column(f"L={d}", justify="right")
    table.add_column(f"L{depths[-1]}/L{depths[0]}", justify="right")
    rows: dict[tuple, dict[int, dict]] = {}
    for r in records:
        rows.setdefault((r["config"], r["implementation"]), {})[r["depth"]] = r
    for (config, impl), by_depth in rows.items():
        marks = depth_marks(by_depth)
        cells = [f"{marks[d]}{by_depth[d]['ms_per_step']:.3f}\n({by_depth[d]['ms_iqr']:.3f})"
                 if d in by_depth else "-" for d in depths]
        first, last = by_depth.get(depths[0]), by_depth.get(depths[-1])
        ratio = "-"
        if first and last and first is not last:
            ratio = f"{ratio_mark(first, last)}{depth_ratio(first, last):.2f}"
        channels = ",".join(sorted({str(r["channels"]) for r in by_depth.values()}))
        table.add_row(config, impl, channels, *cells, ratio)
    return table
