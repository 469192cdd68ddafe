"""The model card: what a configuration at a depth and budget is, in numbers."""

from __future__ import annotations

from ..errors import UserError
from ..vocab import PAPER_NAMES, TIMING_SEQ_LEN
from .budget import BINARY_MILLION, count_params, parse_budget, slstm_budget_channels, solve_channels
from .build import resolve_channels, resolve_io
from .config import changed_init, check_shape, parse_config


def model_card(config, depth: int, *, vocab: int | None = None, input_size: int | None = None,
               output_size: int | None = None, channels: int | None = None, budget=None,
               seq_len: int = TIMING_SEQ_LEN) -> dict:
    """Everything ``info`` shows, without building the model (counts come from the formula)."""
    arch = parse_config(config)
    check_shape(arch, depth, (seq_len, "--seq-len (T)"))
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
        "window": arch.window if tlstm and arch.memory_conv else None,
        "norm": arch.norm if tlstm else None,
        "init": arch.init,
        "init_changed": changed_init(arch),  # the knobs off their defaults (docs/models.md)
        "feedback": arch.feedback if tlstm else None,
        "locations": p ** (arch.dims - 1) if tlstm else depth,
        "input": f"{r} tokens" if tokens else f"{r} reals",
        "output_size": s,
        "budget": parse_budget(budget, input_size=r, output_size=s) if budget is not None else None,
        "params": counts.total,
        "params_by_component": counts.as_dict(),
        "params_mebi": counts.total / BINARY_MILLION,
        **literal_and_matched(arch, depth, channels, budget, r, s),
        "seq_len": seq_len,
        "sequential_steps": arch.sequential_steps(seq_len, depth),
        "sequential_steps_formula": "T*L" if not tlstm else "T+L-1",
    }


def literal_and_matched(arch, depth: int, channels: int | None, budget, r: int, s: int) -> dict:
    """The two readings of the paper's "M is 400" side by side (SPEC section 7, docs/fidelity.md).

    Literal: every configuration gets that channel size (``literal_channels``, and its count
    ``literal_params``). Matched: every configuration gets the largest M whose count is not
    above that of an sLSTM with that M (``matched_budget`` = ``"slstm:400"``,
    ``matched_channels``, ``matched_params``; None when even M=1 is above that count). The reference M is ``channels`` when given, or
    the M of a budget written ``slstm:M``; a plain count (``10M``) has no literal M, so the
    ``literal_*`` keys are None and ``matched_*`` describe that budget.
    """
    reference = channels if channels is not None else slstm_budget_channels(budget)
    if reference is None:
        count = parse_budget(budget, input_size=r, output_size=s)
        m = solve_channels(arch, depth, count, r, s)
        return {"literal_channels": None, "literal_params": None, "matched_budget": str(budget),
                "matched_channels": m, "matched_params": count_params(arch, depth, m, r, s).total}
    literal = {"literal_channels": reference, "literal_params": count_params(arch, depth, reference, r, s).total,
               "matched_budget": f"slstm:{reference}"}
    try:
        matched = solve_channels(arch, depth, parse_budget(f"slstm:{reference}", input_size=r, output_size=s), r, s)
    except UserError:  # even M=1 is above that sLSTM's count: there is no matched M
        return {**literal, "matched_channels": None, "matched_params": None}
    return {**literal, "matched_channels": matched, "matched_params": count_params(arch, depth, matched, r, s).total}
