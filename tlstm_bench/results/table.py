"""A table as plain data: a title, columns, rows of text cells and a caption, nothing drawn.

Every table the CLI prints is one of these (``results``, ``time``, the sweep plan and summary,
``info``, ``budget``, ``audit``, ``regress``); :mod:`tlstm_bench.cli.tables` lays them out at the
terminal's width, the same way for all. Neither pandas nor rich is imported here, so a command
that builds a table starts as light as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Column:
    """One column. A cell is never cut and, unless ``wrap`` or ``breaks``, never broken over
    lines: numbers and names stay whole. ``wrap`` is for prose (an error message, a cell's
    settings), which may wrap between its words; ``breaks`` the characters after which a cell
    may break where the table is too narrow for it (a configuration: ``","``, so that
    ``3d-cn:cell_kernel=shift,input_init=normal`` breaks between its knobs, each whole).
    ``style`` is a rich style the CLI draws it in."""

    header: str
    justify: str = "left"  # left | right | center
    wrap: bool = False
    style: str = ""
    breaks: str = ""


@dataclass
class TableView:
    """One table. A cell holds text (the CLI may give a rich ``Text`` for colour); a line break
    in a cell starts a second line of it (a median, then its IQR). ``caption`` is a list of
    parts, each kept on one line where it fits (``code 0.1.0+src...`` never loses its value to
    the next line); ``sections`` the indices of the rows that start a new section."""

    title: str = ""
    caption: list[str] = field(default_factory=list)
    columns: list[Column] = field(default_factory=list)
    rows: list[list] = field(default_factory=list)
    header: bool = True
    sections: set[int] = field(default_factory=set)

    def add_column(self, header: str = "", **options) -> None:
        self.columns.append(Column(header, **options))

    def add_row(self, *cells) -> None:
        self.rows.append(list(cells))

    def add_section(self) -> None:
        """The next row starts a new section (a rule above it)."""
        self.sections.add(len(self.rows))
