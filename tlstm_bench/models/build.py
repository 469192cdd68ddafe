"""``build_model``: the one public way to get a model."""

from __future__ import annotations

from ..checks import MAX_DIM, integer
from ..errors import UserError
from ..vocab import DEFAULT_IMPLEMENTATION
from .budget import parse_budget, solve_channels
from .config import ArchConfig, check_shape, parse_config
from .init import apply_init
from .lstm import LSTM_IMPLEMENTATIONS, StackedLSTM
from .slstm import SLSTM, SLSTM_IMPLEMENTATIONS
from .tlstm import TLSTM, TLSTM_IMPLEMENTATIONS

# Each model kind: its registry of sequence loops and its class.
FAMILIES = {"tlstm": (TLSTM_IMPLEMENTATIONS, TLSTM), "slstm": (SLSTM_IMPLEMENTATIONS, SLSTM),
            "lstm": (LSTM_IMPLEMENTATIONS, StackedLSTM)}


def resolve_io(vocab: int | None, input_size: int | None, output_size: int | None) -> tuple[int, int, bool]:
    """(R, S, tokens) from the builder's arguments; ``vocab`` means tokens in and out."""
    if vocab is not None:
        if input_size is not None:
            raise UserError("give either --vocab (token input) or --input-size (real input), not both")
        integer(vocab, "vocab", maximum=MAX_DIM)
        if output_size is not None:
            integer(output_size, "output size", maximum=MAX_DIM)
        return vocab, output_size if output_size is not None else vocab, True
    if input_size is None or output_size is None:
        raise UserError("give --vocab V for tokens, or both --input-size R and --output-size S")
    integer(input_size, "input size", maximum=MAX_DIM)
    integer(output_size, "output size", maximum=MAX_DIM)
    return input_size, output_size, False


def resolve_channels(arch: ArchConfig, depth: int, channels: int | None, budget, input_size: int,
                     output_size: int) -> int:
    """M from exactly one of ``channels`` and ``budget``."""
    if (channels is None) == (budget is None):
        raise UserError("give exactly one of --channels M and --budget N")
    if channels is not None:
        return integer(channels, "channels (M)", maximum=MAX_DIM)
    count = parse_budget(budget, input_size=input_size, output_size=output_size)
    return solve_channels(arch, depth, count, input_size, output_size)


def build_model(config: "str | ArchConfig", depth: int, *, vocab: int | None = None,
                input_size: int | None = None, output_size: int | None = None,
                channels: int | None = None, budget: "int | str | None" = None,
                forget_bias: float = 1.0, implementation: str | None = None):
    """Build a configuration at depth L.

    Args:
        config: a preset (``slstm, 2d, 2d-m, 2d-f, 3d, 3d-ln, 3d-cn``), a knob string
            (``tlstm:dims=4,kernel=5``, ``3d-cn:cell_kernel=shift``) or an :class:`ArchConfig`.
            Its initialisation knobs are applied here (:mod:`.init`), after the model's own
            draws, so every implementation starts from the same parameters.
        depth: L >= 1. A tLSTM gets tensor size P = floor(K/2) * L.
        vocab: token input and output of this size (x is (B, T) int64).
        input_size, output_size: real input (B, T, R) and S outputs.
        channels: M, or
        budget: a parameter count (int, ``"10M"``) or ``"slstm:400"``; M is then the
            largest whose total count is not above it.
        forget_bias: initial forget-gate bias (1; the paper uses 4 for images).
        implementation: the sequence loop to use (tLSTM: ``fast`` default, ``eager``,
            ``reference`` = the oracle, ``triton`` (a CUDA GPU and the gpu extra);
            sLSTM: ``fused`` default, ``cudnn``, ``wavefront``, ``loop``; the ``lstm``
            anchor: ``cudnn`` default, ``loop``).
    """
    arch = parse_config(config)
    check_shape(arch, depth)  # L an integer >= 1, at most 2^30 locations
    r, s, tokens = resolve_io(vocab, input_size, output_size)
    m = resolve_channels(arch, depth, channels, budget, r, s)
    kwargs = dict(channels=m, input_size=r, output_size=s, tokens=tokens, forget_bias=forget_bias)
    table, cls = FAMILIES[arch.kind]
    if implementation is None:
        implementation = DEFAULT_IMPLEMENTATION[arch.kind]
    if implementation not in table:
        raise UserError(
            f"unknown implementation {implementation!r} for {arch.label}; use one of {', '.join(table)}"
        )
    model = cls(arch, depth, implementation=implementation, **kwargs)
    apply_init(model)
    return model
