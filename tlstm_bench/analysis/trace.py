"""Record a tLSTM's memory cell at every step (for the paper's figure 6).

The normal sequence loops (``TLSTM_IMPLEMENTATIONS``) keep no history, so recording
costs them nothing. :func:`trace_cells` is a separate loop that calls the model's own
``step`` through the same ``eager_steps`` loop as ``run_eager`` (SPEC section 3: T + L - 1 steps, the last L - 1
fed the flush input, y_t read at the output corner at step t + L - 1) and keeps ``c``
after every step; a test checks that its outputs equal the model's forward.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..errors import UserError
from ..models.tlstm import TLSTM, TLSTMState, eager_steps


class CellTrace(NamedTuple):
    """``y``: (B, T, S) logits, as ``model(x)[0]``; ``cells``: (B, T+L-1, N, M), the memory
    cell after each step; ``state``: the state after step T, as ``model(x)[1]``."""

    y: torch.Tensor
    cells: torch.Tensor
    state: TLSTMState


def trace_cells(model: TLSTM, x: torch.Tensor, state: TLSTMState | None = None) -> CellTrace:
    """Run ``model`` on ``x`` step by step and record the memory cell after every step."""
    if not isinstance(model, TLSTM):
        raise UserError(f"only a tLSTM has a memory-cell tensor to trace; {model.arch.label} is not one "
                        "(use 2d, 2d-m, 2d-f, 3d, 3d-ln, 3d-cn or a tlstm:... config)")
    z = model.project_inputs(x)  # (B, T, M)
    batch, seq_len, _ = z.shape
    after_input = state if state is not None else model.zero_state(batch, z)
    outputs, cells = [], []
    for s, h, c in eager_steps(model, z, after_input):
        cells.append(c)
        if s == seq_len - 1:
            after_input = TLSTMState(h, c)
        if s >= model.depth - 1:
            outputs.append(h[:, -1])
    y = model.read_out(torch.stack(outputs, dim=1))
    return CellTrace(y, torch.stack(cells, dim=1), after_input)


def diagonal_indices(model: TLSTM) -> torch.Tensor:
    """Flat locations (p, p, ..., p) for p = 0..P-1: the tensor diagonal from the input
    corner (p_in, next to z_t) to the output corner (p_out, where y is read)."""
    size, dims = model.tensor_size, model.arch.dims
    stride = sum(size ** k for k in range(dims - 1))  # flat index of (1, 1, ..., 1)
    return torch.arange(size) * stride


def diagonal_channel_mean(model: TLSTM, cells: torch.Tensor) -> torch.Tensor:
    """(B, steps, N, M) memory cells -> (B, steps, P): the channel mean on the diagonal
    (paper section 3.4: "the channel mean ... of the memory cell at each timestep")."""
    return cells.mean(dim=-1)[:, :, diagonal_indices(model).to(cells.device)]
