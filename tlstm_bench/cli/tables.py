"""Every table the CLI prints, laid out at the terminal's width by one set of rules.

A table (:class:`~tlstm_bench.results.table.TableView`: ``results``, ``time``, the sweep plan and
summary, ``info``, ``budget``, ``audit``, ``regress``) is drawn in the first of these layouts
that fits the width:

1. with rules around and between the columns;
2. without them (spaces between the columns), a few columns narrower;
3. one block per row: a line per column, ``header  value``, a blank line between rows.

In none of them is a cell cut: a number, a name, a knob is drawn whole; only a column of prose
(``wrap``) wraps, between its words, and a configuration (``breaks``) breaks after the commas
between its knobs where its column must give up width. The title above and the caption under
the table wrap between words (the caption between its parts, where they fit), as
:mod:`.screen` wraps all text.
"""

from __future__ import annotations

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from .screen import glue, say

# (box, edge): the layouts with rules, widest first; the second has no vertical rules, and two
# spaces between its columns.
BOXES = ((box.HEAVY_HEAD, True), (box.SIMPLE_HEAD, False))


def _text(cell) -> Text:
    return cell if isinstance(cell, Text) else Text(str(cell))


def _overhead(columns: int, edge: bool) -> int:
    """The cells a layout adds to its columns' widths: with ``edge``, a space each side of a cell
    and a rule between cells and around them; without, a space and a blank rule between cells."""
    return 3 * columns + 1 if edge else 2 * columns - 2


def _cuts(plain: str, chars: str) -> list[int]:
    """The offsets just after each of ``chars`` in ``plain`` (not at its end): where it may break."""
    return [i + 1 for i, ch in enumerate(plain) if ch in chars and i + 1 < len(plain)]


def _pieces(plain: str, chars: str) -> list[str]:
    bounds = [0, *_cuts(plain, chars), len(plain)]
    return [plain[a:b] for a, b in zip(bounds, bounds[1:])]


def column_widths(table) -> tuple[list[int], list[int]]:
    """Each column's natural width (its widest line, header included) and its least: the same,
    or for a ``wrap`` column its longest word (its header's words included), for a ``breaks``
    column its longest piece between breaks."""
    natural, least = [], []
    for i, column in enumerate(table.columns):
        lines = [line for row in table.rows for line in _text(row[i]).plain.split("\n")]
        natural.append(max([cell_len(column.header), 1] + [cell_len(line) for line in lines]))
        if column.wrap:
            words = column.header.split() + [word for line in lines for word in line.split()]
        elif column.breaks:
            words = [column.header] + [piece for line in lines for piece in _pieces(line, column.breaks)]
        else:
            words = []
        least.append(max([1] + [cell_len(word) for word in words]) if words else natural[-1])
    return natural, least


def broken(cell: Text, chars: str, width: int) -> Text:
    """``cell`` with a line break after those of ``chars`` that keep each line within ``width``
    (greedily: as much on a line as fits); a piece wider than ``width`` stays whole."""
    lines = []
    for line in cell.split("\n"):
        start, last, offsets = 0, 0, []
        for cut in [*_cuts(line.plain, chars), len(line.plain)]:
            if cell_len(line.plain[start:cut]) > width and last > start:
                offsets.append(last)
                start = last
            last = cut
        lines.extend(line.divide(offsets))
    return Text("\n").join(lines)


def fit(table, width: int) -> tuple[list[int], object, bool] | None:
    """(column widths, box, edge) of the first layout with rules that fits ``width``; None when
    only blocks do. A ``wrap`` or ``breaks`` column gives up width first, down to its longest
    word or piece."""
    natural, least = column_widths(table)
    for style, edge in BOXES:
        room = width - _overhead(len(natural), edge)
        if sum(least) <= room:
            widths = list(natural)
            while sum(widths) > room:
                slack = max(range(len(widths)), key=lambda i: widths[i] - least[i])
                widths[slack] -= 1
            return widths, style, edge
    return None


def draw_table(console: Console, table, *, wide: bool = False) -> None:
    """Print ``table``: the widest layout that fits the terminal, or, ``wide``, every cell on one
    line at the width the table needs (the terminal may fold its lines)."""
    if table.title:
        say(console, Text(table.title, style="italic"))
    layout = (column_widths(table)[0], *BOXES[0]) if wide else fit(table, console.width)
    if layout is None:
        _blocks(console, table)
    else:
        _grid(console, table, *layout)
    if table.caption:
        say(console, Text(" ".join(glue(part) for part in table.caption), style="dim"))


def _grid(console: Console, table, widths: list[int], style, edge: bool) -> None:
    grid = Table(box=style, show_edge=edge, pad_edge=edge, collapse_padding=not edge, show_header=table.header)
    for column, width in zip(table.columns, widths):
        grid.add_column(column.header, justify=column.justify, style=column.style, width=width,
                        no_wrap=not column.wrap, overflow="fold")
    for i, row in enumerate(table.rows):
        cells = [broken(_text(cell), column.breaks, width) if column.breaks else _text(cell)
                 for column, cell, width in zip(table.columns, row, widths)]
        grid.add_row(*cells, end_section=i + 1 in table.sections)
    total = sum(widths) + _overhead(len(widths), edge)
    if total <= console.width:
        console.print(grid)
        return
    lines = console.render_lines(grid, console.options.update(width=total), pad=False)  # --wide
    console.print(Segments(segment for line in lines for segment in [*line, Segment.line()]), soft_wrap=True, end="")


def _blocks(console: Console, table) -> None:
    """One block per row, ``header  value`` a line; a header-less table (a model card): one line
    per row, its first cell as the label, a blank line between sections."""
    if table.header:
        records = [[(c.header, _text(cell), c.breaks) for c, cell in zip(table.columns, row)] for row in table.rows]
    else:
        records = [[(_text(row[0]).plain, Text("  ").join(map(_text, row[1:])), "")] for row in table.rows]
    label = max((cell_len(name) for record in records for name, _, _ in record), default=0)
    beside = label + 2 + 8 <= console.width  # room for a short value beside; else it goes under its label
    indent = label + 2 if beside else 2
    for i, record in enumerate(records):
        if i and (table.header or i in table.sections):
            console.print()
        for name, value, breaks in record:
            # a configuration breaks after its commas, as in a table; other text wraps between words
            lines = (broken(Text(" ").join(value.split("\n")), breaks, console.width - indent).split("\n")
                     if breaks else [Text(" ").join(value.split("\n"))])
            if beside:
                say(console, Text(name.ljust(indent), style="bold") + lines[0], hanging=indent)
            else:
                say(console, Text(name, style="bold"))
                say(console, Text(" " * indent) + lines[0])
            for line in lines[1:]:
                say(console, Text(" " * indent) + line, hanging=indent)
