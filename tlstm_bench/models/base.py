"""What every model shares: the input projection, the output layer and the interface.

Interface (state-spaces/s4 style): ``y, state = model(x, state=None)`` where ``x`` is
``(B, T)`` int64 tokens (a model built with ``vocab``) or ``(B, T, input_size)`` floats,
``y`` is ``(B, T, output_size)`` logits, and ``state`` is the recurrent state after the
last input step, so processing a sequence in chunks with the state carried equals
processing it whole.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..errors import UserError
from .config import ArchConfig


class RecurrentModel(nn.Module):
    """Input projection ``z_t = x_t W^x + b^x`` and output layer ``y_t = h W^y + b^y``.

    Subclasses define the recurrent core. Parameter names are part of the budget
    contract (:mod:`tlstm_bench.models.budget`): ``w_x, b_x`` (input projection),
    ``w_y, b_y`` (output layer).
    """

    def __init__(
        self,
        arch: ArchConfig,
        depth: int,
        *,
        channels: int,
        input_size: int,
        output_size: int,
        tokens: bool,
        forget_bias: float,
    ):
        super().__init__()
        self.arch = arch
        self.depth = depth
        self.channels = channels
        self.input_size = input_size
        self.output_size = output_size
        self.tokens = tokens
        self.forget_bias = forget_bias
        m = channels
        bound = 1.0 / math.sqrt(m)
        # Paper eq. (5): z_t = x_t W^x + b^x; for tokens x_t is one-hot, so W^x is an embedding.
        self.w_x = nn.Parameter(torch.empty(input_size, m).uniform_(-bound, bound))
        self.b_x = nn.Parameter(torch.zeros(m))
        # Paper eq. (7)/(16): y_t = h W^y + b^y (logits; the softmax lives in the loss).
        self.w_y = nn.Parameter(torch.empty(m, output_size).uniform_(-bound, bound))
        self.b_y = nn.Parameter(torch.zeros(output_size))

    @property
    def tensor_size(self) -> int:
        return self.arch.tensor_size(self.depth)

    def project_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """All timesteps at once: (B, T) tokens or (B, T, R) floats -> z of shape (B, T, M)."""
        if self.tokens:
            if x.dim() != 2 or x.dtype not in (torch.int64, torch.int32):
                raise UserError(f"this model takes (B, T) integer tokens, got {tuple(x.shape)} {x.dtype}")
            return nn.functional.embedding(x, self.w_x) + self.b_x
        if x.dim() != 3 or x.shape[-1] != self.input_size or not x.is_floating_point():
            raise UserError(
                f"this model takes (B, T, {self.input_size}) floats, got {tuple(x.shape)} {x.dtype}"
            )
        return x @ self.w_x + self.b_x

    def flush_input(self, batch: int) -> torch.Tensor:
        """z for a zero input x_t = 0 (SPEC section 3: the L-1 flush steps): just b^x."""
        return self.b_x.expand(batch, self.channels)

    def read_out(self, h_out: torch.Tensor) -> torch.Tensor:
        """(B, T, M) output-location hidden states -> (B, T, S) logits."""
        return h_out @ self.w_y + self.b_y

    def extra_repr(self) -> str:
        return (
            f"config={self.arch.label}, depth={self.depth}, channels={self.channels}, "
            f"tensor_size={self.tensor_size}, input_size={self.input_size}, output_size={self.output_size}"
        )
