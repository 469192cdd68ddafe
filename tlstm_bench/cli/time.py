"""``tlstm-bench time``: ms per timestep of forward + loss + backward (SPEC section 8)."""

from __future__ import annotations

import csv
import io
import json
from typing import Annotated, Optional, TYPE_CHECKING

import typer
from rich.table import Table

from ..errors import UserError
if TYPE_CHECKING:
    from ..timing import Case

from .app import ResultsDir, app, console, err_console, handles_user_errors, parse_int_list

CSV_FIELDS = ["config", "implementation", "depth", "channels", "tensor_size", "params", "seq_len", "device",
              "device_name", "threads", "dtype", "repeats", "ms_per_step", "ms_q25", "ms_q75", "ms_iqr"]


def plan_cases(configs: list[str], depths: list[int], implementation: str | None, device: str) -> list[Case]:
    """The cases to time: every config x depth x implementation.

    No implementation: every sLSTM implementation (fused, wavefront, loop) and the tLSTM's
    ``fast``. ``all``: every registered implementation (``cuda-graph`` and ``triton`` only
    on cuda). A name: used for the configurations that have it (an error if none does).
    """
    from ..models import SLSTM_IMPLEMENTATIONS, TLSTM_IMPLEMENTATIONS, parse_config
    from ..models.tlstm import CUDA_IMPLEMENTATIONS
    from ..timing import Case
    from ..timing.protocol import default_implementation

    cases = []
    for config in configs:
        arch = parse_config(config)
        table = SLSTM_IMPLEMENTATIONS if arch.kind == "slstm" else TLSTM_IMPLEMENTATIONS
        if implementation == "all" or (implementation is None and arch.kind == "slstm"):
            names = [n for n in table if n not in CUDA_IMPLEMENTATIONS or device.startswith("cuda")]
        elif implementation is None:
            names = [default_implementation(config)]
        else:
            names = [implementation] if implementation in table else []
        cases += [Case(arch.label, d, n) for n in names for d in depths]
    if not cases:
        known = sorted(set(SLSTM_IMPLEMENTATIONS) | set(TLSTM_IMPLEMENTATIONS))
        raise UserError(f"no configuration given has implementation {implementation!r}; "
                        f"use one of {', '.join(known)} or all")
    return cases


@app.command(name="time")
@handles_user_errors
def time_(
    configs: Annotated[list[str], typer.Argument(help="Configurations: slstm, 2d, ..., or knob strings.")],
    depths: Annotated[str, typer.Option(help="Comma-separated depths L.")] = "1,4,7,10",
    budget: Annotated[Optional[str], typer.Option(help="Parameter budget: 10M, 2500000, or slstm:400.")] = None,
    channels: Annotated[Optional[int], typer.Option(help="Channel size M (instead of --budget).")] = None,
    seq_len: Annotated[int, typer.Option(help="Sequence length T.")] = 100,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    implementation: Annotated[Optional[str], typer.Option(
        help="An implementation name, or 'all'. Default: every sLSTM implementation and the tLSTM's 'fast'.")] = None,
    repeats: Annotated[int, typer.Option(help="Timed runs per case (interleaved across cases).")] = 10,
    warmup: Annotated[int, typer.Option(help="Untimed runs per case first.")] = 3,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: torch's current count).")] = None,
    dtype: Annotated[str, typer.Option(help="float32 or float64.")] = "float32",
    vocab: Annotated[int, typer.Option(help="Token input and output size.")] = 205,
    seed: Annotated[int, typer.Option(help="Seed of the model and the input.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of the records.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the records as CSV.")] = False,
    store: Annotated[bool, typer.Option(help="Write each record to the results store (collection 'timing').")] = True,
    results_dir: ResultsDir = None,
) -> None:
    """Time forward + loss + backward per timestep, batch 1, warm-up excluded, median and IQR."""
    from .. import checks
    from ..results import workspace  # the core is imported here: a torch-free CLI start-up
    from ..timing import measure_cases
    from .save import save_records

    folder = workspace(results_dir)
    if store:  # checked before timing, not after
        checks.output_dir(folder.root, "--results-dir")
        checks.output_dir(folder.store / "timing", "the records folder")

    if as_json and as_csv:
        raise UserError("give at most one of --json and --csv")
    levels = parse_int_list(depths, "--depths")
    cases = plan_cases(configs, levels, implementation, device)
    quiet = as_json or as_csv
    records = measure_cases(cases, channels=channels, budget=budget, vocab=vocab, seq_len=seq_len,
                            device=device, repeats=repeats, warmup=warmup, threads=threads, dtype=dtype,
                            seed=seed, progress=None if quiet else (lambda m: err_console.print(m, style="dim")))
    paths = save_records(records, "timing", folder.store) if store else []
    if as_json:
        print(json.dumps(records))
    elif as_csv:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
        print(buf.getvalue(), end="")
    else:
        console.print(runtime_table(records, levels))
        first = records[0]
        console.print(f"{first['device_name']} ({first['device']}), {first['threads']} threads, {first['dtype']}, "
                      f"flush denormals: {first['flush_denormal']}; T={seq_len}, batch 1, {repeats} repeats "
                      f"after {warmup} warm-up, interleaved. ms per timestep: median (IQR).")
        if paths:
            console.print(f"{len(paths)} records written under {paths[0].parent}")


def runtime_table(records: list[dict], depths: list[int]) -> Table:
    table = Table(title="ms per timestep (forward + loss + backward)", title_justify="left")
    table.add_column("config", style="bold")
    table.add_column("implementation")
    table.add_column("M", justify="right")
    for d in depths:
        table.add_column(f"L={d}", justify="right")
    table.add_column(f"L={depths[-1]}/L={depths[0]}", justify="right")
    rows: dict[tuple, dict[int, dict]] = {}
    for r in records:
        rows.setdefault((r["config"], r["implementation"]), {})[r["depth"]] = r
    for (config, impl), by_depth in rows.items():
        cells = [f"{by_depth[d]['ms_per_step']:.3f} ({by_depth[d]['ms_iqr']:.3f})" if d in by_depth else "-"
                 for d in depths]
        first, last = by_depth.get(depths[0]), by_depth.get(depths[-1])
        ratio = f"{last['ms_per_step'] / first['ms_per_step']:.2f}" if first and last else "-"
        channels = ",".join(sorted({str(r["channels"]) for r in by_depth.values()}))
        table.add_row(config, impl, channels, *cells, ratio)
    return table
