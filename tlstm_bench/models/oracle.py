"""The slow, obvious tLSTM: SPEC section 3 followed literally, one location at a time.

This is the oracle. It shares nothing with the fast paths but the parameters: no index
maps, no gathers, no batched convolutions. Every location of ``Hcat`` is decided by the
spec's case analysis, every kernel window is walked offset by offset, the norms are
written out with their means and variances. It is only meant for tiny models in tests
(and as the ``reference`` implementation the runtime benchmark compares against).
"""

from __future__ import annotations

import itertools

import torch

from .tlstm import NORM_EPS, TLSTM, TLSTM_IMPLEMENTATIONS, TLSTMState


def _hcat(coord, z, h_grid, size):
    """Hcat at a coordinate (SPEC section 3 step 2): z_t at the corner, h_{p-1} inside, else 0."""
    if any(x < 0 or x > size for x in coord):
        return torch.zeros_like(z)  # zero padding outside the tensor
    if all(x == 0 for x in coord):
        return z
    if all(x >= 1 for x in coord):
        return h_grid[tuple(x - 1 for x in coord)]
    return torch.zeros_like(z)  # first row/column except the corner


def _cell_source(window, p, off, size):
    """The memory-cell location that location p reads for kernel offset ``off`` (SPEC section 3 step 5).

    ``aligned``: ``C_{p+off}``, the same locations as the hidden window. ``appendix``:
    appendix A.2 as written, ``C_{t-1, p-(K-1)/2+k}``, the index expression that A.1 uses
    on Hcat, where hidden p reads Hcat location ``p+1+off``; applied to C it reads
    ``C_{p+1+off}``. Either way out-of-range coordinates take the border value (replicate
    padding: A.2, "padded with the replication of its boundary values").
    """
    if window == "appendix":
        coord = tuple(pi + 1 + oi for pi, oi in zip(p, off))
    elif window == "aligned":
        coord = tuple(pi + oi for pi, oi in zip(p, off))
    else:
        raise ValueError(f"unknown window {window!r}")
    return tuple(min(max(x, 0), size - 1) for x in coord)


def reference_step(model: TLSTM, z, h_grid, c_grid):
    """One step on dicts {hidden coordinate (0-based): (B, M) tensor}."""
    arch, m, size = model.arch, model.channels, model.tensor_size
    span = range(-arch.reach_in, arch.reach_out + 1)
    offsets = list(itertools.product(span, repeat=arch.dims - 1))
    coords = list(itertools.product(range(size), repeat=arch.dims - 1))
    new_c = {}
    gates_o = {}
    for p in coords:
        # Cross-layer convolution at hidden p = Hcat location p+1 (paper eq. 10, appendix A.1).
        a = model.b_h.expand(z.shape[0], -1)
        for k, off in enumerate(offsets):
            src = _hcat(tuple(pi + 1 + oi for pi, oi in zip(p, off)), z, h_grid, size)
            a = a + src @ model.w_h[k]
        g = torch.tanh(a[:, :m])
        i = torch.sigmoid(a[:, m:2 * m])
        f = torch.sigmoid(a[:, 2 * m:3 * m])
        o = torch.sigmoid(a[:, 3 * m:4 * m])
        if arch.memory_conv:
            # Memory-cell convolution with the softmax kernel Q, replicate padding (eqs. 12-13, A.2).
            q = torch.softmax(a[:, 4 * m:], dim=-1)
            c_conv = torch.zeros_like(z)
            for k, off in enumerate(offsets):
                src = _cell_source(arch.window, p, off, size)
                c_conv = c_conv + c_grid[src] * q[:, k:k + 1]
        else:
            c_conv = c_grid[p]
        new_c[p] = g * i + c_conv * f  # eq. 14
        gates_o[p] = o
    normed = _reference_norm(model, new_c, coords)
    new_h = {p: torch.tanh(normed[p]) * gates_o[p] for p in coords}  # eq. 15
    return new_h, new_c


def _reference_norm(model: TLSTM, c, coords):
    norm = model.arch.norm
    if norm == "none":
        return c
    gain = {p: model.norm_gain[n] for n, p in enumerate(coords)}
    bias = {p: model.norm_bias[n] for n, p in enumerate(coords)}
    if norm == "cn":
        # Channel normalisation: each location by its own mean and (biased) variance over M.
        out = {}
        for p in coords:
            mean = c[p].mean(dim=-1, keepdim=True)
            var = ((c[p] - mean) ** 2).mean(dim=-1, keepdim=True)
            out[p] = (c[p] - mean) / torch.sqrt(var + NORM_EPS) * gain[p] + bias[p]
        return out
    # Layer normalisation: one mean and variance over every location and channel.
    allc = torch.stack([c[p] for p in coords], dim=1)
    mean = allc.mean(dim=(1, 2), keepdim=True)[:, 0]
    var = ((allc - mean[:, None]) ** 2).mean(dim=(1, 2), keepdim=True)[:, 0]
    return {p: (c[p] - mean) / torch.sqrt(var + NORM_EPS) * gain[p] + bias[p] for p in coords}


def run_reference(model: TLSTM, z: torch.Tensor, state: TLSTMState):
    """T + L - 1 literal steps; outputs read at the far corner at steps L .. T+L-1."""
    size, dims = model.tensor_size, model.arch.dims
    coords = list(itertools.product(range(size), repeat=dims - 1))
    h_grid = {p: state.h[:, n] for n, p in enumerate(coords)}
    c_grid = {p: state.c[:, n] for n, p in enumerate(coords)}
    batch, seq_len, _ = z.shape
    last = tuple([size - 1] * (dims - 1))
    outputs = []
    after_input = state
    for s in range(seq_len + model.depth - 1):
        z_s = z[:, s] if s < seq_len else model.b_x.expand(batch, -1)  # flush: x = 0
        h_grid, c_grid = reference_step(model, z_s, h_grid, c_grid)
        if s == seq_len - 1:
            after_input = TLSTMState(torch.stack([h_grid[p] for p in coords], 1),
                                     torch.stack([c_grid[p] for p in coords], 1))
        if s >= model.depth - 1:
            outputs.append(h_grid[last])
    return torch.stack(outputs, dim=1), after_input


TLSTM_IMPLEMENTATIONS["reference"] = run_reference
