"""How the CLI draws text at any width and in any locale: the rules in one place.

* **Width.** A ``COLUMNS`` that is no sane width (0, garbage, below :data:`MIN_WIDTH`) is
  unknown: the terminal's width is used, else 80. (A width of 0 printed nothing at all, error
  messages and ``--version`` included.)
* **Lines.** Text wraps between words, never inside one: a word longer than a line (a path a
  user will copy) runs long on a line of its own. Words joined by :func:`glue` (a list item
  such as ``2d-f L=1``, a caption and its value) stay on one line where they fit.
* **Locale.** Where the output stream cannot encode a mark (an ASCII locale), a one-character
  ASCII stand-in takes its place (the dagger becomes ``*``, the approximately-equal sign ``~``),
  in a table and in its footnotes alike, so columns stay aligned; anything else that cannot be
  encoded prints as an escape rather than failing.

:class:`Screen` is the console every command prints on (``app.console``, ``app.err_console``);
:mod:`.tables` draws tables by the same rules.
"""

from __future__ import annotations

import codecs
import os
import re
import sys

from rich.cells import cell_len
from rich.console import Console, ConsoleDimensions
from rich.text import Text

MIN_WIDTH = 20
FALLBACK_WIDTH = 80
GLUE = "\u00a0"  # a space that does not break a line; printed as a plain space
_NUMBER = re.compile(r"\d[\d,]*(\.\d+)?")  # stays on the line of the word after it

# The marks a table holds get one character for one, so its columns stay aligned; the rest
# (an ellipsis, the glue) appear only outside tables.
STAND_INS = {"\u2020": "*", "\u2248": "~", "\u2193": "v", "\u00b7": "-", "\u00d7": "x", "\u2013": "-", "\u2014": "-",
             "\u2026": "...", GLUE: " "}
ERRORS = "tlstm_bench.stand_ins"


def _stand_in(error: UnicodeError):
    """The codec error handler: an ASCII stand-in for a known mark, else a backslash escape."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    chars = error.object[error.start:error.end]
    return "".join(STAND_INS.get(c) or c.encode("ascii", "backslashreplace").decode("ascii") for c in chars), error.end


codecs.register_error(ERRORS, _stand_in)


def tolerant_streams() -> None:
    """Let stdout and stderr print what their encoding cannot (an ASCII locale): stand-ins for the
    marks, escapes for the rest (a path with odd bytes), instead of failing with
    UnicodeEncodeError after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors=ERRORS)
        except (AttributeError, ValueError, OSError):  # not a text stream we can reconfigure
            pass


def can_show(console: Console, text: str) -> bool:
    """Whether ``console``'s output stream can encode ``text`` as it is."""
    try:
        text.encode(console.encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def sane_width(value: str | None) -> int | None:
    """``value`` (a ``COLUMNS``) as a width, or None where it is none a table could use."""
    return int(value) if value and value.isdigit() and int(value) >= MIN_WIDTH else None


def settle_width(environ=None) -> None:
    """Forget a ``COLUMNS`` that is no sane width, so that rich (typer's help too) falls back to
    the terminal's width, else 80. The CLI calls it before each command."""
    environ = os.environ if environ is None else environ
    if "COLUMNS" in environ and sane_width(environ["COLUMNS"]) is None:
        del environ["COLUMNS"]


def keeps_lines_whole(console: Console) -> bool:
    """Whether a log line stays one line, unwrapped: piped into a file (for grep) with no width
    asked for. A terminal, or a ``COLUMNS`` given, wraps it at that width."""
    return not console.is_terminal and sane_width(os.environ.get("COLUMNS")) is None


def glue(text: str) -> str:
    """``text`` with its spaces made unbreakable: it stays on one line where it fits."""
    return text.replace(" ", GLUE)


def _units(plain: str, room: int) -> list[tuple[int, int]]:
    """(start, end) of each unit a line may break between: the words, a number with the word
    after it (``7,500 samples``), and the parts of a glued run too long for ``room``."""
    units = []
    for word in re.finditer(r"[^ ]+", plain):
        a, b = word.span()
        if GLUE in word.group() and cell_len(word.group()) > room:
            units += [(a + m.start(), a + m.end()) for m in re.finditer(f"[^{GLUE}]+", word.group())]
        elif units and _NUMBER.fullmatch(plain[units[-1][0]:units[-1][1]]) and cell_len(plain[units[-1][0]:b]) <= room:
            units[-1] = (units[-1][0], b)
        else:
            units.append((a, b))
    return units


def _wrap_line(line: Text, width: int, hanging: int) -> list[Text]:
    plain = line.plain
    indent = len(plain) - len(plain.lstrip(" ")) + hanging
    units = _units(plain, width - indent)
    if not units:
        return [line]
    lines, start, end = [], 0, None  # the first line keeps its own leading spaces
    for a, b in units:
        if end is not None and (indent if lines else 0) + cell_len(plain[start:b]) > width:
            lines.append(line[start:end])
            start = a
        end = b
    lines.append(line[start:end])
    return lines[:1] + [Text(" " * indent) + rest for rest in lines[1:]]


def wrap_words(text: Text | str, width: int, hanging: int = 0) -> Text:
    """``text`` in lines of at most ``width`` cells, broken between words only: a glued run stays
    together where it fits (and breaks at its glue where it does not), a word longer than a line
    runs long on a line of its own. A continuation is indented as its line, plus ``hanging``.
    Line breaks already in ``text`` stay; the glue comes out as plain spaces."""
    text = Text(text) if isinstance(text, str) else text
    lines = [part for line in text.split("\n", allow_blank=True) for part in _wrap_line(line, max(width, 1), hanging)]
    out = Text("\n").join(lines)
    out.plain = out.plain.replace(GLUE, " ")  # same length: the styles stay where they were
    return out


def say(console: Console, text: Text | str, *, hanging: int = 0) -> None:
    """Print ``text`` (plain, no markup) wrapped by :func:`wrap_words` at ``console``'s width."""
    console.print(wrap_words(text, console.width, hanging), soft_wrap=True, highlight=False)


class Screen(Console):
    """The console of every command: a width below :data:`MIN_WIDTH` reads as unknown (80), and a
    string or ``Text`` printed alone wraps by :func:`wrap_words` (between words, never inside
    one) unless it or the call asks for ``no_wrap``, or the call for ``soft_wrap`` or a
    ``width``. Unless given a width, it reads it when it prints, not when it is made (at import,
    before :func:`settle_width`)."""

    def __init__(self, *args, **options):
        super().__init__(*args, **options)
        if options.get("width") is None:
            self._width = None

    @property
    def size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)
        return size if size.width >= MIN_WIDTH else ConsoleDimensions(FALLBACK_WIDTH, size.height)

    @size.setter
    def size(self, new_size) -> None:
        Console.size.fset(self, new_size)

    def print(self, *objects, **options) -> None:
        plain = len(objects) == 1 and isinstance(objects[0], (str, Text)) and not getattr(objects[0], "no_wrap", False)
        if plain and options.get("soft_wrap") is None and not options.get("no_wrap") and options.get("width") is None:
            text = objects[0]
            if isinstance(text, str):
                text = self.render_str(text, emoji=options.get("emoji"), markup=options.get("markup"),
                                       highlight=options.get("highlight"))
            objects, options["soft_wrap"] = (wrap_words(text, self.width),), True
        super().print(*objects, **options)
