"""The tensorized LSTM (SPEC section 3; paper section 2.3 and appendix A).

Shapes used throughout (flat over the tensor locations, row-major):

* ``N = P^(D-1)`` locations, ``Kd = K^(D-1)`` kernel entries, ``M`` channels;
* hidden state ``h`` and memory cell ``c``: ``(B, N, M)``; location ``N-1`` is the
  corner farthest from the input (where ``y`` is read);
* recurrent kernel ``w_h``: ``(Kd, M, 4M + Kd)`` with output channels in the order
  ``G, I, F, O, Q`` (``4M`` channels when the memory convolution is off), bias ``b_h``.

The cross-layer convolutions are done by gathering each location's K^(D-1) window
with a precomputed index map (``hidden_index`` / ``cell_index``), which works for any
D and K. The slow per-location loop that follows the spec literally lives in
:mod:`tlstm_bench.models.oracle` and is what the tests compare this against.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from .base import RecurrentModel
from .config import ArchConfig

NORM_EPS = 1e-5

# Slots of the gather source in hidden_index: [zero, z_t, h_0 .. h_{N-1}].
ZERO_SLOT = 0
INPUT_SLOT = 1
HIDDEN_OFFSET = 2


class TLSTMState(NamedTuple):
    """State of a tLSTM after a step: hidden ``h`` and memory cell ``c``, each (B, N, M)."""

    h: torch.Tensor
    c: torch.Tensor


def kernel_offsets(arch: ArchConfig) -> list[tuple[int, ...]]:
    """The window offsets ``-a .. b`` per coordinate, in row-major (kernel-entry) order."""
    span = range(-arch.reach_in, arch.reach_out + 1)
    return list(itertools.product(span, repeat=arch.dims - 1))


def cell_window_shift(arch: ArchConfig) -> int:
    """How far the memory-cell window sits from the hidden one, away from the input, per coordinate.

    0 for ``window=aligned`` (SPEC section 3 step 5: offsets ``-a .. b``, centred on p for
    odd K). 1 for ``window=appendix``: appendix A.2 writes the memory-cell convolution
    with the hidden convolution's index expression (A.1), which indexes the concatenated
    tensor where location 1 holds the input; applied to C, which has no input location,
    the window is ``-a+1 .. b+1`` (p .. p+2 for K = 3).
    """
    return arch.cell_window_shift


def locations(tensor_size: int, dims: int) -> list[tuple[int, ...]]:
    """Hidden locations ``0..P-1`` per coordinate, in row-major (flat) order."""
    return list(itertools.product(range(tensor_size), repeat=dims - 1))


def _flat(coord: tuple[int, ...], size: int) -> int:
    index = 0
    for c in coord:
        index = index * size + c
    return index


def build_index_maps(arch: ArchConfig, tensor_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Index maps for the two cross-layer convolutions, each (N, Kd) int64.

    ``hidden_index[n, k]`` is the slot that hidden location n reads for kernel entry k
    (SPEC section 3 step 2-3): Hcat location ``s = (n+1) + offset`` per coordinate is
    z_t when every coordinate is 0, ``h_{s-1}`` when every coordinate is >= 1, and zero
    otherwise (outside 0..P, or on the first row/column but not the corner).

    ``cell_index[n, k]`` is the memory-cell location read for kernel entry k, with the
    coordinates clamped to 0..P-1 (replicate padding, SPEC section 3 step 5). The window
    is the hidden one shifted by :func:`cell_window_shift` (the ``window`` knob); every
    implementation that gathers with ``cell_index`` gets the knob from here alone.
    """
    size = tensor_size
    offsets = kernel_offsets(arch)
    shift = cell_window_shift(arch)
    hidden, cell = [], []
    for loc in locations(size, arch.dims):
        h_row, c_row = [], []
        for off in offsets:
            s = tuple(p + 1 + o for p, o in zip(loc, off))  # Hcat coordinate
            if any(x < 0 or x > size for x in s):
                h_row.append(ZERO_SLOT)
            elif all(x == 0 for x in s):
                h_row.append(INPUT_SLOT)
            elif all(x >= 1 for x in s):
                h_row.append(HIDDEN_OFFSET + _flat(tuple(x - 1 for x in s), size))
            else:
                h_row.append(ZERO_SLOT)
            clamped = tuple(min(max(p + o + shift, 0), size - 1) for p, o in zip(loc, off))
            c_row.append(_flat(clamped, size))
        hidden.append(h_row)
        cell.append(c_row)
    return torch.tensor(hidden, dtype=torch.long), torch.tensor(cell, dtype=torch.long)


NORM_CODES = {"none": 0, "cn": 1, "ln": 2}


class SequenceShapes:
    """The sizes a sequence implementation needs from its model (not tensors to differentiate):
    M, N, Kd, gate channels, norm, memory conv, depth L and the input length T. The fast and
    triton implementations extend it with their own index-map layouts."""

    def __init__(self, model: "TLSTM", seq_len: int):
        self.m = model.channels
        self.n = model.num_locations
        self.kd = model.arch.kernel_entries
        self.g = model.gate_channels
        self.norm = model.arch.norm
        self.norm_code = NORM_CODES[self.norm]  # the norm as the compiled loops and kernels take it
        self.memory_conv = model.arch.memory_conv
        self.depth = model.depth
        self.seq_len = seq_len


