"""The autograd Function over a whole sequence (forward and hand-written backward), the
deferred per-sequence products after the backward kernels, and the entry point."""

from __future__ import annotations

import torch

from ...errors import UserError
from ...vocab import DEFAULT_PRECISION
from ..cuda_graph import TRITON_NEEDS_CUDA
from ..tlstm import HIDDEN_OFFSET, TLSTM, TLSTMState
from .common import INTERPRETED
from .launch import Geometry, launch_backward, launch_forward


class TritonSequence(torch.autograd.Function):
    """(z_all, h0, c0, w_h, b_h, gain, bias) -> (h_out (B,T,M), h_T (B,N,M), c_T (B,N,M)).

    ``z_all`` (B, S, M) holds the T projected inputs followed by the L-1 flush inputs.
    """

    @staticmethod
    def forward(ctx, geo: Geometry, z_all, h0, c0, w_h, b_h, gain, bias):
        b, steps, m = z_all.shape
        n, kd, gc, nj = geo.n, geo.kd, geo.g, geo.nj
        norm = geo.norm_code
        z_all = z_all.contiguous()
        w2 = w_h.reshape(kd * m, gc).contiguous()
        hs = z_all.new_empty(steps + 1, b, n, m)  # hs[s+1] = h_s
        hs[0] = h0
        cs = z_all.new_empty(steps + 1, b, n, m)  # cs[s+1] = c_s
        cs[0] = c0
        acts = z_all.new_empty(steps, b, n, gc)  # G, I, F, O, Q after their activations
        dummy = z_all.new_empty(1)
        pmean = z_all.new_empty(steps, b, n, nj) if norm else dummy
        pm2 = z_all.new_empty(steps, b, n, nj) if norm else dummy
        mean = z_all.new_empty(steps, b, n) if norm else dummy
        rstd = z_all.new_empty(steps, b, n) if norm else dummy
        gain_t = gain.contiguous() if gain is not None else dummy
        bias_t = bias.contiguous() if bias is not None else dummy
        launch_forward(geo, (z_all, hs, cs, acts, pmean, pm2, mean, rstd), (w2, b_h, gain_t, bias_t), steps)
        seq_len, depth = geo.seq_len, geo.depth
        h_out = hs[depth:, :, n - 1].transpose(0, 1).clone()  # y read at steps L-1 .. S-1
        h_t = hs[seq_len].clone()
        c_t = cs[seq_len].clone()
        ctx.geo = geo
        ctx.buffers = (z_all, hs, cs, acts, mean, rstd)
        ctx.save_for_backward(w_h, gain, bias)
        return h_out, h_t, c_t

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out, d_ht, d_ct):
        geo = ctx.geo
        z_all, hs, cs, acts, mean, rstd = ctx.buffers
        w_h, gain, bias = ctx.saved_tensors
        b, m, n = acts.shape[1], geo.m, geo.n
        d_out = d_out.contiguous() if d_out is not None else acts.new_zeros(b, geo.seq_len, m)
        d_ht = d_ht.contiguous() if d_ht is not None else acts.new_zeros(b, n, m)
        d_ct = d_ct.contiguous() if d_ct is not None else acts.new_zeros(b, n, m)
        w2 = w_h.reshape(geo.kd * m, geo.g).contiguous()
        g = _backward_steps(geo, ctx.buffers, w2, gain, bias, d_out, d_ht, d_ct)
        alpha, beta = _complete_gate_grads(geo, acts, g)
        needs = ctx.needs_input_grad
        # dz_s: W^h dA_s through the window entries that read z (INPUT_SLOT).
        dz = None
        if needs[1]:
            pairs = geo.input_entries
            dz = torch.einsum("sbpg,pmg->bsm", g["das"][:, :, pairs[:, 0]], w_h[pairs[:, 1]])
        d_h0 = _initial_hidden_grad(geo, g["das"], w2) if needs[2] else None
        d_c0 = _initial_cell_grad(geo, cs, acts, mean, rstd, g["dcs"], alpha, beta) if needs[3] else None
        d_wh = _weight_grad(geo, z_all, hs, acts, w2, g["das"]) if needs[4] else None
        d_bh = g["das"].view(-1, geo.g).sum(0) if needs[5] else None
        d_gain = d_bias = None
        if geo.norm != "none" and (needs[6] or needs[7]):
            xhat = (cs[1:] - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)
            d_gain = (g["dns"] * xhat).sum((0, 1))
            d_bias = g["dns"].sum((0, 1))
        return None, dz, d_h0, d_c0, d_wh, d_bh, d_gain, d_bias




