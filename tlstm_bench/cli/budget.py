"""``tlstm-bench budget``: the channel size each configuration gets at a parameter budget."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from ..results.table import TableView
from ..vocab import ENWIK8_SYMBOLS
from .app import app, console, handles_user_errors, parse_int_list
from .screen import glue
from .tables import draw_table

DEFAULT_BUDGET = "10M"  # the paper's Wikipedia budget; `info` defaults to it too


@app.command()
@handles_user_errors
def budget(
    configs: Annotated[Optional[list[str]], typer.Argument(help="Configurations (default: all seven).")] = None,
    budget: Annotated[str, typer.Option(help="Parameter budget: 10M, 2500000, or slstm:400.")] = DEFAULT_BUDGET,
    depths: Annotated[str, typer.Option(help="Comma-separated depths L.")] = "1,2,3,4",
    vocab: Annotated[Optional[int], typer.Option(help="Token input and output of this size.")] = None,
    input_size: Annotated[Optional[int], typer.Option(help="Real input size R.")] = None,
    output_size: Annotated[Optional[int], typer.Option(help="Output size S.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of model cards.")] = False,
) -> None:
    """Solve M for every configuration and depth at one budget (SPEC section 7).

    With a budget slstm:M, also the counts of the literal reading (every configuration at M).
    """
    from ..models import CONFIG_NAMES, parse_config
    from ..models.card import model_card

    if vocab is None and input_size is None and output_size is None:
        vocab = ENWIK8_SYMBOLS  # enwik8, the paper's 10M setting
    names = [parse_config(c).label for c in (configs or CONFIG_NAMES)]
    levels = parse_int_list(depths, "--depths")
    cards = [model_card(c, d, vocab=vocab, input_size=input_size, output_size=output_size, budget=budget)
             for c in names for d in levels]
    if as_json:
        print(json.dumps(cards))
        return
    io = f"{vocab} symbols" if vocab is not None else f"input {input_size or '-'}, output {output_size or '-'}"
    table = TableView(title=f"Channels M (and parameters) at {glue(f'budget {budget}')}, {glue(io)}")
    table.add_column("config", style="bold", breaks=",")
    for d in levels:
        table.add_column(f"L={d}", justify="right")
    by_key = {(c["config"], c["depth"]): c for c in cards}
    for name in names:
        table.add_row(name, *(f"{by_key[name, d]['channels']} ({by_key[name, d]['params'] / 1e6:.3f}M)"
                              for d in levels))
    draw_table(console, table)
    literal = [c for c in cards if c.get("literal_channels") is not None]
    if literal:
        # The other reading of "M is 400" (SPEC section 7): every configuration at that M.
        m = literal[0]["literal_channels"]
        table = TableView(title=f"Parameters at the literal M={m} (every configuration at the sLSTM's M)")
        table.add_column("config", style="bold", breaks=",")
        for d in levels:
            table.add_column(f"L={d}", justify="right")
        for name in names:
            table.add_row(name, *(f"{by_key[name, d]['literal_params'] / 1e6:.3f}M" for d in levels))
        draw_table(console, table)
