"""The stacked LSTM baseline with one set of weights shared by all layers (SPEC section 4).

Layer 1 reads ``z_t``, layer l reads layer l-1's hidden state, the output reads the top
layer with no delay. Parameters: ``w_x, b_x``, ``w_ih, w_hh`` (4M, M) and one bias ``b``
(4M), gate order ``i, f, g, o`` (torch.nn.LSTM's, so the fused kernel takes the weights
as they are), ``w_y, b_y``. State: ``(h, c)``, each (L, B, M), after the last input step.

Implementations (``model.implementation``), equal up to float rounding:

* ``fused``: layer by layer, each layer one call of the fused torch LSTM kernel (T*L
  sequential cell steps, but the fastest per-layer kernel there is);
* ``cudnn``: all L layers in one call of the multi-layer fused LSTM (one cuDNN call on a
  GPU), the shared weights passed for every layer (which cuDNN can only take as L copies: see
  :func:`run_cudnn`);
* ``wavefront``: because the weights are shared, step s runs layer l at time s-l
  (Appleyard et al. 2016): every cell of one anti-diagonal is one batched cell call,
  T+L-1 sequential steps like the tLSTM;
* ``loop``: the plain per-cell loop, the oracle for the others.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
from torch import nn

from .base import RecurrentModel
from .config import ArchConfig
from .cudnn_weights import flatten_lstm, tied_weights


class SLSTMState(NamedTuple):
    """State of the stacked LSTM: ``h`` and ``c``, each (L, B, M)."""

    h: torch.Tensor
    c: torch.Tensor


class LayerStack(RecurrentModel):
    """What a stack of L LSTM layers shares (the paper's tied sLSTM and the untied ``lstm``
    anchor, :mod:`tlstm_bench.models.lstm`): the state (h, c), each (L, B, M), and a forward
    that runs the sequence loop its class registers in ``loops``."""

    loops: dict[str, Callable] = {}
    _second_bias: torch.Tensor | None = None  # cuDNN's zero b_hh in the weight buffer (flatten_parameters)

    def flat_layers(self) -> int:
        """How many layers of weights the parameters hold (cuDNN's buffer has that many)."""
        return self.depth

    def flatten_parameters(self) -> None:
        """Put ``w_ih, w_hh, b`` into one cuDNN weight buffer, as ``nn.LSTM`` does (on CUDA; a
        no-op elsewhere): :func:`~tlstm_bench.models.cudnn_weights.flatten_lstm`. Runs after every
        move (``.to``, ``.cuda``, ``.double``), so a cuDNN call copies no weights."""
        if "w_ih" not in self._parameters:  # a move before the subclass made its weights
            return
        self._second_bias = flatten_lstm((self.w_ih, self.w_hh, self.b), self.flat_layers(), self.channels)

    def second_bias(self) -> torch.Tensor:
        """The zero b_hh of the cuDNN calls: the view in the weight buffer, else a fresh zero tensor
        (our one bias per layer stands in for b_ih + b_hh)."""
        bias = self._second_bias
        if bias is not None and bias.device == self.b.device and bias.dtype == self.b.dtype:
            return bias
        return torch.zeros_like(self.b)

    def _apply(self, fn, recurse=True):
        out = super()._apply(fn, recurse)
        self.flatten_parameters()  # the move gave the parameters fresh storage
        return out

    def zero_state(self, batch: int, like: torch.Tensor) -> SLSTMState:
        zeros = like.new_zeros(self.depth, batch, self.channels)
        return SLSTMState(zeros, zeros)

    def forward(self, x: torch.Tensor, state: SLSTMState | None = None):
        z = self.project_inputs(x)
        if state is None:
            state = self.zero_state(z.shape[0], z)
        h_top, state = self.loops[self.implementation](self, z, state)
        return self.read_out(h_top), state


class SLSTM(LayerStack):
    def flat_layers(self) -> int:
        return 1  # one set of weights, shared by every layer

    def __init__(self, arch: ArchConfig, depth: int, *, channels: int, input_size: int,
                 output_size: int, tokens: bool, implementation: str, forget_bias: float = 1.0):
        super().__init__(arch, depth, channels=channels, input_size=input_size,
                         output_size=output_size, tokens=tokens, forget_bias=forget_bias)
        m = channels
        bound = 1.0 / math.sqrt(m)
        self.w_ih = nn.Parameter(torch.empty(4 * m, m).uniform_(-bound, bound))
        self.w_hh = nn.Parameter(torch.empty(4 * m, m).uniform_(-bound, bound))
        b = torch.zeros(4 * m)
        b[m:2 * m] = forget_bias  # gate order i, f, g, o
        self.b = nn.Parameter(b)
        self.implementation = implementation

    def cell(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One LSTM cell step; works for any leading batch shape. x, h, c: (..., M)."""
        m = self.channels
        gates = x @ self.w_ih.T + h @ self.w_hh.T + self.b
        i = torch.sigmoid(gates[..., :m])
        f = torch.sigmoid(gates[..., m:2 * m])
        g = torch.tanh(gates[..., 2 * m:3 * m])
        o = torch.sigmoid(gates[..., 3 * m:])
        c = f * c + i * g
        return o * torch.tanh(c), c


def run_loop(model: SLSTM, z: torch.Tensor, state: SLSTMState):
    """The obvious loop: for each timestep, for each layer, one cell call."""
    h = list(state.h.unbind(0))
    c = list(state.c.unbind(0))
    outputs = []
    for t in range(z.shape[1]):
        inp = z[:, t]
        for layer in range(model.depth):
            h[layer], c[layer] = model.cell(inp, h[layer], c[layer])
            inp = h[layer]
        outputs.append(inp)
    return torch.stack(outputs, dim=1), SLSTMState(torch.stack(h), torch.stack(c))


def run_fused(model: SLSTM, z: torch.Tensor, state: SLSTMState):
    """Layer by layer, each layer a single call of torch's fused LSTM over all T steps. The one
    layer of weights is cuDNN's buffer on a GPU (flatten_parameters): no copy per call."""
    weights = [model.w_ih, model.w_hh, model.b, model.second_bias()]
    inp = z
    hs, cs = [], []
    for layer in range(model.depth):
        hx = (state.h[layer:layer + 1].contiguous(), state.c[layer:layer + 1].contiguous())
        inp, h_n, c_n = torch._VF.lstm(inp, hx, weights, True, 1, 0.0, model.training, False, True)
        hs.append(h_n[0])
        cs.append(c_n[0])
    return inp, SLSTMState(torch.stack(hs), torch.stack(cs))


def run_cudnn(model: SLSTM, z: torch.Tensor, state: SLSTMState):
    """All L layers in ONE call of torch's multi-layer LSTM, the shared weights passed for every
    layer. On a GPU that is one cuDNN call, which may overlap the layers as a wavefront
    itself (and runs its persistent kernel for small hidden sizes): the strongest honest
    sLSTM baseline there is. autograd sums each layer's gradient into the one shared parameter.

    The tie costs a copy per call: cuDNN reads each layer's weights from its own place in one
    buffer, so the one set of weights is copied L times into a fresh buffer at every call (a few
    hundred KB at M = 100), here in one ``torch.cat`` laid out as cuDNN wants
    (:func:`~tlstm_bench.models.cudnn_weights.tied_weights`; torch would otherwise copy them
    tensor by tensor and warn at every call). Keeping L copies between calls would move the copy
    to every weight update instead, which in training is every step. docs/runtime.md says what it
    costs."""
    weights = tied_weights(model.w_ih, model.w_hh, model.b, model.depth) if model.depth > 1 else None
    if weights is None:  # one layer (its buffer as it is), or not cuDNN (the CPU): the tensors as they are
        weights = [model.w_ih, model.w_hh, model.b, model.second_bias()] * model.depth
    hx = (state.h.contiguous(), state.c.contiguous())
    out, h_n, c_n = torch._VF.lstm(z, hx, weights, True, model.depth, 0.0, model.training, False, True)
    return out, SLSTMState(h_n, c_n)


def run_wavefront(model: SLSTM, z: torch.Tensor, state: SLSTMState):
    """T + L - 1 steps; at step s the layers lo..hi (those with 0 <= s - l < T) run as one call.

    Layer l at step s handles time t = s - l: its input is z_t for l = 0 and, for l >= 1,
    layer l-1's hidden state from step s-1 (which was time t of layer l-1). A layer not
    yet started or already finished keeps its state, so the state handed back is each
    layer's state after time T-1, as for the other implementations.
    """
    seq_len, depth = z.shape[1], model.depth
    h, c = state.h, state.c  # (L, B, M)
    outputs = []
    for s in range(seq_len + depth - 1):
        lo, hi = max(0, s - seq_len + 1), min(depth - 1, s)
        below = h[max(lo - 1, 0):hi]  # layer l-1's hidden state for l = max(lo,1) .. hi
        x = torch.cat([z[:, s].unsqueeze(0), below]) if lo == 0 else below
        h_new, c_new = model.cell(x, h[lo:hi + 1], c[lo:hi + 1])  # one batched call per diagonal
        h = torch.cat([h[:lo], h_new, h[hi + 1:]])
        c = torch.cat([c[:lo], c_new, c[hi + 1:]])
        if hi == depth - 1:
            outputs.append(h_new[-1])  # the top layer at time s - L + 1
    return torch.stack(outputs, dim=1), SLSTMState(h, c)


SLSTM_IMPLEMENTATIONS: dict[str, Callable] = {"fused": run_fused, "cudnn": run_cudnn, "wavefront": run_wavefront,
                                               "loop": run_loop}
SLSTM.loops = SLSTM_IMPLEMENTATIONS
