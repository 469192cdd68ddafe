"""The untied stacked LSTM: what a user would pick instead (not one of the paper's seven).

The paper's baseline, the sLSTM (:mod:`tlstm_bench.models.slstm`), shares one set of LSTM
weights across its L layers. A user who asks "is a deeper model worth it" would more
likely stack ``torch.nn.LSTM(M, M, num_layers=L)``: each layer with its own weights, run by
one cuDNN call on a GPU. This model is that, as the anchor row of the runtime tables and
figures, marked as not one of the paper's configurations (``lstm``, ``vocab.ANCHOR_NAMES``).
At equal M it has L times the sLSTM's recurrent parameters.

Layer 1 reads ``z_t``, layer l reads layer l-1's hidden state, the output reads the top layer
with no delay. Parameters: ``w_x, b_x``; ``w_ih, w_hh`` (L, 4M, M) and one bias ``b`` (L, 4M)
per layer, gate order ``i, f, g, o`` (torch.nn.LSTM's); ``w_y, b_y``. State: ``(h, c)``, each
(L, B, M), after the last input step (:class:`~tlstm_bench.models.slstm.SLSTMState`).

Implementations: ``cudnn``, every layer in one call of torch's multi-layer LSTM (one cuDNN
call on a GPU) with the weights in one cuDNN buffer, as ``nn.LSTM`` keeps them
(:mod:`~tlstm_bench.models.cudnn_weights`: no copy per call, and the second bias cuDNN wants is
a zero in the buffer, not a parameter); ``loop``, the plain per-cell loop, the oracle it is
tested against.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from .config import ArchConfig
from .slstm import LayerStack, SLSTMState


class StackedLSTM(LayerStack):
    def __init__(self, arch: ArchConfig, depth: int, *, channels: int, input_size: int,
                 output_size: int, tokens: bool, implementation: str, forget_bias: float = 1.0):
        super().__init__(arch, depth, channels=channels, input_size=input_size,
                         output_size=output_size, tokens=tokens, forget_bias=forget_bias)
        m = channels
        bound = 1.0 / math.sqrt(m)
        self.w_ih = nn.Parameter(torch.empty(depth, 4 * m, m).uniform_(-bound, bound))
        self.w_hh = nn.Parameter(torch.empty(depth, 4 * m, m).uniform_(-bound, bound))
        b = torch.zeros(depth, 4 * m)
        b[:, m:2 * m] = forget_bias  # gate order i, f, g, o
        self.b = nn.Parameter(b)
        self.implementation = implementation

    def cell(self, layer: int, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        """One LSTM cell step of ``layer``. x, h, c: (B, M)."""
        m = self.channels
        gates = x @ self.w_ih[layer].T + h @ self.w_hh[layer].T + self.b[layer]
        i, f = torch.sigmoid(gates[:, :m]), torch.sigmoid(gates[:, m:2 * m])
        g, o = torch.tanh(gates[:, 2 * m:3 * m]), torch.sigmoid(gates[:, 3 * m:])
        c = f * c + i * g
        return o * torch.tanh(c), c


def run_cudnn(model: StackedLSTM, z: torch.Tensor, state: SLSTMState):
    """Every layer in one call of torch's multi-layer fused LSTM (one cuDNN call on a GPU). On a
    GPU the per-layer tensors are views into the model's cuDNN buffer (flatten_parameters), so the
    call copies nothing; ``unbind`` makes them with one autograd node per parameter."""
    weights = []
    for layer in zip(model.w_ih.unbind(0), model.w_hh.unbind(0), model.b.unbind(0), model.second_bias().unbind(0)):
        weights += layer
    hx = (state.h.contiguous(), state.c.contiguous())
    out, h_n, c_n = torch._VF.lstm(z, hx, weights, True, model.depth, 0.0, model.training, False, True)
    return out, SLSTMState(h_n, c_n)


def run_loop(model: StackedLSTM, z: torch.Tensor, state: SLSTMState):
    """The obvious loop: for each timestep, for each layer, one cell call."""
    h, c = list(state.h.unbind(0)), list(state.c.unbind(0))
    outputs = []
    for t in range(z.shape[1]):
        inp = z[:, t]
        for layer in range(model.depth):
            h[layer], c[layer] = model.cell(layer, inp, h[layer], c[layer])
            inp = h[layer]
        outputs.append(inp)
    return torch.stack(outputs, dim=1), SLSTMState(torch.stack(h), torch.stack(c))


LSTM_IMPLEMENTATIONS: dict[str, Callable] = {"cudnn": run_cudnn, "loop": run_loop}
StackedLSTM.loops = LSTM_IMPLEMENTATIONS