def _backward_steps(geo: Geometry, buffers: tuple, w2, gain, bias, d_out, d_ht, d_ct) -> dict:
    """Launch the backward kernel for s = S-1 .. 0; its buffers by name (see ``backward_body``)."""
    z_all, hs, cs, acts, mean, rstd = buffers
    steps, b = acts.shape[0], acts.shape[1]
    m, n, kd, gc, nj = geo.m, geo.n, geo.kd, geo.g, geo.nj
    norm = geo.norm_code
    tiles = geo.tiles
    kdp = tiles["KDP"]
    dummy = acts.new_empty(1)
    g = {
        "das": acts.new_empty(steps, b, n, gc),  # dL/dA_s (gate columns local until completed)
        "dcs": acts.new_empty(steps, b, n, m),  # dc_s without the norm's deferred terms
        "e1": acts.new_empty(steps, b, n, 4 * m) if norm else dummy,
        "e2": acts.new_empty(steps, b, n, 4 * m) if norm else dummy,
        "dns": acts.new_empty(steps, b, n, m) if norm else dummy,
        "pa": acts.new_empty(steps, b, n, nj) if norm else dummy,
        "pb": acts.new_empty(steps, b, n, nj) if norm else dummy,
        "dql": acts.new_empty(steps, b, n, nj, kdp) if geo.memory_conv else dummy,
        "dq1": acts.new_empty(steps, b, n, nj, kdp) if geo.memory_conv and norm else dummy,
        "dq2": acts.new_empty(steps, b, n, nj, kdp) if geo.memory_conv and norm else dummy,
    }
    gain_t = gain.contiguous() if gain is not None else dummy
    bias_t = bias.contiguous() if bias is not None else dummy
    launch_backward(geo, cs, acts, mean, rstd, (w2, gain_t, bias_t), g, (d_out, d_ht, d_ct))
    return g


def _complete_gate_grads(geo: Geometry, acts, g: dict):
    """Complete every dA_s with the deferred terms (the kernels did it on the fly for their
    neighbours; here it is done once for the per-sequence products). The norm's (alpha, beta),
    or (None, None) without a norm."""
    m, n, kd = geo.m, geo.n, geo.kd
    das = g["das"]
    alpha = beta = None
    if geo.norm != "none":
        alpha, beta = g["pa"].sum(-1), g["pb"].sum(-1)  # (S, B, N)
        if geo.norm == "ln":
            alpha, beta = alpha.sum(-1, keepdim=True) / (n * m), beta.sum(-1, keepdim=True) / (n * m)
        else:
            alpha, beta = alpha / m, beta / m
        das[..., :4 * m] -= alpha.unsqueeze(-1) * g["e1"] + beta.unsqueeze(-1) * g["e2"]
    if geo.memory_conv:
        dq = g["dql"].sum(3)[..., :kd]
        if alpha is not None:
            dq -= alpha.unsqueeze(-1) * g["dq1"].sum(3)[..., :kd] + beta.unsqueeze(-1) * g["dq2"].sum(3)[..., :kd]
        q = acts[..., 4 * m:]
        das[..., 4 * m:] = q * (dq - (q * dq).sum(-1, keepdim=True))  # softmax backward (eq. 12)
    return alpha, beta


