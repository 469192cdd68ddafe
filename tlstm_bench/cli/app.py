"""The Typer app and what every command shares: one-line errors with exit code 2."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from ..errors import UserError

app = typer.Typer(
    name="tlstm-bench",
    help="Benchmark and ablate Tensorized LSTMs against stacked LSTMs at a fixed parameter budget.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

# Every command that reads or writes results takes the same workspace option.
ResultsDir = Annotated[Optional[Path], typer.Option(
    "--results-dir", help="Results folder: records in store/, figures in figures/ "
                          "(default: $TLSTM_BENCH_RESULTS, else ./results).")]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on one line to stderr and return the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def handles_user_errors(fn):
    """Turn a :class:`UserError` raised by the core into a one-line error and exit 2."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise fail(str(exc)) from None
    return wrapper


def parse_int_list(text: str, what: str) -> list[int]:
    """``"1,2,3"`` -> [1, 2, 3]; a one-line error otherwise."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{what} must be comma-separated integers like 1,4,7,10, got {text!r}") from None
    if not values:
        raise UserError(f"{what} is empty; give comma-separated integers like 1,4,7,10")
    return values
