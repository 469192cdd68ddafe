"""One colour, marker and x offset per configuration line, shared by every panel of a figure.

The seven presets keep one colour and marker in every figure (SPEC section 6 order). Any other
configuration (a knob string: ``3d-cn:cell_kernel=shift``, ``tlstm:dims=4``, the ``lstm`` anchor)
gets one of its figure's own: the first of them the first variant colour and marker, and so on,
so two lines of one figure never share both (an initialisation search crosses eight variants of
3d-cn; a colour by hash of the name gave two of them the same colour and marker).

Points of one depth are shifted apart along x by the line's rank in the figure, centred, so
equal values (two lines at 100%) stay visible.
"""

from __future__ import annotations

import textwrap

from ..results.frame import config_order

PRESET_STYLES = {
    "slstm": ("black", "o"),
    "2d": ("tab:blue", "s"),
    "2d-m": ("tab:cyan", "v"),
    "2d-f": ("tab:green", "^"),
    "3d": ("tab:red", "D"),
    "3d-ln": ("tab:purple", "P"),
    "3d-cn": ("tab:orange", "*"),
}
VARIANT_COLOURS = ("tab:brown", "tab:pink", "tab:olive", "tab:gray", "darkblue", "darkgreen", "gold", "teal",
                   "magenta", "salmon")
VARIANT_MARKERS = ("X", "d", "p", "h", "<", ">", "8")  # 7 and 10 are coprime: 70 distinct pairs
SPREAD = 0.36  # the lines of one depth spread over at most this fraction of the gap between depths
STEP = 0.06  # and are at most this far apart (the seven presets: +-0.18)
LEGEND_CHARS = 40  # a knob string longer than this wraps after a comma in the legend


class Palette:
    """The style and x rank of every configuration of one figure."""

    def __init__(self, configs) -> None:
        ordered = sorted({str(c) for c in configs}, key=config_order)
        variants = [c for c in ordered if c not in PRESET_STYLES]
        self._styles = {c: PRESET_STYLES[c] for c in ordered if c in PRESET_STYLES}
        self._styles.update({c: (VARIANT_COLOURS[i % len(VARIANT_COLOURS)], VARIANT_MARKERS[i % len(VARIANT_MARKERS)])
                             for i, c in enumerate(variants)})
        self._rank = {c: i - (len(ordered) - 1) / 2 for i, c in enumerate(ordered)}
        self.step = min(STEP, SPREAD / (len(ordered) - 1)) if len(ordered) > 1 else STEP

    def style(self, config: str) -> tuple[str, str]:
        """(colour, marker); a configuration the figure did not list gets the first variant's."""
        return self._styles.get(config, (VARIANT_COLOURS[0], VARIANT_MARKERS[0]))

    def offset(self, config: str) -> float:
        """The line's x shift, in units of the gap between the panel's depths."""
        return self._rank.get(config, 0.0) * self.step


def legend_text(label: str, width: int = LEGEND_CHARS, indent: str = "  ") -> str:
    """A legend label as shown: a long knob string broken after its commas, continued ``indent``ed
    (a centred panel title: not at all)."""
    if len(label) <= width or "," not in label:
        return label
    return "\n".join(textwrap.wrap(label.replace(",", ", "), width, subsequent_indent=indent,
                                   break_on_hyphens=False)).replace(", ", ",")


def legend_width(labels: list[str]) -> float:
    """Inches the legend takes beside the panels: its longest line at the small font (about
    0.07 inch a character) and the line sample, at least the 1.6 inches of the short names (a
    fixed width let ``lstm (not in the paper) (nn.LSTM)`` run over the title)."""
    lines = [line for label in labels for line in legend_text(label).split("\n")]
    return max(1.6, 0.75 + 0.07 * max((len(line) for line in lines), default=0))