class TLSTM(RecurrentModel):
    """A D-dimensional tLSTM with kernel K, depth L and tensor size P = floor(K/2) * L.

    Parameters: ``w_x, b_x`` (input projection), ``w_h, b_h`` (cross-layer kernel; the
    last Kd output channels generate the memory-cell kernel Q), ``norm_gain,
    norm_bias`` (N, M) for LN/CN, ``w_y, b_y`` (output layer).
    """

    def __init__(self, arch: ArchConfig, depth: int, *, channels: int, input_size: int,
                 output_size: int, tokens: bool, implementation: str, forget_bias: float = 1.0):
        super().__init__(arch, depth, channels=channels, input_size=input_size,
                         output_size=output_size, tokens=tokens, forget_bias=forget_bias)
        m, kd = channels, arch.kernel_entries
        p = arch.tensor_size(depth)
        self.num_locations = p ** (arch.dims - 1)
        self.gate_channels = 4 * m + (kd if arch.memory_conv else 0)
        bound = 1.0 / math.sqrt(kd * m)
        self.w_h = nn.Parameter(torch.empty(kd, m, self.gate_channels).uniform_(-bound, bound))
        b_h = torch.zeros(self.gate_channels)
        b_h[2 * m:3 * m] = forget_bias  # gate order G, I, F, O, Q
        self.b_h = nn.Parameter(b_h)
        if arch.norm != "none":
            self.norm_gain = nn.Parameter(torch.ones(self.num_locations, m))
            self.norm_bias = nn.Parameter(torch.zeros(self.num_locations, m))
        hidden_index, cell_index = build_index_maps(arch, p)
        self.register_buffer("hidden_index", hidden_index, persistent=False)
        self.register_buffer("cell_index", cell_index, persistent=False)
        self.implementation = implementation

    # ---- the step -----------------------------------------------------------------
    def normalize(self, c: torch.Tensor) -> torch.Tensor:
        """N(C) of SPEC section 5: identity, LN over (N, M) per example, or CN over M per location."""
        if self.arch.norm == "ln":
            return F.layer_norm(c, c.shape[-2:], self.norm_gain, self.norm_bias, NORM_EPS)
        if self.arch.norm == "cn":
            return F.layer_norm(c, c.shape[-1:], None, None, NORM_EPS) * self.norm_gain + self.norm_bias
        return c

    def step(self, z: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> TLSTMState:
        """One tLSTM step (paper eqs. 10-15). z: (B, M); h, c: (B, N, M)."""
        b, n, m = h.shape
        src = torch.cat([h.new_zeros(b, 1, m), z.unsqueeze(1), h], dim=1)  # (B, 2+N, M)
        window = src[:, self.hidden_index]  # (B, N, Kd, M)
        a = window.reshape(b, n, -1) @ self.w_h.reshape(-1, self.gate_channels) + self.b_h
        g = torch.tanh(a[..., :m])
        i = torch.sigmoid(a[..., m:2 * m])
        f = torch.sigmoid(a[..., 2 * m:3 * m])
        o = torch.sigmoid(a[..., 3 * m:4 * m])
        if self.arch.memory_conv:
            q = torch.softmax(a[..., 4 * m:], dim=-1)  # (B, N, Kd)
            c_prev = torch.einsum("bnkm,bnk->bnm", c[:, self.cell_index], q)
        else:
            c_prev = c
        c = g * i + c_prev * f
        h = torch.tanh(self.normalize(c)) * o
        return TLSTMState(h, c)

    def zero_state(self, batch: int, like: torch.Tensor) -> TLSTMState:
        zeros = like.new_zeros(batch, self.num_locations, self.channels)
        return TLSTMState(zeros, zeros)

    # ---- a sequence ---------------------------------------------------------------
    def forward(self, x: torch.Tensor, state: TLSTMState | None = None):
        z = self.project_inputs(x)  # (B, T, M)
        if state is None:
            state = self.zero_state(z.shape[0], z)
        run = TLSTM_IMPLEMENTATIONS[self.implementation]
        h_out, state = run(self, z, state)  # (B, T, M)
        return self.read_out(h_out), state


def eager_steps(model: TLSTM, z: torch.Tensor, state: TLSTMState):
    """Yield ``(s, h, c)`` after each of the T + L - 1 steps; the last L - 1 are fed the
    flush input (x = 0). Shared by ``run_eager`` and the figure-6 trace."""
    seq_len = z.shape[1]
    h, c = state
    flush = model.flush_input(z.shape[0])
    for s in range(seq_len + model.depth - 1):
        h, c = model.step(z[:, s] if s < seq_len else flush, h, c)
        yield s, h, c


def run_eager(model: TLSTM, z: torch.Tensor, state: TLSTMState):
    """Run T + L - 1 steps; read y_t at the output corner at step t + L - 1.

    Returns the output-location hidden states (B, T, M) and the state after step T.
    """
    seq_len = z.shape[1]
    outputs = []
    after_input = state
    for s, h, c in eager_steps(model, z, state):
        if s == seq_len - 1:
            after_input = TLSTMState(h, c)
        if s >= model.depth - 1:
            outputs.append(h[:, -1])
    return torch.stack(outputs, dim=1), after_input


# Implementations of the (T+L-1)-step loop, selectable per model by name. The oracle
# (models.oracle) registers "reference"; faster paths register themselves here, and
# models/__init__ registers the lazy "triton" runner last (it imports models.triton_tlstm,
# which imports this module).
TLSTM_IMPLEMENTATIONS: dict[str, Callable] = {"eager": run_eager}
