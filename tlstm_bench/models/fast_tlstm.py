"""``fast``: the tLSTM sequence as one autograd Function with a hand-written backward.

Same computation as ``eager`` (:mod:`tlstm_bench.models.tlstm`, SPEC section 3), with the
Python and autograd overhead taken out of the per-timestep loop:

* the inputs of all T steps are projected in one product before the loop (the model's
  ``project_inputs``) and written, with the L-1 flush inputs, into one preallocated
  buffer ``src`` of shape (S+1, B, 2+N, M), S = T+L-1, whose slot 1 holds z_s and whose
  slots 2.. receive h_s as it is computed (slot 0 is the zero of the padding);
* the forward loop records no autograd graph: about a dozen ATen calls per step, most
  writing into preallocated buffers (``out=`` / in place);
* the backward loop walks the steps in reverse with the transposed operations
  (``index_add_`` for the gathers, ``*_backward`` ATen kernels for the activations) and
  keeps only the pre-activation gradients; the gradient of the recurrent kernel W^h is
  deferred to ONE matrix product over all S steps (windows^T @ dA), the norm gain and
  bias gradients to one reduction;
* the cross-layer convolution is a gather of each location's K^(D-1) window
  (``index_select`` with the model's ``hidden_index``) and one ``addmm``. This was chosen
  by measurement over ``conv1d`` (2D) and unfold + matmul: see ``benchmarks/conv_choice.py``
  and the evidence report (results/evidence/REPORT.md). The gather works for any D and K.

It handles every configuration the knobs allow (any D >= 2, K >= 2, memory convolution
on or off, norm none/ln/cn), any batch, float32/float64, CPU or CUDA. It does not
support double backward (``torch.autograd.grad(..., create_graph=True)`` through it):
use ``implementation="eager"`` for that.
"""

from __future__ import annotations

import contextlib
import warnings

import torch

from .tlstm import NORM_EPS, TLSTM, TLSTM_IMPLEMENTATIONS, SequenceShapes, TLSTMState

_aten = torch.ops.aten


class _Geometry(SequenceShapes):
    """What the Function needs from the model that is not a tensor to differentiate."""

    def __init__(self, model: TLSTM, seq_len: int):
        super().__init__(model, seq_len)
        self.hidden_index = model.hidden_index.reshape(-1)  # (N*Kd,) slots of [0, z, h_0..h_{N-1}]
        self.cell_index = model.cell_index.reshape(-1)  # (N*Kd,) clamped cell locations
        # The two step loops (below). Only the CI gate's test-only slowdown
        # (timing/inject.py) swaps in others; the normal path pays one attribute read per call.
        self.forward_loop = _forward_loop
        self.backward_loop = _backward_loop


# The two loops are TorchScript: at batch 1 the per-step work is a few dozen small ATen
# calls, and the TorchScript interpreter dispatches them about 5x faster than Python
# does (measured here: 8 us vs 43 us for the same four calls). They run with the graph
# executor's optimisations off: its profiling and shape-specialised re-optimisation
# made every call 3x slower here (and the first calls 10x), with nothing to fuse on a
# CPU. norm: 0 none, 1 cn, 2 ln.


