"""``tlstm-bench info``: the model card of one configuration."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.text import Text

from ..results.table import TableView
from ..vocab import ENWIK8_SYMBOLS, TIMING_SEQ_LEN
from .app import app, console, handles_user_errors
from .budget import DEFAULT_BUDGET
from .tables import draw_table


@app.command()
@handles_user_errors
def info(
    config: Annotated[str, typer.Argument(help="slstm, 2d, 2d-m, 2d-f, 3d, 3d-ln, 3d-cn, or knobs like tlstm:dims=4,kernel=5")],
    depth: Annotated[int, typer.Option("--depth", "-L", help="Depth L.")] = 1,
    budget: Annotated[Optional[str], typer.Option(help="Parameter budget: 10M, 2500000, or slstm:400 "
                                                       "(default: 10M, as `budget`, unless --channels).")] = None,
    channels: Annotated[Optional[int], typer.Option(help="Channel size M (instead of --budget).")] = None,
    vocab: Annotated[Optional[int], typer.Option(help="Token input and output of this size (default: enwik8's "
                                                      "205, as `time` and `budget`, unless --input-size).")] = None,
    input_size: Annotated[Optional[int], typer.Option(help="Real input size R.")] = None,
    output_size: Annotated[Optional[int], typer.Option(help="Output size S.")] = None,
    seq_len: Annotated[int, typer.Option(help="T, for the count of sequential steps.")] = TIMING_SEQ_LEN,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show D, K, P, L, M, the parameter count by component, the sequential steps, and
    whether the model is causal (measured by the separability audit of this configuration
    at this depth: y_t must not depend on a later input).

    With --channels M or --budget slstm:M, also both readings of the paper's "M is 400":
    the count at that M, and the M matched to the count of an sLSTM with it.
    """
    from ..audit import causal
    from ..models.card import model_card

    # The defaults `budget` and `time` use: the paper's 10M setting on enwik8's symbols.
    if vocab is None and input_size is None and output_size is None:
        vocab = ENWIK8_SYMBOLS
    if channels is None and budget is None:
        budget = DEFAULT_BUDGET
    card = model_card(config, depth, vocab=vocab, input_size=input_size, output_size=output_size,
                      channels=channels, budget=budget, seq_len=seq_len)
    card["causal"] = causal(card["config"], depth)
    if as_json:
        print(json.dumps(card))
        return
    draw_table(console, card_table(card))


def card_table(card: dict) -> TableView:
    """The model card as a two-column table: shape, parameters by component, steps, causality."""
    title = card["config"] + (f" ({card['paper_name']})" if card["paper_name"] else "")
    table = TableView(title=title, header=False)
    table.add_column(style="bold")
    table.add_column(justify="right", wrap=True)
    rows = [("D (dims)", card["dims"]), ("K (kernel)", card["kernel"]), ("P (tensor size)", card["tensor_size"]),
            ("L (depth)", card["depth"]), ("M (channels)", card["channels"]),
            ("memory conv", card["memory_conv"]), ("memory window", card.get("window")), ("norm", card["norm"]),
            ("input", card["input"]),
            ("output size", card["output_size"])]
    for name, value in rows:
        if value is not None:
            table.add_row(name, str(value))
    for name, value in card["init_changed"].items() or [("init", "defaults")]:
        table.add_row(f"init: {name}" if name != "init" else name, value)
    table.add_section()
    for name, value in card["params_by_component"].items():
        table.add_row(f"params: {name.replace('_', ' ')}", f"{value:,}")
    table.add_row("params: total", f"{card['params']:,}")
    # The paper's "M" in parameter counts is 2^20 (Table 1's 50.1M; docs/fidelity.md); below
    # 2^20 that reading is "0.01M", noise, so the row is left out (--json keeps it).
    if card["params_mebi"] >= 1:
        table.add_row("params: total / 2^20", f"{card['params_mebi']:.2f}M")
    if card["budget"] is not None:
        table.add_row("budget", f"{card['budget']:,}")
    if card.get("literal_channels") is not None:
        # The two readings of "M is 400" (SPEC section 7): that M for everyone, or that M's sLSTM count.
        table.add_section()
        table.add_row(f"literal M={card['literal_channels']}: params", f"{card['literal_params']:,}")
        matched = ("none: even M=1 is above that count" if card["matched_channels"] is None
                   else f"{card['matched_channels']} ({card['matched_params']:,} params)")
        table.add_row(f"matched to {card['matched_budget']}: M", matched)
    table.add_section()
    table.add_row(f"sequential steps, T={card['seq_len']}",
                  f"{card['sequential_steps']:,} ({card['sequential_steps_formula']})")
    verdict = {True: Text("yes"), False: Text("no: y_t sees later inputs", style="red"),
               None: Text("not measured: the audit would take too long or its model be too large")}[card["causal"]]
    table.add_row("causal (measured)", verdict)
    return table
