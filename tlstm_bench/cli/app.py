"""The Typer app and what every command shares: one-line errors with exit code 2."""

from __future__ import annotations

import errno
import functools
import inspect
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer.core import TyperGroup, TyperOption

from .. import __version__
from ..atomic import disk_problem
from ..checks import shortened
from ..errors import UserError


class OneLineErrors(TyperGroup):
    """The command group, with click's usage errors (a bad option value, a missing argument, an
    unknown option or command) printed as one ``error: ...`` line like every other error,
    instead of a usage block and a framed panel; the exit code stays click's (2)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as exc:  # a bare group: typer has printed its help already
            sys.exit(exc.exit_code)
        except ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            sys.exit(fail(" ".join(exc.format_message().split()) + hint, exc.exit_code).exit_code)
        except typer.Abort:
            sys.exit(fail("aborted", 1).exit_code)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=OneLineErrors,
    name="tlstm-bench",
    help="Benchmark and ablate Tensorized LSTMs against stacked LSTMs at a fixed parameter budget.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(emoji=False)  # no ":100:" -> emoji in "slstm:100: M" (names hold colons)
err_console = Console(stderr=True, emoji=False)


def _show_version(value: bool) -> None:
    if value:
        console.print(f"tlstm-bench {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_show_version,
                                                help="Print the version and exit.")] = False) -> None:
    """Benchmark and ablate Tensorized LSTMs against stacked LSTMs at a fixed parameter budget."""


def _flag_type(self, ctx):
    """A flag takes no value, so its help row shows no type (recent typers print ``<bool>``)."""
    return None if self.is_flag else _typer_type(self, ctx)


_typer_type = getattr(TyperOption, "display_type_rich", None)
if _typer_type is not None:  # typer >= 0.25 only; older ones show no type for a flag
    TyperOption.display_type_rich = _flag_type


def reflow_help(typer_app: typer.Typer) -> None:
    """Join the lines of each paragraph of every command's docstring, so that the help wraps it
    at the terminal's width: typer's rich help keeps a docstring's line breaks, which at 80
    columns break sentences mid-line. Paragraphs (blank-line separated) stay apart."""
    for info in typer_app.registered_commands:
        doc = info.help or inspect.getdoc(info.callback) or ""
        info.help = "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n"))
    for group in typer_app.registered_groups:
        reflow_help(group.typer_instance)

# Every command that reads or writes results takes the same workspace option.
ResultsDir = Annotated[Optional[Path], typer.Option(
    "--results-dir", help="Results folder: records in store/, figures in figures/ "
                          "(default: $TLSTM_BENCH_RESULTS, else ./results).")]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on one line to stderr and return the Exit to raise.

    The message is printed as it is: brackets in it (``[train]``, a path) are not rich markup.
    """
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def handles_user_errors(fn):
    """Turn a :class:`UserError` raised by the core into a one-line error and exit 2."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise fail(str(exc)) from None
        except OSError as exc:  # a disk that filled or turned read-only after the checks passed
            if exc.errno == errno.ENAMETOOLONG:  # a path no option check saw (each checks its own)
                raise fail(f"a path is too long for the file system: {shortened(str(exc.filename))}; "
                           "give a shorter one") from None
            problem = disk_problem(exc)
            if problem is None:
                raise
            raise fail(f"{problem}; free space or make it writable, then run the same command again "
                       "(what was stored is kept)", 1) from None
    return wrapper


def tolerant_streams() -> None:
    """Print what an ASCII-only terminal cannot show (a path with odd bytes, a rule) as escapes
    instead of failing with UnicodeEncodeError after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a text stream we can reconfigure
            pass


def parse_int_list(text: str, what: str) -> list[int]:
    """``"1,2,3"`` -> [1, 2, 3]; a one-line error otherwise."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{what} must be comma-separated integers like 1,4,7,10, got {text!r}") from None
    if not values:
        raise UserError(f"{what} is empty; give comma-separated integers like 1,4,7,10")
    return values