def _script(fn):
    """TorchScript ``fn``; if this torch cannot (TorchScript is deprecated), keep it as Python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return torch.jit.script(fn)
        except Exception:  # noqa: BLE001  (same computation, only slower)
            return fn


@_script
def _forward_loop(src: torch.Tensor, cs: torch.Tensor, acts: torch.Tensor, tns: torch.Tensor,
                  ccs: torch.Tensor, means: torch.Tensor, rstds: torch.Tensor, w2: torch.Tensor,
                  b_h: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, hidx: torch.Tensor,
                  cidx: torch.Tensor, m: int, n: int, kd: int, norm: int, memory_conv: bool, eps: float):
    steps, b = acts.shape[0], src.shape[1]
    bmn, gc = b * n, acts.shape[2]
    for s in range(steps):
        window = src[s].index_select(1, hidx).view(bmn, kd * m)  # (B*N, Kd*M)
        a = acts[s]
        torch.addmm(b_h, window, w2, out=a)  # paper eq. 10
        # narrow(), not [:, a:b]: TorchScript makes one slice call per indexed dimension.
        a.narrow(1, 0, m).tanh_()  # G (eq. 11)
        a.narrow(1, m, 3 * m).sigmoid_()  # I, F, O
        a3 = a.view(b, n, gc)
        if memory_conv:
            q = a.narrow(1, 4 * m, kd)
            q.copy_(torch.softmax(q, -1))  # eq. 12
            cw = cs[s].index_select(1, cidx).view(bmn, kd, m)  # replicate-padded windows
            torch.bmm(q.unsqueeze(1), cw, out=ccs[s])  # eq. 13
            c_prev = ccs[s].view(b, n, m)
        else:
            c_prev = cs[s]
        c = cs[s + 1]
        torch.mul(a3.narrow(2, 0, m), a3.narrow(2, m, m), out=c)
        c.addcmul_(c_prev, a3.narrow(2, 2 * m, m))  # eq. 14
        if norm == 1:
            xhat, mean, rstd = torch.native_layer_norm(c, [m], None, None, eps)
            means[s] = mean
            rstds[s] = rstd
            normed = torch.addcmul(bias, xhat, gain)
        elif norm == 2:
            normed, mean, rstd = torch.native_layer_norm(c, [n, m], gain, bias, eps)
            means[s] = mean
            rstds[s] = rstd
        else:
            normed = c
        torch.tanh(normed, out=tns[s])
        torch.mul(tns[s], a3.narrow(2, 3 * m, m), out=src[s + 1].narrow(1, 2, n))  # eq. 15


@_script
def _backward_loop(src: torch.Tensor, cs: torch.Tensor, acts: torch.Tensor, tns: torch.Tensor,
                   ccs: torch.Tensor, means: torch.Tensor, rstds: torch.Tensor, w2t: torch.Tensor,
                   gain: torch.Tensor, hidx: torch.Tensor, cidx: torch.Tensor, dsrc: torch.Tensor,
                   dcs: torch.Tensor, das: torch.Tensor, dns: torch.Tensor, m: int, n: int, kd: int,
                   norm: int, memory_conv: bool):
    steps, b = acts.shape[0], src.shape[1]
    bmn, gc = b * n, acts.shape[2]
    for s in range(steps - 1, -1, -1):
        gh = dsrc[s + 1].narrow(1, 2, n)  # d loss / d h_s (outside + step s+1)
        dc = dcs[s + 1]  # d loss / d c_s (outside + step s+1)
        a = acts[s]
        a3 = a.view(b, n, gc)
        g, i, f, o = a3.narrow(2, 0, m), a3.narrow(2, m, m), a3.narrow(2, 2 * m, m), a3.narrow(2, 3 * m, m)
        da = das[s]
        da3 = da.view(b, n, gc)
        tn = tns[s]
        torch.mul(gh, tn, out=da3.narrow(2, 3 * m, m))  # d o
        dn = torch.ops.aten.tanh_backward(gh * o, tn)
        if norm == 1:
            dns[s] = dn
            dc.add_(torch.ops.aten.native_layer_norm_backward(
                dn * gain, cs[s + 1], [m], means[s], rstds[s], None, None, [True, False, False])[0])
        elif norm == 2:
            dns[s] = dn
            dc.add_(torch.ops.aten.native_layer_norm_backward(
                dn, cs[s + 1], [n, m], means[s], rstds[s], gain, None, [True, False, False])[0])
        else:
            dc.add_(dn)
        if memory_conv:
            c_prev = ccs[s].view(b, n, m)
        else:
            c_prev = cs[s]
        dg = da3.narrow(2, 0, m)
        torch.mul(dc, i, out=dg)
        torch.ops.aten.tanh_backward(dg, g, grad_input=dg)  # in place: same memory in and out
        torch.mul(dc, g, out=da3.narrow(2, m, m))
        torch.mul(dc, c_prev, out=da3.narrow(2, 2 * m, m))
        ifo = da.narrow(1, m, 3 * m)
        torch.ops.aten.sigmoid_backward(ifo, a.narrow(1, m, 3 * m), grad_input=ifo)
        if memory_conv:
            dc_prev = (dc * f).view(bmn, 1, m)
            q = a.narrow(1, 4 * m, kd)
            cw = cs[s].index_select(1, cidx).view(bmn, kd, m)
            dq = torch.bmm(cw, dc_prev.view(bmn, m, 1)).view(bmn, kd)
            da.narrow(1, 4 * m, kd).copy_(torch.ops.aten._softmax_backward_data(dq, q, -1, dq.dtype))
            dcw = torch.mul(q.unsqueeze(2), dc_prev)  # (B*N, Kd, M)
            dcs[s].index_add_(1, cidx, dcw.view(b, n * kd, m))
        else:
            dcs[s].addcmul_(dc, f)
        dwindow = torch.mm(da, w2t)  # (B*N, Kd*M)
        dsrc[s].index_add_(1, hidx, dwindow.view(b, n * kd, m))




def _below_autograd():
    """Dispatch the loops' ops straight to their kernels, past the autograd dispatch layers.

    Nothing in the loops is differentiated by autograd (this Function is its own backward),
    and skipping those layers halved the per-step cost at batch 1 here (2D, L=10: 0.60 ->
    0.39 ms per timestep). A private torch guard; without it the loops run as before.
    """
    guard = getattr(torch._C, "_AutoDispatchBelowADInplaceOrView", None)
    return guard() if guard is not None else contextlib.nullcontext()


class TLSTMSequence(torch.autograd.Function):
    """(z_all, h0, c0, w_h, b_h, gain, bias) -> (h_out (B,T,M), h_T (B,N,M), c_T (B,N,M)).

    ``z_all`` (B, S, M) holds the T projected inputs followed by the L-1 flush inputs.
    """

    @staticmethod
    def forward(ctx, geo: _Geometry, z_all, h0, c0, w_h, b_h, gain, bias):
        b, steps, m = z_all.shape
        n, kd, gc = geo.n, geo.kd, geo.g
        # src[s] = [0, z_s, h_{s-1}] (the gather source of step s, SPEC section 3 step 2).
        src = z_all.new_zeros(steps + 1, b, 2 + n, m)
        src[:steps, :, 1] = z_all.transpose(0, 1)
        src[0, :, 2:] = h0
        cs = z_all.new_empty(steps + 1, b, n, m)  # cs[s+1] = c_s
        cs[0] = c0
        acts = z_all.new_empty(steps, b * n, gc)  # G, I, F, O, Q after their activations
        tns = z_all.new_empty(steps, b, n, m)  # tanh(N(c_s))
        empty = z_all.new_empty(0)
        ccs = z_all.new_empty(steps, b * n, 1, m) if geo.memory_conv else empty  # Cconv_{s-1}
        stats_shape = (steps, b, n, 1) if geo.norm == "cn" else (steps, b, 1, 1)
        means = z_all.new_empty(stats_shape) if geo.norm != "none" else empty
        rstds = z_all.new_empty(stats_shape) if geo.norm != "none" else empty
        with torch.jit.optimized_execution(False), _below_autograd():
            geo.forward_loop(src, cs, acts, tns, ccs, means, rstds, w_h.reshape(kd * m, gc), b_h,
                             gain if gain is not None else empty, bias if bias is not None else empty,
                             geo.hidden_index, geo.cell_index, m, n, kd, geo.norm_code,
                             geo.memory_conv, NORM_EPS)
        seq_len, depth = geo.seq_len, geo.depth
        h_out = src[depth:, :, 1 + n].transpose(0, 1).clone()  # y read at steps L-1 .. S-1
        h_t = src[seq_len, :, 2:].clone()
        c_t = cs[seq_len].clone()
        ctx.geo = geo
        ctx.buffers = (src, cs, acts, tns, ccs, means, rstds)
        ctx.save_for_backward(w_h, gain)
        return h_out, h_t, c_t

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out, d_ht, d_ct):
        geo = ctx.geo
        src, cs, acts, tns, ccs, means, rstds = ctx.buffers
        w_h, gain = ctx.saved_tensors
        steps, b = acts.shape[0], src.shape[1]
        m, n, kd, gc = geo.m, geo.n, geo.kd, geo.g
        hidx = geo.hidden_index
        seq_len, depth = geo.seq_len, geo.depth
        bmn = b * n
        # dsrc[s] = d loss / d src[s]; slots 2.. of dsrc[s+1] are d loss / d h_s. The
        # gradients arriving from outside (outputs, final state) are written in first, and
        # step s+1 adds what flows back through it (index_add_), so no per-step sum is needed.
        dsrc = src.new_zeros(steps + 1, b, 2 + n, m)
        if d_out is not None:
            dsrc[depth:, :, 1 + n] = d_out.transpose(0, 1)
        if d_ht is not None:
            dsrc[seq_len, :, 2:] += d_ht
        dcs = src.new_zeros(steps + 1, b, n, m)  # dcs[s+1] = d loss / d c_s
        if d_ct is not None:
            dcs[seq_len] += d_ct
        das = src.new_empty(steps, bmn, gc)  # d loss / d pre-activations of step s
        empty = src.new_empty(0)
        dns = src.new_empty(steps, b, n, m) if geo.norm != "none" else empty
        with torch.jit.optimized_execution(False), _below_autograd():
            geo.backward_loop(src, cs, acts, tns, ccs, means, rstds, w_h.reshape(kd * m, gc).t(),
                              gain if gain is not None else empty, hidx, geo.cell_index, dsrc, dcs, das,
                              dns, m, n, kd, geo.norm_code, geo.memory_conv)
        needs = ctx.needs_input_grad
        dz = dsrc[:steps, :, 1].transpose(0, 1) if needs[1] else None
        d_wh = d_bh = d_gain = d_bias = None
        if needs[4]:
            # The deferred weight gradient: sum over steps of window_s^T dA_s, as few large
            # products (chunks keep the gathered windows under ~64 MB).
            d_wh = w_h.new_zeros(kd * m, gc)
            per_step = bmn * kd * m * src.element_size()
            chunk = max(1, (64 << 20) // max(per_step, 1))
            for s0 in range(0, steps, chunk):
                s1 = min(steps, s0 + chunk)
                windows = src[s0:s1].index_select(2, hidx).view(-1, kd * m)
                d_wh.addmm_(windows.t(), das[s0:s1].view(-1, gc))
            d_wh = d_wh.view(kd, m, gc)
        if needs[5]:
            d_bh = das.view(-1, gc).sum(0)
        if geo.norm != "none" and (needs[6] or needs[7]):
            xhat = (cs[1:] - means) * rstds
            d_gain = (dns * xhat).sum((0, 1))
            d_bias = dns.sum((0, 1))
        d_h0 = dsrc[0, :, 2:] if needs[2] else None
        d_c0 = dcs[0] if needs[3] else None
        return None, dz, d_h0, d_c0, d_wh, d_bh, d_gain, d_bias


def run_fast(model: TLSTM, z: torch.Tensor, state: TLSTMState, *, loops=None):
    """T + L - 1 steps through :class:`TLSTMSequence`; same contract as ``run_eager``.

    ``loops``: (forward, backward) step loops to run instead of ours; only the CI gate's
    test-only slowdown (``tlstm_bench.timing.inject``) passes them.
    """
    batch, seq_len, m = z.shape
    if model.depth > 1:
        z = torch.cat([z, model.b_x.expand(batch, model.depth - 1, m)], dim=1)  # flush: x = 0
    norm = model.arch.norm != "none"
    geo = _Geometry(model, seq_len)
    if loops is not None:
        geo.forward_loop, geo.backward_loop = loops
    h_out, h_t, c_t = TLSTMSequence.apply(
        geo, z, state.h, state.c, model.w_h, model.b_h,
        model.norm_gain if norm else None, model.norm_bias if norm else None)
    return h_out, TLSTMState(h_t, c_t)


TLSTM_IMPLEMENTATIONS["fast"] = run_fast
