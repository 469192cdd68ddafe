"""The Typer app and what every command shares: one-line errors with exit code 2."""

from __future__ import annotations

import errno
import functools
import inspect
import re
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer.core import TyperArgument, TyperGroup, TyperOption

from .. import __version__
from ..atomic import disk_problem
from ..checks import shortened
from ..errors import UserError
from .screen import Screen, settle_width, tolerant_streams


class OneLineErrors(TyperGroup):
    """The command group, with click's usage errors (a bad option value, a missing argument, an
    unknown option or command) printed as one ``error: ...`` line like every other error,
    instead of a usage block and a framed panel; the exit code stays click's (2)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        settle_width()  # before anything prints: a COLUMNS of 0 printed nothing, --help and errors included
        tolerant_streams()
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
console = Screen(emoji=False)  # no ":100:" -> emoji in "slstm:100: M" (names hold colons)
err_console = Screen(stderr=True, emoji=False)


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


def _argument_name(self) -> str:
    """An argument as the help and its errors name it, click's way: ``CONFIG``, and one item of
    a list named in the plural (``configs``): the help adds the dots, ``CONFIG...``."""
    if self.metavar is not None:
        return self.metavar
    name = self.name.upper()
    return name[:-1] if self.nargs != 1 and name.endswith("S") else name


def _usage_name(self) -> str:
    """The same on the usage line, ``[SWEEP]...`` when optional; recent typers print
    ``{configs}...``, which reads as a literal to type."""
    name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
    return name + ("..." if self.nargs != 1 else "")


def _item_type(self, ctx):
    """The type of one item (``<str>``), not of the list (``<list[str]>``): a list argument's
    name ends in dots, and a list option is given once per item."""
    shown = self._typer_item_type(ctx)
    return re.sub(r"list\[(.*)\]", r"\1", shown) if isinstance(shown, str) else shown


if hasattr(TyperArgument, "_usage_display_name"):  # recent typers only; older ones print NAME...
    TyperArgument.display_name_raw = property(_argument_name)
    TyperArgument._usage_display_name = _usage_name
for _param in (TyperArgument, TyperOption):
    if hasattr(_param, "display_type_rich"):
        _param._typer_item_type = _param.display_type_rich
        _param.display_type_rich = _item_type


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


def parse_int_list(text: str, what: str) -> list[int]:
    """``"1,2,3"`` -> [1, 2, 3]; a one-line error otherwise."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{what} must be comma-separated integers like 1,4,7,10, got {text!r}") from None
    if not values:
        raise UserError(f"{what} is empty; give comma-separated integers like 1,4,7,10")
    return values