def _initial_hidden_grad(geo: Geometry, das, w2):
    """dL/dh_0: the first step's dA through the window entries that read h_0."""
    b, n, kd, m, gc = das.shape[1], geo.n, geo.kd, geo.m, geo.g
    dwin = (das[0].reshape(b * n, gc) @ w2.t()).view(b, n * kd, m)
    return das.new_zeros(b, HIDDEN_OFFSET + n, m).index_add_(
        1, geo.hidden_long, dwin)[:, HIDDEN_OFFSET:]


def _initial_cell_grad(geo: Geometry, cs, acts, mean, rstd, dcs, alpha, beta):
    """dL/dc_0: through the first step's forget gate (and its memory-cell convolution)."""
    b, n, kd, m = acts.shape[1], geo.n, geo.kd, geo.m
    dc0 = dcs[0]
    if alpha is not None:
        xhat0 = (cs[1] - mean[0].unsqueeze(-1)) * rstd[0].unsqueeze(-1)
        dc0 = dc0 - rstd[0].unsqueeze(-1) * (alpha[0].unsqueeze(-1) + beta[0].unsqueeze(-1) * xhat0)
    dcf0 = dc0 * acts[0, :, :, 2 * m:3 * m]
    if not geo.memory_conv:
        return dcf0
    contrib = (acts[0, :, :, 4 * m:].unsqueeze(-1) * dcf0.unsqueeze(2)).reshape(b, n * kd, m)
    return acts.new_zeros(b, n, m).index_add_(1, geo.cell_long, contrib)


def _weight_grad(geo: Geometry, z_all, hs, acts, w2, das):
    """The deferred weight gradient: sum over steps of window_s^T dA_s, chunked so the gathered
    windows stay under ~64 MB (as in ``fast``)."""
    steps, b = acts.shape[0], acts.shape[1]
    kd, m, gc, n = geo.kd, geo.m, geo.g, geo.n
    hidx = geo.hidden_long
    d_wh = w2.new_zeros(kd * m, gc)
    per_step = b * n * kd * m * acts.element_size()
    chunk = max(1, (64 << 20) // max(per_step, 1))
    for s0 in range(0, steps, chunk):
        s1 = min(steps, s0 + chunk)
        src = torch.cat([acts.new_zeros(s1 - s0, b, 1, m), z_all[:, s0:s1].transpose(0, 1).unsqueeze(2),
                         hs[s0:s1]], dim=2)  # [0, z_s, h_{s-1}]
        windows = src.index_select(2, hidx).view(-1, kd * m)
        d_wh.addmm_(windows.t(), das[s0:s1].view(-1, gc))
    return d_wh.view(kd, m, gc)


_DTYPES = (torch.float32, torch.float64)


def check_runnable(z: torch.Tensor, model: TLSTM) -> None:
    """One-line errors for what this implementation cannot run."""
    if z.dtype not in _DTYPES or model.w_h.dtype != z.dtype:
        raise UserError(f"implementation 'triton' supports float32 and float64, got {z.dtype}; "
                        "use implementation 'fast'")
    if not z.is_cuda and not INTERPRETED:
        raise UserError(TRITON_NEEDS_CUDA)


def run_triton(model: TLSTM, z: torch.Tensor, state: TLSTMState):
    """T + L - 1 steps through :class:`TritonSequence`; same contract as ``run_eager``."""
    check_runnable(z, model)
    batch, seq_len, m = z.shape
    if model.depth > 1:
        z = torch.cat([z, model.b_x.expand(batch, model.depth - 1, m)], dim=1)  # flush: x = 0
    norm = model.arch.norm != "none"
    geo = Geometry(model, seq_len, batch, getattr(model, "precision", DEFAULT_PRECISION))
    model.__dict__["triton_last"] = geo.describe()  # what ran (tile set, path, precision), for records
    h_out, h_t, c_t = TritonSequence.apply(
        geo, z, state.h.contiguous(), state.c.contiguous(), model.w_h, model.b_h,
        model.norm_gain if norm else None, model.norm_bias if norm else None)
    return h_out, TLSTMState(h_t, c_t)
