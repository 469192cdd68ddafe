"""The model card: what a configuration at a depth and budget is, in numbers."""

from __future__ import annotations

from .budget import count_params, parse_budget
from .build import check_depth, resolve_channels, resolve_io
from .config import PAPER_NAMES, parse_config


def model_card(config, depth: int, *, vocab: int | None = None, input_size: int | None = None,
               output_size: int | None = None, channels: int | None = None, budget=None,
               seq_len: int = 100) -> dict:
    """Everything ``info`` shows, without building the model (counts come from the formula)."""
    arch = parse_config(config)
    check_depth(depth)
    r, s, tokens = resolve_io(vocab, input_size, output_size)
    m = resolve_channels(arch, depth, channels, budget, r, s)
    counts = count_params(arch, depth, m, r, s)
    tlstm = arch.kind == "tlstm"
    p = arch.tensor_size(depth) if tlstm else None
    return {
        "config": arch.label,
        "paper_name": PAPER_NAMES.get(arch.label),
        "depth": depth,
        "channels": m,
        "tensor_size": p,
        "kernel": arch.kernel if tlstm else None,
        "dims": arch.dims if tlstm else None,
        "memory_conv": arch.memory_conv if tlstm else None,
        "norm": arch.norm if tlstm else None,
        "feedback": arch.feedback if tlstm else None,
        "locations": p ** (arch.dims - 1) if tlstm else depth,
        "input": f"{r} tokens" if tokens else f"{r} reals",
        "output_size": s,
        "budget": parse_budget(budget, input_size=r, output_size=s) if budget is not None else None,
        "params": counts.total,
        "params_by_component": counts.as_dict(),
        "seq_len": seq_len,
        "sequential_steps": arch.sequential_steps(seq_len, depth),
        "sequential_steps_formula": "T*L" if not tlstm else "T+L-1",
    }
