"""``tlstm-bench regress``: the CI gate on runtime vs depth (see tlstm_bench.timing.regress)."""

from __future__ import annotations

import json
import os
from typing import Annotated, Optional

import typer
from rich.text import Text

from ..results.table import TableView
from .app import ResultsDir, app, console, handles_user_errors
from .tables import draw_table

FORMATS = ("table", "markdown", "json")
COUNTER_LABELS = {"ops_fwd": "ops fwd", "ops_bwd": "ops bwd", "flops_fwd": "FLOPs fwd", "flops_bwd": "FLOPs bwd",
                  "bytes_fwd": "bytes fwd", "bytes_bwd": "bytes bwd"}


@app.command()
@handles_user_errors
def regress(
    quick: Annotated[bool, typer.Option("--quick", help="The small fixed set CI runs (seconds, not minutes).")] = False,
    update: Annotated[bool, typer.Option("--update", help="Measure and rewrite the baseline instead of checking "
                                                          "(say why in the commit message).")] = False,
    baseline: Annotated[Optional[str], typer.Option(help="Baseline JSON (default: the shipped <device kind>.json; "
                                                          "--update writes <results dir>/baselines/).")] = None,
    device: Annotated[str, typer.Option(help="cpu or cuda (each device kind has its own baseline).")] = "cpu",
    format: Annotated[str, typer.Option(
        "--format", help="table (terminal), markdown (a CI job summary) or json.")] = "table",
    tolerance: Annotated[Optional[float], typer.Option(
        help="Timing: a ratio regresses when the low end of its 95% interval is above this x its baseline "
             "(default: the gate's, see docs/ci-gate.md; counters are always compared exactly).")] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Compare counters and runtime-vs-depth ratios with the committed baseline.

    Counters (operator calls, FLOPs, bytes per timestep) must equal the baseline's; the
    timing ratios must stay within a tolerance, judged on a 95% interval and confirmed by
    a re-run. Exits 0 with no regression, 1 on a regression (which quantity,
    configuration and depth), 2 when it could not measure (no or unreadable baseline,
    bad input).
    """
    from .. import checks
    from ..errors import UserError
    from ..timing.inject import INJECT_ENV
    from ..timing.regress import DELAY_ENV, TOLERANCE, parse_delay, regress as run_regress, update_target

    if format not in FORMATS:
        raise UserError(f"unknown --format {format!r}; use one of {', '.join(FORMATS)}")
    if tolerance is not None and not checks.number(tolerance, "--tolerance") > 1:
        raise UserError(f"--tolerance must be above 1 (a factor over the baseline), got {tolerance}")
    given = baseline is not None
    if update:  # where the baseline goes, checked before minutes of measuring
        baseline = str(baseline if baseline is not None else update_target(device, results_dir))
        checks.output_file(baseline, "--baseline")
    result = run_regress(quick=quick, update=update, baseline=baseline, device=device,
                         tolerance=TOLERANCE if tolerance is None else tolerance,
                         delay=parse_delay(os.environ.get(DELAY_ENV)), inject=os.environ.get(INJECT_ENV))
    hint = baseline_hint(result.baseline_path, update=update, given=given, quick=quick, device=device,
                         results_dir=results_dir)
    if hint:
        result.notes.append(hint)
    if format == "json":
        typer.echo(json.dumps(result.to_json(), indent=1))
    elif format == "markdown":
        typer.echo(markdown(result))
    else:
        _print_tables(result)
    if result.status:
        raise typer.Exit(1)


def baseline_hint(used: str, *, update: bool, given: bool, quick: bool, device: str, results_dir) -> str | None:
    """Which baseline the next check reads, when a user would expect another one: ``--update``
    writes into the results folder, but a check without ``--baseline`` reads the shipped one
    (the one CI gates on), so say where the new one is and how to check against it."""
    from pathlib import Path

    from ..timing.regress import default_baseline, update_target

    shipped, mode = default_baseline(device), "--quick " if quick else ""
    if update:
        if Path(used).resolve() == shipped.resolve():
            return None
        return (f"a check without --baseline still reads the shipped {shipped}; to check against the one just "
                f"written: tlstm-bench regress {mode}--baseline {used}")
    written = update_target(device, results_dir)
    if given or not written.is_file() or written.resolve() == Path(used).resolve():
        return None
    return (f"this check read the shipped baseline; the one --update wrote is {written}: add --baseline "
            f"{written} to check against it")


# ---- rendering ----------------------------------------------------------------------------

def _num(value: float | None) -> str:
    """Short enough for an 80-column table; the JSON keeps the exact integers."""
    if value is None:
        return "-"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.2f}"


def _cases(result) -> dict[tuple[str, int], dict]:
    """Counter rows grouped by (configuration, depth)."""
    out: dict[tuple[str, int], dict] = {}
    for r in result.counters:
        out.setdefault((r.config, r.depth), {})[r.counter] = r
    return out


def _case_verdict(rows: dict) -> str:
    verdicts = {r.verdict for r in rows.values()}
    for v in ("regression", "changed", "fewer", "new"):
        if v in verdicts:
            return v
    return "ok"


def _counter_cell(row) -> str:
    if row is None:
        return "-"
    if row.verdict in ("ok", "new"):
        return _num(row.per_step(row.measured))
    return f"{_num(row.per_step(row.measured))} (was {_num(row.per_step(row.baseline))})"


def change_lines(result) -> list[str]:
    """One line per regression or change: quantity, configuration, depth, values."""
    lines = []
    for r in result.counters:
        if r.verdict in ("regression", "fewer", "changed"):
            word = {"regression": "regression", "fewer": "fewer (update the baseline)",
                    "changed": "changed (other torch version)"}[r.verdict]
            lines.append(f"{word}: {r.counter} of {r.config} at L={r.depth} is {_num(r.per_step(r.measured))} "
                         f"per timestep, baseline {_num(r.per_step(r.baseline))} ({r.change - 1:+.1%})")
    for r in result.timing:
        if r.verdict == "regression":
            again = "confirmed by a second run" if r.confirmed else "in one run"
            lines.append(f"regression: {r.quantity} is {r.change:.2f}x its baseline ({r.measured:.3f} vs "
                         f"{r.baseline:.3f}; 95% interval {r.change_low:.2f}-{r.change_high:.2f}x, above the "
                         f"{result.tolerance}x tolerance; {again})")
    return lines


def _timing_cells(r) -> list[str]:
    interval = f"{r.low:.3f}-{r.high:.3f}"
    change = "-" if r.change is None else f"{r.change:.2f}x ({r.change_low:.2f}-{r.change_high:.2f})"
    return [r.quantity, "-" if r.baseline is None else f"{r.baseline:.3f}", f"{r.measured:.3f}", interval, change]


def _print_tables(result) -> None:
    style = {"ok": "green", "regression": "bold red", "faster": "cyan", "fewer": "cyan", "new": "yellow",
             "changed": "yellow"}
    counters = TableView(title=f"counters per timestep ({result.mode}) against {result.baseline_path}: exact")
    counters.add_column("config", breaks=",")
    counters.add_column("L", justify="right")
    for label in COUNTER_LABELS.values():
        counters.add_column(label, justify="right", wrap=True)  # "1.2M (was 1.1M)": two lines where narrow
    counters.add_column("verdict")
    for (config, depth), rows in _cases(result).items():
        verdict = _case_verdict(rows)
        counters.add_row(config, str(depth), *[_counter_cell(rows.get(c)) for c in COUNTER_LABELS],
                         Text(verdict, style=style[verdict]))
    draw_table(console, counters)
    timing = TableView(title=f"timing ratios: median of paired rounds, 95% interval; regression when the interval's "
                             f"low end is above {result.tolerance}x the baseline")
    for name in ("quantity", "baseline", "measured", "interval", "change", "verdict"):
        timing.add_column(name, justify="left" if name in ("quantity", "verdict") else "right", wrap=name == "change")
    for r in result.timing:
        timing.add_row(*_timing_cells(r), Text(r.verdict, style=style[r.verdict]))
    draw_table(console, timing)
    if result.updated:
        console.print(f"baseline written: {result.baseline_path}", highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if result.updated:
        return
    for line in change_lines(result):
        color = "bold red" if line.startswith("regression") else "cyan"
        word, rest = line.split(":", 1)
        console.print(f"[{color}]{word}:[/]{rest}", highlight=False)
    if not result.status:
        console.print(f"no regression ({result.wall_s:.0f} s)")


def markdown(result) -> str:
    """The report as GitHub-flavoured markdown (for ``$GITHUB_STEP_SUMMARY``)."""
    head = "baseline written" if result.updated else ("**regression**" if result.status else "no regression")
    lines = [f"### tlstm-bench regress ({result.mode}): {head}", "",
             f"Baseline `{result.baseline_path}`, torch {result.torch_version}, {result.wall_s:.0f} s"
             + (", timing confirmed by a re-run" if result.rerun else "") + ".", ""]
    changes = change_lines(result)
    if changes:
        lines += [f"- {line}" for line in changes] + [""]
    lines += [f"- note: {note}" for note in result.notes] + ([""] if result.notes else [])
    lines += ["**Counters per timestep** (exact; `(was X)` marks a change)", "",
              "| config | L | " + " | ".join(COUNTER_LABELS.values()) + " | verdict |",
              "|---|---:|" + "---:|" * len(COUNTER_LABELS) + "---|"]
    for (config, depth), rows in _cases(result).items():
        cells = " | ".join(_counter_cell(rows.get(c)) for c in COUNTER_LABELS)
        lines.append(f"| {config} | {depth} | {cells} | {_case_verdict(rows)} |")
    lines += ["", f"**Timing ratios** (median of paired interleaved rounds, 95% interval; regression when the "
                  f"interval's low end is above {result.tolerance}x the baseline)", "",
              "| quantity | baseline | measured | interval | change | verdict |", "|---|---:|---:|---:|---:|---|"]
    for r in result.timing:
        lines.append("| " + " | ".join(_timing_cells(r)) + f" | {r.verdict} |")
    return "\n".join(lines)
